"""`sqsjobs init --with durable`: a durable function awaiting a job and a group, its layer of its own, its tests.

Alone and with every other extra: the template validates with the lint rules and `sqsjobs check`'s app
checks (which import handlers/flow.py, the durable SDK installed here as the project's dev extra installs
it); the worker's role answers only the project's own durable function, and without that statement
`sqsjobs check` refuses the app; the durable SDK is only in FlowFunction's layer; and the project's own
pytest passes (the durable function on the SDK's local runner, its jobs in-process). Its `sam build` is in
test_init_projects.py, beside the standard project's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scaffold_support import MOTO_TESTS, generate, run_pytest, unit_tests_of

from sqsjobs.scaffold import Extra, ProjectOptions
from sqsjobs.validation import validate

CASES = {"durable": frozenset({Extra.DURABLE}), "every-extra": frozenset(Extra)}


@pytest.fixture(scope="module", params=sorted(CASES))
def project(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("init-durable")
    return generate(root, ProjectOptions(name=f"books-{request.param}", extras=CASES[request.param]))


def test_it_validates_and_passes_the_app_checks(project: Path) -> None:
    problems = validate(project / "template.yaml", {}, require_values=True, lint_rules=True)
    assert [p.line("template.yaml") for p in problems] == []


def test_the_worker_answers_only_the_projects_durable_function_and_check_says_when_it_cannot(
        project: Path) -> None:
    from sqsjobs.local.template import Template

    text = (project / "template.yaml").read_text()
    resources = Template.load(project / "template.yaml").resources
    worker = resources["WorkerFunction"]["Properties"]
    flow = resources["FlowFunction"]["Properties"]
    assert "aws-durable-execution-sdk-python" in (project / "durable-layer" / "requirements.txt").read_text()
    assert "durable" not in (project / "layer" / "requirements.txt").read_text()
    assert len(flow["Layers"]) == 2 and len(worker["Layers"]) == 1  # the SDK's layer is the flow's only
    assert flow["DurableConfig"]["ExecutionTimeout"] == 86400
    start = text.index("            - Sid: AnswerDurableCallbacks")
    end = text.index("\n", text.index("Resource:", start)) + 1
    assert '-flow:*"' in text[start:end]
    refused = project / "template-without-answers.yaml"
    refused.write_text(text[:start] + text[end:])
    problems = [p.message for p in validate(refused, {}, require_values=True, lint_rules=True)]
    assert any("render-page are declared with callbacks=True" in m for m in problems), problems


@pytest.mark.timeout(600)
def test_the_projects_own_tests_pass(project: Path) -> None:
    done = run_pytest(project, "-m", "not e2e")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{unit_tests_of(project) + MOTO_TESTS} passed" in done.stdout, done.stdout  # tests/test_moto.py runs too
