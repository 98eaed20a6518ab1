"""`sqsjobs init`, every combination of --fifo and the seven --with extras (256), each project on its own.

Every combination gets the checks that take a fraction of a second, in-process: `sqsjobs check`'s
validation with the lint rules (parameters, files, queues, the E91xx rules), the app's import aside; the SAM
transform (as `sam` and the local cloud read the template), with the functions, FIFO queues, alarm topics
and the one layer each option brings; no file naming a path of this machine (a project made from a wheel
too); the same layer/ in every project and no package of the functions' own (so the `sam build` of a few
projects elsewhere proves every project lean); and ruff over all the generated Python at once.

The costly checks run on a covering subset: cfn-lint with the sqsjobs rules over the templates of a
strength-3 covering array (16 projects: any three options meet in all eight ways, which covers the pieces
that interact, such as FIFO with delays and the critical queue), and for each of them the app checks
(each function's app imported in a child: schedules and environment against the template) and the
project's own unit tests; `sam validate --lint` itself on a strength-2 array (8 projects).
`make scaffold-matrix` (SQSJOBS_SCAFFOLD_MATRIX=all) runs the costly checks on all 256.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from scaffold_support import (
    COMBINATIONS,
    FACTORS,
    LAYER,
    MOTO_TESTS,
    bits,
    covering,
    generate,
    option_id,
    project_machine_paths,
    run_pytest,
    this_machine,
    unit_tests_of,
)
from tool_support import sam

from sqsjobs.cli.check import _CFN_LINT, rules_directory
from sqsjobs.scaffold import Extra, ProjectOptions
from sqsjobs.scaffold.source import parse_spec
from sqsjobs.validation import validate

FULL = os.environ.get("SQSJOBS_SCAFFOLD_MATRIX") == "all"
COSTLY = COMBINATIONS if FULL else covering(3)
SAM_VALIDATED = COMBINATIONS if FULL else covering(2)
#: functions each extra adds beside the worker
FUNCTIONS = {Extra.OUTBOX: "OutboxRelayFunction", Extra.SCHEDULED: "SchedulerFunction"}
#: queues each option makes
QUEUES = {Extra.CRITICAL: "CriticalQueue"}


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("init-matrix")
    return {option_id(options): generate(root, options) for options in COMBINATIONS}


@pytest.fixture(scope="module")
def vendored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A project made from a wheel (as `sqsjobs init` run from a wheel's install makes it), and the wheel."""
    import zipfile

    root = tmp_path_factory.mktemp("init-vendored")
    wheel = root / "dist" / "sqsjobs-0.1.0-py3-none-any.whl"
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:  # what a project does with it is copy it: any content will do
        archive.writestr("sqsjobs-0.1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: sqsjobs\nVersion: 0.1.0\n")
    options = ProjectOptions(name="carried", fifo=True, extras=frozenset(Extra) - {Extra.DURABLE},
                             source=parse_spec(str(wheel)))
    return generate(root, options), wheel


def test_the_matrix_is_every_combination_and_the_subsets_cover_every_interaction() -> None:
    assert len({option_id(o) for o in COMBINATIONS}) == 2 ** len(FACTORS) == 256
    for strength, chosen in ((3, covering(3)), (2, covering(2))):
        import itertools

        for columns in itertools.combinations(range(len(FACTORS)), strength):
            seen = {tuple(bits(o)[i] for i in columns) for o in chosen}
            assert len(seen) == 2 ** strength, (strength, columns)


@pytest.mark.timeout(900)
def test_every_combination_validates_and_translates_with_its_pieces(projects: dict[str, Path]) -> None:
    from sqsjobs.local.template import Template

    for options in COMBINATIONS:
        project = projects[option_id(options)]
        # What `sqsjobs local up` checks before it starts (with the lint rules), the app's import aside.
        problems = validate(project / "template.yaml", {}, require_values=True, lint_rules=True, app_checks=False)
        assert [p.line("template.yaml") for p in problems] == [], option_id(options)

        resources = Template.load(project / "template.yaml").resources
        functions = {k for k, r in resources.items() if r["Type"] == "AWS::Lambda::Function"}
        assert functions == {"WorkerFunction"} | {f for e, f in FUNCTIONS.items() if e in options.extras}
        queues = {k for k, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
        expected = {"JobsQueue", "DeadLetterQueue"} | {q for e, q in QUEUES.items() if e in options.extras}
        assert queues - {"OutboxRelayFailureQueue"} == expected, option_id(options)
        for queue in expected:
            assert resources[queue]["Properties"].get("FifoQueue", False) is options.fifo
        groups = {k for k, r in resources.items() if r["Type"] == "AWS::Scheduler::ScheduleGroup"}
        assert groups == ({"DelayedJobsScheduleGroup"} if Extra.DELAYS in options.extras else set())
        # Every function runs sqsjobs from the one layer and holds only handlers/ (issue 30, item 3).
        (layer,) = [k for k, r in resources.items() if r["Type"] == "AWS::Lambda::LayerVersion"]
        assert layer.startswith(LAYER)
        assert all(resources[f]["Properties"]["Layers"] == [{"Ref": layer}] for f in functions), option_id(options)
        # The DLQ pages (its own topic), the rest warns (issue 25, finding 8).
        assert resources["DeadLetterAlarm"]["Properties"]["AlarmActions"] == [{"Ref": "PageTopic"}]
        assert resources["OldestMessageAlarm"]["Properties"]["AlarmActions"] == [{"Ref": "WarnTopic"}]


def test_no_generated_file_names_a_path_of_this_machine(projects: dict[str, Path],
                                                        vendored: tuple[Path, Path]) -> None:
    """Issue 30, item 3: a project builds in CI and on a colleague's laptop, so it names no path of this one."""
    root = next(iter(projects.values())).parent
    for name, project in projects.items():
        assert project_machine_paths(project, (*this_machine(), str(root))) == {}, name
    project, wheel = vendored
    assert (project / "layer" / "wheels" / wheel.name).read_bytes() == wheel.read_bytes()
    assert (project / "layer" / "requirements.txt").read_text().splitlines()[-2:] == [
        "--find-links wheels", "sqsjobs==0.1.0"]
    assert project_machine_paths(project, (*this_machine(), str(wheel.parent), str(project.parent))) == {}


def test_every_project_builds_the_same_layer_and_functions_of_handlers_only(projects: dict[str, Path]) -> None:
    """So `sam build` of a few projects (test_init_projects.py, tests/dist) proves the layer of all 256."""
    layers = {tuple(sorted((p.relative_to(project).as_posix(), p.read_bytes())
                           for p in (project / "layer").rglob("*") if p.is_file()))
              for project in projects.values()}
    assert len(layers) == 1
    (layer,) = layers
    assert [name for name, _ in layer] == ["layer/Makefile", "layer/botocore-services.txt", "layer/bundle.py",
                                           "layer/requirements.txt"]
    for name, project in projects.items():
        listed = [line for line in (project / "handlers" / "requirements.txt").read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
        assert listed == [], name  # the functions' own packages: none, so a function is its handlers


def test_ruff_finds_nothing_in_the_generated_python(projects: dict[str, Path]) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run([str(ruff), "check", "--no-cache", "--isolated", "--select", "E,F,W,B",
                           "--line-length", "120", *map(str, projects.values())],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.timeout(3600 if FULL else 900)
def test_cfn_lint_with_the_sqsjobs_rules_passes_the_covering_templates(projects: dict[str, Path]) -> None:
    templates = [str(projects[option_id(o)] / "template.yaml") for o in COSTLY]
    done = subprocess.run([sys.executable, "-c", _CFN_LINT, "--append-rules", str(rules_directory()),
                           "--non-zero-exit-code", "informational", "--", *templates],
                          capture_output=True, text=True, timeout=3500 if FULL else 800, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.timeout(600)
@pytest.mark.parametrize("options", COSTLY, ids=option_id)
def test_the_project_passes_the_app_checks_and_its_unit_tests(options: ProjectOptions,
                                                              projects: dict[str, Path]) -> None:
    project = projects[option_id(options)]
    problems = validate(project / "template.yaml", {}, require_values=True)
    assert [p.line("template.yaml") for p in problems] == []

    done = run_pytest(project, "-m", "not e2e and not moto")  # test_init_projects.py runs tests/test_moto.py
    tests = unit_tests_of(project)
    assert tests == 1 + sum({Extra.DELAYS: 2}.get(e, 1) for e in options.extras)  # one test (two) per extra
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{tests} passed, {1 + MOTO_TESTS} deselected" in done.stdout, done.stdout


@pytest.mark.timeout(600)
@pytest.mark.parametrize("options", SAM_VALIDATED, ids=option_id)
def test_sam_validate_lint_passes(options: ProjectOptions, projects: dict[str, Path]) -> None:
    project = projects[option_id(options)]
    validated = sam("validate", "--lint", "--template", "template.yaml", cwd=project)
    assert validated.returncode == 0 and "is a valid SAM Template" in validated.stdout + validated.stderr, (
        validated.stdout + validated.stderr)
