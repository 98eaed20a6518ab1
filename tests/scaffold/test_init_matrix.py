"""`sqsjobs init`, every combination of --fifo and --with (16): the cheap checks, each project on its own.

Per combination: `sqsjobs check`'s validation with the lint rules applied in-process (parameters, files,
queues, the app against the template's schedules), the SAM transform, ruff on the generated Python, and
the project's own unit test (its pytest, e2e deselected). cfn-lint with the sqsjobs rules runs once over
all sixteen templates. The expensive checks (sam validate --lint, the e2e tests, `sqsjobs local up`) run
on three of them in test_init_projects.py, which together cover every option.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from scaffold_support import COMBINATIONS, generate, option_id, run_pytest

from sqsjobs.cli.check import _CFN_LINT, rules_directory
from sqsjobs.scaffold import ProjectOptions
from sqsjobs.validation import validate


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("init-matrix")
    return {option_id(options): generate(root, options) for options in COMBINATIONS}


def test_there_are_sixteen_distinct_combinations() -> None:
    assert len({option_id(o) for o in COMBINATIONS}) == 16


@pytest.mark.timeout(900)
def test_cfn_lint_with_the_sqsjobs_rules_passes_every_template(projects: dict[str, Path]) -> None:
    templates = [str(p / "template.yaml") for p in projects.values()]
    done = subprocess.run([sys.executable, "-c", _CFN_LINT, "--append-rules", str(rules_directory()),
                           "--non-zero-exit-code", "informational", "--", *templates],
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_finds_nothing_in_the_generated_python(projects: dict[str, Path]) -> None:
    ruff = Path(sys.executable).parent / "ruff"
    done = subprocess.run([str(ruff), "check", "--no-cache", "--isolated", "--select", "E,F,W,B",
                           "--line-length", "120", *map(str, projects.values())],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.timeout(600)
@pytest.mark.parametrize("options", COMBINATIONS, ids=option_id)
def test_the_project_validates_translates_and_passes_its_unit_test(
    options: ProjectOptions, projects: dict[str, Path]
) -> None:
    project = projects[option_id(options)]
    # What `sqsjobs local up` checks (check's validation plus the lint rules): not even a warning.
    problems = validate(project / "template.yaml", {}, require_values=True, lint_rules=True)
    assert [p.line("template.yaml") for p in problems] == []

    from sqsjobs.local.template import Template

    translated = Template.load(project / "template.yaml")
    functions = {k for k, r in translated.resources.items() if r["Type"] == "AWS::Lambda::Function"}
    expected = {"WorkerFunction"} | {name for extra, name in (("outbox", "OutboxRelayFunction"),
                                                             ("scheduled", "SchedulerFunction"))
                                     if extra in options.extras}
    assert functions == expected
    for queue in ("JobsQueue", "DeadLetterQueue"):
        assert translated.resources[queue]["Properties"].get("FifoQueue", False) is options.fifo

    done = run_pytest(project, "-m", "not e2e")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 passed, 1 deselected" in done.stdout
