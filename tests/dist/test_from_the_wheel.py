"""docs/getting-started.md, run as a new user would: an empty directory, the wheel this checkout builds, the page's
shell blocks in order (issue 25, finding 5 and its "Done when"); and issue 30's trial: a project made from the
wheel, tested and built lean on another machine.

The wheel (and the sdist it is built from) comes from ``python -m build``, as ``make dist`` makes them. Then one
bash session runs the page: step 1's install block (marked skip for tests/docs/test_doc_snippets.py, which runs
the other blocks in this checkout's venv; its marker names this file), then every runnable shell block, read from
the page so that this test follows it. Nothing of this checkout is on PATH or importable in that session: the
sqsjobs that runs is the wheel's, in the page's fresh ``.venv``. pip reaches the package index for the
dependencies; everything else talks to the local cloud on 127.0.0.1.

The wall time is measured and printed, step by step, never asserted (the machine is shared): the figures in the
page's "How long it takes" come from this test's output.

The trial (issue 30, item 3 and its "Done when"): `sqsjobs init shop --with delays,groups,limits` in a fresh
virtualenv holding only the wheel; no file of the project may name a path of that machine. Then the project
alone: its directory moved, the wheel it was made from deleted and sqsjobs uninstalled, so the install its
README gives must take sqsjobs from the wheel the project carries; `sqsjobs check`, the project's own pytest
(its unit tests and the e2e test on the local cloud), then in a pytest of their own a user's own stock-moto
test added to it (stock_moto_case.py) and the project's tests/test_moto.py, and `sam build`: every function
with its layer at most 8 MB zipped, no tool and no path of the machine inside (scaffold_support.lean_build),
and the worker's handler and the whole runtime importing from the function and its layer alone under
python3.12.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from doc_snippets import ROOT, SHELL, Snippet, page_script, shell_environment, snippets
from scaffold_support import Dist, lean_build, project_machine_paths, this_machine
from tool_support import python312_bin, sam

from sqsjobs.scaffold.bundle import RUNTIME_SERVICES

PAGE = ROOT / "docs" / "getting-started.md"
#: the whole page, on a loaded machine: pip, three pytest sessions of the project's and two local clouds
PAGE_TIMEOUT = 1500
BUILD_TIMEOUT = 600
_STAMP = re.compile(r"^### snippet (?P<where>\(page done\)|\S+) at (?P<at>[0-9.]+)$", re.M)
_STEP = re.compile(r"^## (?P<number>\d+)\. ")
_PYTEST_SUMMARY = re.compile(r"^=+ (?P<counts>[^=]*\bin [0-9.]+s(?: \([^)]*\))?) =+$", re.M)


@dataclass(frozen=True)
class Step:
    """A numbered section of the page (``## 3. Check and test it``) and the shell blocks under it."""

    number: int
    title: str
    blocks: tuple[Snippet, ...]


def page_steps() -> list[Step]:
    """The page's numbered sections with the shell blocks this test runs: step 1's install, then the runnable ones."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    headings = [(index + 1, _STEP.match(line), line) for index, line in enumerate(lines)]
    numbered = [(line, int(match.group("number")), text.removeprefix("## ")) for line, match, text in headings
                if match is not None]
    chosen = [s for s in snippets(PAGE) if s.language in SHELL and (s.runnable or _is_install(s))]
    steps = []
    for position, (line, number, title) in enumerate(numbered):
        end = numbered[position + 1][0] if position + 1 < len(numbered) else len(lines) + 1
        blocks = tuple(s for s in chosen if line < s.line < end)
        if blocks:
            steps.append(Step(number, title, blocks))
    return steps


def _is_install(block: Snippet) -> bool:
    return "tests/dist/test_from_the_wheel.py" in block.directives.get("skip", "")


def session_environment(tmp_path: Path) -> dict[str, str]:
    """tests/doc_snippets.py's clean environment, without this checkout's venv: only the page's own ``.venv``."""
    env = shell_environment(tmp_path)
    ours = {str(Path(sys.executable).parent), str(Path(sys.prefix) / "bin")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p and p not in ours)
    for name in ("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(name, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_session(script: Path, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """bash on ``script`` in its own process group, so a timeout also ends the local cloud it started."""
    with subprocess.Popen(["bash", str(script)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            output, _ = process.communicate(timeout=60)
            return -1, output + f"\n(timed out after {timeout} s)"
    return process.returncode, output


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"


def test_page_steps_are_read_from_the_page() -> None:
    """The blocks this test runs: the install first, the deploy step (it needs an AWS account) left out."""
    steps = page_steps()
    assert [s.number for s in steps] == [1, 2, 3, 4, 5]
    (install,) = steps[0].blocks
    assert _is_install(install) and "pip install './dist/sqsjobs-" in install.code
    assert any("sqsjobs init billing-jobs --with delays,groups" in b.code for b in steps[1].blocks)
    assert any("background" in b.directives for b in steps[3].blocks)
    assert all(b.runnable for s in steps[1:] for b in s.blocks)


@pytest.mark.slow
@pytest.mark.moto
@pytest.mark.local_cloud
@pytest.mark.timeout(BUILD_TIMEOUT + PAGE_TIMEOUT + 120)
def test_the_getting_started_page_runs_from_the_built_wheel(tmp_path: Path, dist: Dist) -> None:
    work = tmp_path / "empty"
    (work / "dist").mkdir(parents=True)
    for built in dist.directory.iterdir():
        shutil.copy(built, work / "dist" / built.name)
    build_seconds = dist.seconds
    wheel = work / "dist" / dist.wheel.name

    steps = page_steps()
    (install,) = steps[0].blocks
    assert f"'./dist/{wheel.name}[" in install.code, f"the page installs another wheel than {wheel.name}"
    blocks = [block for step in steps for block in step.blocks]
    logs = tmp_path / "logs"
    logs.mkdir()
    script = tmp_path / "page.sh"
    # The same session the page's other blocks get (tests/doc_snippets.py), then proof of which sqsjobs ran.
    script.write_text(page_script(blocks, logs) + 'echo "### sqsjobs from $(python -c '
                      '\'import sqsjobs; print(sqsjobs.__file__)\')"\n')

    started = time.monotonic()
    returncode, output = run_session(script, work, session_environment(tmp_path), PAGE_TIMEOUT)
    page_seconds = time.monotonic() - started
    if returncode != 0:
        failed = output.rsplit("### snippet ", 1)[-1]
        pytest.fail(f"exit {returncode} in snippet {failed[-8000:]}")

    stamps = {m.group("where"): float(m.group("at")) for m in _STAMP.finditer(output)}
    starts = [stamps[step.blocks[0].where] for step in steps] + [stamps["(page done)"]]
    report = [f"wheel and sdist (python -m build): {_duration(build_seconds)}"]
    for step, begin, end in zip(steps, starts, starts[1:], strict=False):
        report.append(f"{step.title}: {_duration(end - begin)}")
    to_e2e = starts[3] - starts[0]
    report += [f"from an empty directory to a passing e2e test (steps 1-3): {_duration(to_e2e)}",
               f"the whole page (steps 1-5): {_duration(starts[-1] - starts[0])} (session {_duration(page_seconds)})"]
    print("\n".join(["", "docs/getting-started.md from the wheel, measured:", *report]))

    sqsjobs_file = output.rsplit("### sqsjobs from ", 1)[-1].strip()
    assert Path(sqsjobs_file).is_relative_to(work / ".venv"), f"the session imported sqsjobs from {sqsjobs_file}"
    assert not Path(sqsjobs_file).is_relative_to(ROOT)
    step_3 = output.split(f"### snippet {steps[2].blocks[0].where} ", 1)[1].split("### snippet ", 1)[0]
    (summary,) = _PYTEST_SUMMARY.findall(step_3)
    print(f"the project's pytest (step 3): {summary}")
    assert re.search(r"\b\d+ passed\b", summary) and not re.search(r"failed|skipped|error|deselected", summary), (
        f"the project's pytest: {summary}")
    assert re.search(r"^tests/test_e2e\.py \.+", step_3, re.M), f"no e2e test passed in step 3:\n{step_3[-3000:]}"


# ---------------------------------------------------------------- issue 30's trial: a project from the wheel
#: the options of the user who reported issue 30
TRIAL_OPTIONS = "delays,groups,limits"
STOCK_MOTO_CASE = Path(__file__).with_name("stock_moto_case.py")
#: run in a function's build directory with python3.12 -I -S: its handler and the whole runtime, from the function
#: and its layer alone (no site-packages, no environment), and a client of each runtime service from the layer's
#: trimmed botocore; no AWS call
_PROBE = """
import importlib, json, pkgutil, sys, sysconfig
function, layer, services = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
sys.path[:0] = [function, layer]
entry = importlib.import_module("worker").handler
import sqsjobs
for info in pkgutil.walk_packages(sqsjobs.__path__, "sqsjobs."):
    importlib.import_module(info.name)
from botocore.session import Session
clients = [Session().create_client(name, region_name="us-east-1") for name in services]
allowed = (function, layer, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
outside = sorted(name for name, m in list(sys.modules.items())
                 if getattr(m, "__file__", None) and not m.__file__.startswith(allowed))
print(json.dumps({"callable": callable(entry), "clients": len(clients), "outside": outside}))
"""


def readme_install(project: Path) -> list[str]:
    """The project README's "On a laptop" commands that make its virtualenv and install it, as written."""
    text = (project / "README.md").read_text()
    block = text.split("## On a laptop", 1)[1].split("```sh", 1)[1].split("```", 1)[0]
    commands = [line.split("#", 1)[0].strip() for line in block.splitlines()]
    return [c for c in commands if c.startswith(("python3 -m venv", "pip install"))]


def _size(size: int) -> str:
    return f"{size / 1_000_000:.2f} MB" if size >= 100_000 else f"{size / 1000:.1f} kB"


@pytest.mark.slow
@pytest.mark.moto
@pytest.mark.local_cloud
@pytest.mark.sam
@pytest.mark.timeout(BUILD_TIMEOUT + PAGE_TIMEOUT + 600)
def test_a_project_made_from_the_wheel_tests_and_builds_lean_on_another_machine(tmp_path: Path, dist: Dist) -> None:
    maker = tmp_path / "maker"
    (maker / "dist").mkdir(parents=True)
    wheel = Path(shutil.copy(dist.wheel, maker / "dist" / dist.wheel.name))
    venv = tmp_path / "venv"  # beside, not inside, the directories the project lives in
    env = session_environment(tmp_path)
    made = tmp_path / "make.sh"
    made.write_text(f"set -eo pipefail\npython3 -m venv '{venv}' && . '{venv}/bin/activate'\n"
                    f"pip install --quiet './dist/{wheel.name}[cli]'\nsqsjobs init shop --with {TRIAL_OPTIONS}\n")
    returncode, output = run_session(made, maker, env, PAGE_TIMEOUT)
    assert returncode == 0, output[-5000:]
    project = maker / "shop"
    assert (project / "layer" / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    assert project_machine_paths(project, (*this_machine(), str(tmp_path))) == {}
    # This environment has no [dev] extra: init says to install the project into it (no second venv).
    assert "next: cd shop && pip install --find-links layer/wheels -e '.[dev]' && sqsjobs check" in output

    # The project alone: moved, the wheel it was made from deleted, sqsjobs uninstalled.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project = Path(shutil.move(project, elsewhere / "shop"))
    shutil.rmtree(maker)
    shutil.copy(STOCK_MOTO_CASE, project / "tests" / "test_stock_moto.py")
    venv_line, install = readme_install(project)
    assert (venv_line, install) == ("python3 -m venv .venv && . .venv/bin/activate",
                                    "pip install --find-links layer/wheels -e '.[dev]'")
    tested = tmp_path / "test.sh"
    tested.write_text(f"set -eo pipefail\n. '{venv}/bin/activate' && pip uninstall --quiet --yes sqsjobs\n"
                      f"{install}\n"
                      "sqsjobs check template.yaml\n"
                      "python -m pytest -p no:cacheprovider -m 'not moto' --ignore=tests/test_stock_moto.py\n"
                      "echo '### stock moto'\n"
                      "python -m pytest -p no:cacheprovider tests/test_stock_moto.py tests/test_moto.py\n"
                      "echo \"### sqsjobs from $(python -c 'import sqsjobs; print(sqsjobs.__file__)')\"\n")
    returncode, output = run_session(tested, project, env, PAGE_TIMEOUT)
    assert returncode == 0, output[-8000:]
    generated, stock = output.split("### stock moto", 1)
    (summary,) = _PYTEST_SUMMARY.findall(generated)
    assert re.search(r"\b\d+ passed\b", summary) and not re.search(r"failed|skipped|error", summary), generated[-5000:]
    assert Path(output.rsplit("### sqsjobs from ", 1)[-1].strip()).is_relative_to(venv)

    built = sam("build", "--template", "template.yaml", cwd=project)
    assert built.returncode == 0, built.stdout[-5000:] + built.stderr[-5000:]
    sizes = lean_build(project / ".aws-sam" / "build", (*this_machine(), str(tmp_path)))
    assert sorted(sizes) == ["SqsjobsLayer", "WorkerFunction"]
    build = project / ".aws-sam" / "build"
    probe_env = {"PATH": os.environ["PATH"], "AWS_ACCESS_KEY_ID": "trial", "AWS_SECRET_ACCESS_KEY": "trial",
                 "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    probed = subprocess.run([str(Path(python312_bin()) / "python3.12"), "-I", "-S", "-c", _PROBE,
                             str(build / "WorkerFunction"), str(build / "SqsjobsLayer" / "python"),
                             ",".join(RUNTIME_SERVICES)],
                            env=probe_env, capture_output=True, text=True, timeout=300, check=False)
    assert probed.returncode == 0, probed.stderr[-3000:]
    assert json.loads(probed.stdout.strip().splitlines()[-1]) == {
        "callable": True, "clients": len(RUNTIME_SERVICES), "outside": []}
    print(f"\n`sqsjobs init shop --with {TRIAL_OPTIONS}` from the wheel, sam build (unzipped, zipped):")
    for name, (unzipped, zipped) in sorted(sizes.items()):
        print(f"  {name}: {_size(unzipped)}, {_size(zipped)}")

    # The user's own stock-moto test (issue 30, item 1) first, then the project's tests/test_moto.py (mock_aws and
    # a moto server), in a pytest of their own: nothing of the local cloud loaded, moto as it is installed.
    (stock_summary,) = _PYTEST_SUMMARY.findall(stock)
    assert re.search(r"^3 passed\b", stock_summary), f"the stock-moto tests:\n{stock[-6000:]}"
    assert re.search(r"^tests/test_stock_moto\.py \.\s", stock, re.M), stock[-3000:]
    assert re.search(r"^tests/test_moto\.py \.\.\s", stock, re.M), stock[-3000:]
