"""`sqsjobs init`, the expensive checks on three projects that together cover every option.

- standard, no extras, carrying a wheel of this checkout (`--sqsjobs-spec`, copied into layer/wheels):
  `sqsjobs check` (the command), `sam validate --lint`, `sam build` outside this repository (lean: the
  layer and functions of handlers only, nothing naming this machine), its pytest including the e2e test,
  and `sqsjobs local up --reload` driven from a shell's point of view: enqueue, an outcome line,
  `local env`, an edit that reloads the workers, `local down`;
- FIFO with every extra: `sam validate --lint`, its pytest with the e2e test (each extra exercised on the
  local cloud), `sqsjobs local up` and `sqsjobs local fire daily-summary`;
- standard with every extra: `sam validate --lint` and its pytest with the e2e test;
- durable (`--with durable`), carrying the same wheel: `sam build`, lean as the first, and its durable function's
  SDK in a layer of its own (its validation and its tests: test_init_durable.py).

The first two projects' pytest runs their tests/test_moto.py too: the worker on stock moto, as the user's own
tests would (the third's is the first's, on the same queues).

`sam build` runs on the standard and the durable project here and on issue 30's user's project in tests/dist;
test_init_matrix.py proves every combination has the same layer/ and functions holding only handlers/, so those
builds stand for all (the durable project's own layer, durable-layer/, is built only here).

Every combination gets the cheap checks in test_init_matrix.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from scaffold_support import (
    MOTO_TESTS,
    Dist,
    generate,
    lean_build,
    project_machine_paths,
    run_pytest,
    this_machine,
    unit_tests_of,
)
from tool_support import sam

from sqsjobs.scaffold import Extra, ProjectOptions
from sqsjobs.scaffold.source import parse_spec

ALL_EXTRAS = frozenset(Extra) - {Extra.DURABLE}  # its durable function: tests/scaffold/test_init_durable.py
SQSJOBS = Path(sys.executable).parent / "sqsjobs"


def cli(project: Path, state: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "SQSJOBS_LOCAL_STATE": str(state)}
    return subprocess.run([str(SQSJOBS), *args], cwd=project, env=env, capture_output=True, text=True,
                          timeout=timeout, check=False)


class LocalUp:
    """`sqsjobs local up` in the background, as in a second terminal; its output read line by line."""

    def __init__(self, project: Path, state: Path, *args: str) -> None:
        self.output = project / "local-up.log"
        env = {**os.environ, "SQSJOBS_LOCAL_STATE": str(state), "PYTHONUNBUFFERED": "1"}
        with self.output.open("w") as sink:
            self.process = subprocess.Popen([str(SQSJOBS), "local", "up", *args], cwd=project, env=env,
                                            stdout=sink, stderr=subprocess.STDOUT)

    def wait_for(self, text: str, timeout: float = 180) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            log = self.output.read_text()
            if text in log:
                return log
            if self.process.poll() is not None:
                raise AssertionError(f"local up exited ({self.process.returncode}) before {text!r}:\n{log}")
            time.sleep(0.3)
        raise AssertionError(f"no {text!r} within {timeout} s:\n{self.output.read_text()}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
        self.process.wait(timeout=60)


@pytest.fixture
def local_up() -> Iterator[list[LocalUp]]:
    started: list[LocalUp] = []
    yield started
    for process in started:
        process.stop()


@pytest.fixture
def wheel(dist: Dist) -> Path:
    """A wheel of this checkout, as `make dist` builds it (tests/conftest.py: built once, for tests/dist too)."""
    return dist.wheel


def built_lean(project: Path, *roots: str, own_layers: tuple[str, ...] = ()) -> dict[str, tuple[int, int]]:
    """`sam build` of ``project``, checked by lean_build; each artifact's (unzipped, zipped) bytes."""
    built = sam("build", "--template", "template.yaml", cwd=project)
    assert built.returncode == 0, built.stdout[-5000:] + built.stderr[-5000:]
    return lean_build(project / ".aws-sam" / "build", (*this_machine(), str(project.parent), *roots),
                      own_layers=own_layers)


@pytest.mark.timeout(1200)  # a wheel, a sam build and two local clouds, on a loaded machine
def test_standard_project_builds_outside_the_repo_and_runs_on_the_local_cloud(
    tmp_path: Path, wheel: Path, local_up: list[LocalUp]
) -> None:
    # The layer: layer/Makefile installs layer/requirements.txt, which finds the wheel copied into layer/wheels;
    # nothing of this repository, nor the wheel's own path, is referenced.
    project = generate(tmp_path, ProjectOptions(name="billing", source=parse_spec(str(wheel))))
    assert (project / "layer" / "requirements.txt").read_text().splitlines()[-1] == "sqsjobs==0.1.0"
    assert (project / "layer" / "wheels" / wheel.name).is_file()
    assert project_machine_paths(project, (*this_machine(), str(tmp_path), str(wheel.parent))) == {}
    state = tmp_path / "state.json"

    checked = cli(project, state, "check", "template.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    validated = sam("validate", "--lint", "--template", "template.yaml", cwd=project)
    assert validated.returncode == 0 and "is a valid SAM Template" in validated.stdout + validated.stderr, (
        validated.stdout + validated.stderr)

    sizes = built_lean(project, str(wheel.parent))
    assert sorted(sizes) == ["SqsjobsLayer", "WorkerFunction"]
    build = project / ".aws-sam" / "build"
    assert (build / "WorkerFunction" / "worker.py").is_file() and (build / "WorkerFunction" / "app.py").is_file()
    assert (build / "SqsjobsLayer" / "python" / "sqsjobs" / "__init__.py").is_file()

    tested = run_pytest(project)
    assert tested.returncode == 0 and f"{unit_tests_of(project) + 1 + MOTO_TESTS} passed" in tested.stdout, (
        tested.stdout + tested.stderr)

    up = LocalUp(project, state, "--reload")
    local_up.append(up)
    up.wait_for("ready")
    message_id = cli(project, state, "enqueue", "welcome", "user_id=7").stdout.strip()
    log = up.wait_for(f"message={message_id}")
    assert f"done             welcome key=welcome:7 message={message_id} attempt=1" in log
    exports = cli(project, state, "local", "env").stdout
    assert "export SQSJOBS_TABLE=" in exports and "export SQSJOBS_DLQ_URL=" in exports
    # A dead letter pages, as docs/getting-started.md shows (issue 25, finding 8: it used to say WARN).
    cli(project, state, "enqueue", "welcome", "user_id=0")
    log = up.wait_for("DeadLetterAlarm is in ALARM")
    (line,) = [line for line in log.splitlines() if "DeadLetterAlarm is in ALARM" in line]
    assert " PAGE alarm " in line, line

    app = project / "handlers" / "app.py"
    app.write_text(app.read_text().replace('app.logger.info("welcomed"', 'app.logger.info("welcomed again"'))
    up.wait_for("reloaded 1 of 1 function(s) after a change to app.py")
    second = cli(project, state, "enqueue", "welcome", "user_id=8").stdout.strip()
    log = up.wait_for(f"message={second}")
    assert "welcomed again" in log  # the new code ran; the queue and its tables were kept
    assert "duplicate" not in log.split("reloaded")[-1]

    down = cli(project, state, "local", "down")
    assert down.returncode == 0, down.stderr
    assert up.process.wait(timeout=60) == 0
    assert not state.exists()


@pytest.mark.timeout(900)
def test_fifo_project_with_every_extra(tmp_path: Path, local_up: list[LocalUp]) -> None:
    project = generate(tmp_path, ProjectOptions(name="orders", fifo=True, extras=ALL_EXTRAS))
    state = tmp_path / "state.json"
    validated = sam("validate", "--lint", "--template", "template.yaml", cwd=project)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    tested = run_pytest(project)
    assert tested.returncode == 0 and f"{unit_tests_of(project) + 1 + MOTO_TESTS} passed" in tested.stdout, (
        tested.stdout + tested.stderr)

    # A value that breaks a lint rule: `local up` says what `sqsjobs check -p` says, then runs the loop anyway.
    up = LocalUp(project, state, "-p", "QueueVisibilityTimeoutSeconds=10")
    local_up.append(up)
    log = up.wait_for("ready")
    assert "error template.yaml: E9101 JobsQueue.VisibilityTimeout: JobsQueue feeds WorkerFunction" in log
    assert "starting anyway" in log
    refused = cli(project, state, "check", "template.yaml", "-p", "QueueVisibilityTimeoutSeconds=10")
    assert refused.returncode != 0 and "E9101" in refused.stdout
    fired = cli(project, state, "local", "fire", "daily-summary")
    assert fired.returncode == 0, fired.stderr
    assert json.loads(fired.stdout)["payload"]["fired"] is True
    message_id = cli(project, state, "enqueue", "welcome", "user_id=3").stdout.strip()
    assert "done             welcome key=welcome:3" in up.wait_for(f"message={message_id}")
    assert cli(project, state, "local", "down").returncode == 0


@pytest.mark.timeout(900)
def test_standard_project_with_every_extra(tmp_path: Path) -> None:
    # Its functions are built as the standard project's worker is: test_init_matrix.py proves every project has
    # the same layer/ and functions of handlers only, so one more sam build here would prove nothing new.
    project = generate(tmp_path, ProjectOptions(name="catalog", extras=ALL_EXTRAS))
    validated = sam("validate", "--lint", "--template", "template.yaml", cwd=project)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    # Its tests/test_moto.py is the standard project's, on the same queues: run there and in the FIFO project.
    tested = run_pytest(project, "-m", "not moto")
    assert tested.returncode == 0 and f"{unit_tests_of(project) + 1} passed, {MOTO_TESTS} deselected" in (
        tested.stdout), tested.stdout + tested.stderr


@pytest.mark.timeout(900)  # a sam build of two layers on a loaded machine
def test_durable_project_builds_with_the_sdk_in_its_own_layer(tmp_path: Path, wheel: Path) -> None:
    from samtranslator.yaml_helper import yaml_parse

    project = generate(tmp_path, ProjectOptions(name="books", extras=frozenset({Extra.DURABLE}),
                                                source=parse_spec(str(wheel))))
    sizes = built_lean(project, str(wheel.parent), own_layers=("DurableSdkLayer",))
    assert sorted(sizes) == ["DurableSdkLayer", "FlowFunction", "SqsjobsLayer", "WorkerFunction"]
    build = project / ".aws-sam" / "build"
    assert (build / "FlowFunction" / "flow.py").is_file()
    # The SDK is FlowFunction's layer's alone, with the boto3 it needs (durable-layer/requirements.txt).
    sdk = build / "DurableSdkLayer" / "python"
    assert (sdk / "aws_durable_execution_sdk_python").is_dir()
    assert not (build / "SqsjobsLayer" / "python" / "aws_durable_execution_sdk_python").exists()
    (boto3,) = sdk.glob("boto3-*.dist-info")
    assert tuple(int(part) for part in boto3.name[len("boto3-"):-len(".dist-info")].split(".")[:3]) >= (1, 43, 114)
    # SAM kept the durable function's properties in the template it built (its DurableConfig, its own layer).
    flow = yaml_parse((build / "template.yaml").read_text())["Resources"]["FlowFunction"]["Properties"]
    assert flow["DurableConfig"] == {"ExecutionTimeout": 86400, "RetentionPeriodInDays": 7}
    assert flow["Layers"] == [{"Ref": "DurableSdkLayer"}]
    print(f"\n`sqsjobs init books --with durable`, sam build (unzipped, zipped bytes): {sorted(sizes.items())}")
