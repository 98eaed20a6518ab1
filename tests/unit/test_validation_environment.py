"""`sqsjobs check` and `local up` check each function's environment against what its app needs (issue 25, finding 1).

With SQSJOBS_TABLE removed from the worker, or spelled SQSJOBS_TABEL, the check said "no errors" and every
batch then died with `table_name is not set`. Each case edits a project `sqsjobs init` wrote.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sqsjobs.scaffold import Extra, ProjectOptions, write
from sqsjobs.validation import Severity, validate
from sqsjobs.validation.environment import Feature, Role, check_environment, features_of, known_variables


def project(tmp_path: Path, *extras: Extra) -> Path:
    directory = tmp_path / "shop"
    write(directory, ProjectOptions(name="shop", extras=frozenset(extras)))
    return directory


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, old
    path.write_text(text.replace(old, new, 1))


def errors(directory: Path) -> list[str]:
    return [p.line("template.yaml") for p in validate(directory / "template.yaml", {}) if p.is_error]


def test_a_new_project_passes(tmp_path: Path) -> None:
    assert errors(project(tmp_path, Extra.OUTBOX, Extra.SCHEDULED)) == []


def test_a_removed_table_is_an_error_naming_the_function_the_variable_and_the_fix(tmp_path: Path) -> None:
    directory = project(tmp_path)
    edit(directory / "template.yaml", "          SQSJOBS_TABLE: !Ref IdempotencyTable\n", "")
    assert errors(directory) == [
        "template.yaml: WorkerFunction: SQSJOBS_TABLE is not set, and its app needs it (the idempotency table: "
        "without it every batch fails); fix: add SQSJOBS_TABLE: !Ref IdempotencyTable to WorkerFunction's "
        "Environment.Variables"]


def test_a_misspelled_table_says_did_you_mean(tmp_path: Path) -> None:
    directory = project(tmp_path)
    edit(directory / "template.yaml", "SQSJOBS_TABLE: !Ref IdempotencyTable", "SQSJOBS_TABEL: !Ref IdempotencyTable")
    (line,) = errors(directory)
    assert "WorkerFunction: SQSJOBS_TABLE is not set" in line
    assert "did you mean SQSJOBS_TABEL?; fix: rename SQSJOBS_TABEL to SQSJOBS_TABLE" in line


@pytest.mark.parametrize("variable", ["SQSJOBS_QUEUE_URL: !Ref JobsQueue", "SQSJOBS_DLQ_URL: !Ref DeadLetterQueue"])
def test_the_workers_queue_and_dlq_are_needed(tmp_path: Path, variable: str) -> None:
    directory = project(tmp_path)
    edit(directory / "template.yaml", f"          {variable}\n", "")
    (line,) = errors(directory)
    assert f"WorkerFunction: {variable.split(':')[0]} is not set, and its app needs it" in line


def test_the_outbox_table_is_needed_when_the_template_relays_an_outbox(tmp_path: Path) -> None:
    directory = project(tmp_path, Extra.OUTBOX)
    edit(directory / "template.yaml", "          SQSJOBS_OUTBOX_TABLE: !Ref OutboxTable\n", "")
    (line,) = errors(directory)
    assert "WorkerFunction: SQSJOBS_OUTBOX_TABLE is not set, and its app needs it (the outbox table" in line


def test_the_scheduler_needs_the_table_for_its_period_lease(tmp_path: Path) -> None:
    directory = project(tmp_path, Extra.SCHEDULED)
    text = (directory / "template.yaml").read_text()
    scheduler = text.index("  SchedulerFunction:")
    head, tail = text[:scheduler], text[scheduler:]
    (directory / "template.yaml").write_text(head + tail.replace("          SQSJOBS_TABLE: !Ref IdempotencyTable\n",
                                                                 "", 1))
    (line,) = errors(directory)
    assert "SchedulerFunction: SQSJOBS_TABLE is not set, and its app needs it" in line


def test_a_named_queue_a_job_declares_needs_its_url(tmp_path: Path) -> None:
    directory = project(tmp_path)
    edit(directory / "handlers" / "app.py", "app = JobApp()", 'app = JobApp(queues={"critical": None})')
    edit(directory / "handlers" / "app.py", '@app.job("welcome", key="welcome:{user_id}")',
         '@app.job("welcome", key="welcome:{user_id}", queue="critical")')
    (line,) = errors(directory)
    assert "WorkerFunction: SQSJOBS_QUEUE_URL_CRITICAL is not set, and its app needs it (the URL of queue " \
           "'critical', which its jobs name" in line


def test_an_app_that_refuses_its_configuration_at_import_is_an_error_not_a_warning(tmp_path: Path) -> None:
    directory = project(tmp_path)
    edit(directory / "handlers" / "app.py", '@app.job("welcome", key="welcome:{user_id}")',
         '@app.job("welcome", key="welcome:{user_id}", queue="critical")')
    (line,) = errors(directory)
    assert "WorkerFunction: worker in handlers/ fails at import with this function's environment: " \
           "ConfigurationError: job 'welcome': unknown queue 'critical'" in line


def test_a_close_name_sqsjobs_does_not_read_is_a_warning(tmp_path: Path) -> None:
    directory = project(tmp_path)
    edit(directory / "template.yaml", "          SQSJOBS_MAX_ATTEMPTS: !Ref MaxAttempts\n",
         "          SQSJOBS_MAX_ATTEMPTS: !Ref MaxAttempts\n          SQSJOBS_MAX_ATEMPTS: 3\n")
    problems = [p for p in validate(directory / "template.yaml", {}) if "ATEMPTS" in p.message]
    assert [(p.severity, p.message) for p in problems] == [
        (Severity.WARNING, "SQSJOBS_MAX_ATEMPTS is not a variable sqsjobs reads; did you mean SQSJOBS_MAX_ATTEMPTS?")]


def test_delays_need_the_group_and_the_role_when_the_template_declares_a_group() -> None:
    app = {"settings": {"queue_url": True, "dlq_url": True, "table_name": True, "schedule_group": True,
                        "scheduler_role_arn": False}, "queues": {}}
    features = features_of([["SQSJOBS_SCHEDULE_GROUP"]], declares_schedule_group=False)
    assert features == {Feature.DELAYS}
    (problem,) = check_environment("WorkerFunction", ["SQSJOBS_SCHEDULE_GROUP", "SQSJOBS_SCHEDULER_ROLE"], app,
                                   roles={Role.WORKER}, features=features)
    assert problem.message.startswith("SQSJOBS_SCHEDULER_ROLE_ARN is not set, and its app needs it (the role")
    assert problem.fix == "rename SQSJOBS_SCHEDULER_ROLE to SQSJOBS_SCHEDULER_ROLE_ARN"


def test_the_known_variables_are_those_settings_reads() -> None:
    assert {"SQSJOBS_TABLE", "SQSJOBS_QUEUE_URL", "SQSJOBS_MAX_MESSAGE_BYTES", "SQSJOBS_SCHEDULER_ROLE_ARN"} <= \
        known_variables()
    assert "SQSJOBS_QUEUE_URL_" not in known_variables()
