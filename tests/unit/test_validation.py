"""One validation for `sqsjobs check` and `sqsjobs local up` (issue 14): each problem one line, with its fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from sqsjobs.cli import build_app
from sqsjobs.scaffold import Extra, ProjectOptions, write
from sqsjobs.validation import Severity, validate
from sqsjobs.validation.parameters import check_parameters

ROOT = Path(__file__).resolve().parents[2]
DECLARED = {
    "WorkerTimeoutSeconds": {"Type": "Number", "MinValue": 1, "MaxValue": 900, "Default": 60},
    "SenderEmail": {"Type": "String", "AllowedPattern": "^[^@\\s]+@[^@\\s]+$"},
    "Stage": {"Type": "String", "AllowedValues": ["dev", "prod"], "Default": "dev"},
    "Name": {"Type": "String", "MaxLength": 5, "Default": "x"},
}


def lines(problems: list) -> list[str]:  # type: ignore[type-arg]
    return [p.line("template.yaml") for p in problems]


@pytest.mark.parametrize(("given", "expected"), [
    ({"NoSuchParam": "3"}, "parameter NoSuchParam: the template declares no such parameter; fix: remove NoSuchParam"),
    ({"WorkerTimeoutSeconds": "abc"}, "'abc' is not a number (Type: Number); fix: pass -p WorkerTimeoutSeconds="),
    ({"WorkerTimeoutSeconds": "0"}, "0 is below MinValue 1"),
    ({"WorkerTimeoutSeconds": "901"}, "901 is above MaxValue 900"),
    ({"SenderEmail": "not-an-address"}, "'not-an-address' does not match AllowedPattern"),
    ({"Stage": "qa"}, "'qa' is not one of AllowedValues ['dev', 'prod']"),
    ({"Name": "toolong"}, "'toolong' is longer than MaxLength 5"),
])
def test_a_parameter_value_the_template_would_refuse_is_one_line_with_the_fix(given: dict[str, str],
                                                                              expected: str) -> None:
    (line,) = lines(check_parameters(DECLARED, {"SenderEmail": "a@b.c", **given}))
    assert expected in line and "\n" not in line


def test_good_values_pass_and_a_missing_value_is_reported_only_when_asked() -> None:
    given = {"WorkerTimeoutSeconds": "30", "SenderEmail": "a@b.c", "Stage": "prod"}
    assert check_parameters(DECLARED, given) == []
    (missing,) = lines(check_parameters(DECLARED, {}, require_values=True))
    assert "parameter SenderEmail: has no Default and no value was given; fix: pass -p SenderEmail=VALUE" in missing


@pytest.fixture
def project(tmp_path: Path) -> Path:
    directory = tmp_path / "shop"
    write(directory, ProjectOptions(name="shop", extras=frozenset({Extra.SCHEDULED})))
    return directory


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new))


@pytest.mark.slow
def test_the_reference_template_and_a_new_project_have_no_problem(project: Path) -> None:
    assert lines(validate(ROOT / "template.yaml", {"SenderEmail": "billing@example.com"}, require_values=True,
                          lint_rules=True)) == []
    assert lines(validate(project / "template.yaml", {}, require_values=True, lint_rules=True)) == []


def test_a_schedule_naming_a_job_the_app_lacks_is_an_error(project: Path) -> None:
    edit(project / "template.yaml", '{"job": "daily-summary"', '{"job": "daily-sumary"')
    problems = validate(project / "template.yaml", {})
    assert [p.severity for p in problems] == [Severity.ERROR, Severity.WARNING]
    assert "SchedulerFunction schedule DailySummary: fires job 'daily-sumary', which the app in handlers/ does not " \
           "declare (it declares: daily-summary, welcome); fix: correct the job" in lines(problems)[0]
    assert "@app.scheduled job 'daily-summary' has no schedule in the template, so it never fires" in lines(problems)[1]


def test_a_cron_different_from_the_decorators_is_an_error(project: Path) -> None:
    edit(project / "template.yaml", '"cron(0 6 * * ? *)"', '"cron(0 7 * * ? *)"')
    (line,) = lines(validate(project / "template.yaml", {}))
    assert "fires 'daily-summary' on cron(0 7 * * ? *), but @app.scheduled says cron(0 6 * * ? *)" in line


def test_a_schedule_firing_a_job_that_is_not_scheduled_is_an_error(project: Path) -> None:
    edit(project / "template.yaml", '{"job": "daily-summary"', '{"job": "welcome"')
    problems = lines(validate(project / "template.yaml", {}))
    assert any("fires job 'welcome', which is declared with @app.job, not @app.scheduled" in p for p in problems)


def test_a_filter_selecting_a_job_the_app_lacks_is_an_error(project: Path) -> None:
    edit(project / "template.yaml", "            FunctionResponseTypes: [ReportBatchItemFailures]\n",
         "            FunctionResponseTypes: [ReportBatchItemFailures]\n            FilterCriteria:\n"
         "              Filters:\n                - Pattern: '{\"body\": {\"job\": [\"welcom\"]}}'\n")
    (line,) = lines(validate(project / "template.yaml", {}))
    assert "WorkerFunction event Jobs: its filter selects job 'welcom', which the app in handlers/ does not" in line


def test_files_the_template_names_must_exist(project: Path) -> None:
    edit(project / "template.yaml", "    CodeUri: handlers/\n", "    CodeUri: src/\n")
    problems = lines(validate(project / "template.yaml", {}))
    assert len(problems) == 2 and all("CodeUri src/ does not exist" in p for p in problems)

    reference = (ROOT / "template.yaml").read_text()
    copy = project / "reference.yaml"
    copy.write_text(reference)
    (project / "handlers" / "redrive.py").write_text("")
    (project / "handlers" / "outbox_relay.py").write_text("")
    problems = lines(validate(copy, {"SenderEmail": "a@b.c"}, app_checks=False))
    # The reference template's makefile build lives in infra/bundle of this repository only.
    assert len(problems) == 4 and all(re.search(
        r"Metadata.ContextPath: infra/bundle holds no Makefile .*; fix: point ContextPath at the directory", p)
        for p in problems), problems


def test_a_handler_module_missing_from_codeuri_is_an_error(project: Path) -> None:
    (project / "handlers" / "scheduler.py").unlink()
    (line,) = lines(validate(project / "template.yaml", {}))
    assert "SchedulerFunction: Handler scheduler.handler names module scheduler, which is not in CodeUri" in line


def test_a_template_no_queue_feeds_is_an_error(tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text("Resources:\n  Topic:\n    Type: AWS::SNS::Topic\n")
    (line,) = lines(validate(template, {}))
    assert "Resources: no SQS queue feeds a function, so the jobs would never run; fix: add an AWS::SQS::Queue" in line


def test_an_app_that_cannot_be_imported_is_a_warning(project: Path) -> None:
    (project / "handlers" / "app.py").write_text("import no_such_dependency\n")
    problems = validate(project / "template.yaml", {})
    assert {p.severity for p in problems} == {Severity.WARNING}
    assert "ModuleNotFoundError: No module named 'no_such_dependency'" in lines(problems)[0]


def test_a_template_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    template = tmp_path / "template.yaml"
    template.write_text("Resources: [unclosed\n")
    (line,) = lines(validate(template, {}))
    assert line.startswith("template.yaml: template: not valid YAML or JSON")


# -- the two commands share it ---------------------------------------------------------------------------------
@pytest.mark.slow
def test_check_reports_what_cfn_lint_cannot_see(project: Path) -> None:
    runner = CliRunner()
    for arguments, expected in (
        (["-p", "NoSuchParam=3"], "parameter NoSuchParam: the template declares no such parameter"),
        (["-p", "WorkerTimeoutSeconds=abc"], "'abc' is not a number"),
    ):
        result = runner.invoke(build_app(), ["check", str(project / "template.yaml"), *arguments])
        assert result.exit_code != 0 and expected in result.output, result.output
    twice = runner.invoke(build_app(), ["check", str(project / "template.yaml"), "-p", "MaxAttempts=3",
                                        "-p", "MaxAttempts=4"])
    assert twice.exit_code == 2 and "MaxAttempts is given twice" in twice.output


@pytest.mark.slow
def test_local_up_refuses_what_cannot_deploy_before_starting_anything(project: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    state = tmp_path / "state.json"
    monkeypatch.setenv("SQSJOBS_LOCAL_STATE", str(state))
    runner = CliRunner()
    for parameter, expected in (("WorkerTimeoutSeconds=abc", "'abc' is not a number"),
                                ("NoSuchParam=3", "the template declares no such parameter")):
        result = runner.invoke(build_app(), ["local", "up", "--template", str(project / "template.yaml"),
                                             "-p", parameter])
        assert result.exit_code == 1, result.output
        assert expected in result.output and "not starting" in result.output and "Traceback" not in result.output
    assert not state.exists()
    # A lint rule the values break is shown as check shows it (tests/scaffold: the local cloud then starts).
