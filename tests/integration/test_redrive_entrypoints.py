"""`sqsjobs redrive` (CLI) and `handlers/redrive.py` (Lambda) against moto."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError
from moto import mock_aws
from typer.testing import CliRunner

from sqsjobs.cli import build_app

REGION = "us-east-1"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def sqs(monkeypatch: pytest.MonkeyPatch) -> Any:
    # Credentials, region and a clean environment come from tests/conftest.py; wide rich output here.
    monkeypatch.setenv("COLUMNS", "200")
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def make_queues(sqs: Any) -> tuple[str, str]:
    dlq = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
    src = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    return src, dlq


def dead_letter(sqs: Any, dlq: str, src: str, *, job: str = "invoice-email", key: int = 1, redrives: int = 0) -> None:
    attrs = {
        "sqsjobs.job": {"DataType": "String", "StringValue": job},
        "sqsjobs.reason": {"DataType": "String", "StringValue": "exhausted"},
        "sqsjobs.error_type": {"DataType": "String", "StringValue": "TimeoutError"},
        "sqsjobs.source_queue": {"DataType": "String", "StringValue": src},
        "sqsjobs.redrive_count": {"DataType": "Number", "StringValue": str(redrives)},
    }
    body = json.dumps({"v": 1, "job": job, "key": f"{job}:{key}", "args": {"id": key}})
    sqs.send_message(QueueUrl=dlq, MessageBody=body, MessageAttributes=attrs)


def depth(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def run(*args: str) -> Any:
    return CliRunner().invoke(build_app(), ["redrive", *args, "--wait-time", "0"])


# -- CLI ----------------------------------------------------------------------------


def test_cli_dry_run_lists_and_changes_nothing(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, src, key=1)
    dead_letter(sqs, dlq, src, job="sync-account", key=2)
    result = run("--dlq", "jobs-dlq", "--dry-run", "--job", "invoice-email")
    assert result.exit_code == 0, result.output
    assert "would redrive" in result.output and "invoice-email" in result.output and "exhausted" in result.output
    assert "skip:filtered" in result.output
    assert (depth(sqs, dlq), depth(sqs, src)) == (2, 0)


def test_cli_moves_and_prints_counts(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(12):
        dead_letter(sqs, dlq, src, key=key)
    dead_letter(sqs, dlq, src, key=99, redrives=3)
    result = run("--dlq", dlq, "--rate", "1000")
    assert result.exit_code == 0, result.output
    assert "moved" in result.output and "skipped: poison" in result.output
    assert (depth(sqs, dlq), depth(sqs, src)) == (1, 12)


def test_cli_json_summary(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, src)
    result = run("--dlq", dlq, "--json", "--max", "5")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["moved"], data["left"], data["ok"]) == (1, 0, True)


def test_cli_lost_connection_exits_1_and_says_rerun(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, src)

    monkeypatch.setattr("botocore.client.BaseClient._make_api_call", _fail_on("SendMessageBatch"))
    result = run("--dlq", dlq)
    assert result.exit_code == 1
    assert "run the same command again" in result.output
    monkeypatch.undo()
    assert depth(sqs, dlq) == 1


def _fail_on(operation: str) -> Any:
    from botocore.client import BaseClient

    real = BaseClient._make_api_call

    def call(self: Any, name: str, params: Any) -> Any:
        if name == operation:
            raise EndpointConnectionError(endpoint_url="http://sqs")
        return real(self, name, params)

    return call


def test_cli_ctrl_c_exits_130_and_releases(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.client import BaseClient

    src, dlq = make_queues(sqs)
    for key in range(3):
        dead_letter(sqs, dlq, src, key=key)
    real = BaseClient._make_api_call

    def call(self: Any, name: str, params: Any) -> Any:
        if name == "SendMessageBatch":
            raise KeyboardInterrupt
        return real(self, name, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", call)
    result = run("--dlq", dlq)
    monkeypatch.undo()
    assert result.exit_code == 130
    assert depth(sqs, dlq) == 3  # visible again at once, nothing sent


def test_cli_bad_options_exit_2(sqs: Any) -> None:
    make_queues(sqs)
    assert run("--dlq", "jobs-dlq", "--status").exit_code == 2  # --status needs --native
    assert run("--dlq", "jobs-dlq", "--native", "--job", "a").exit_code == 2  # native cannot filter
    assert run("--dlq", "no-such-queue").exit_code == 2


def test_cli_dlq_from_the_environment(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, src)
    monkeypatch.setenv("SQSJOBS_DLQ_URL", dlq)
    result = CliRunner().invoke(build_app(), ["redrive", "--wait-time", "0"])
    assert result.exit_code == 0, result.output
    assert depth(sqs, src) == 1


# -- Lambda -----------------------------------------------------------------------


def load_handler() -> ModuleType:
    spec = importlib.util.spec_from_file_location("redrive_handler_under_test", ROOT / "handlers" / "redrive.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Context:
    """A Lambda context whose clock runs down by ``step_ms`` per look."""

    def __init__(self, remaining_ms: int, step_ms: int = 0) -> None:
        self.remaining_ms, self.step_ms = remaining_ms, step_ms

    def get_remaining_time_in_millis(self) -> int:
        value = self.remaining_ms
        self.remaining_ms -= self.step_ms
        return value


def test_lambda_redrives_with_the_environment_and_returns_the_summary(
    sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dlq = make_queues(sqs)
    for key in range(3):
        dead_letter(sqs, dlq, src, key=key)
    dead_letter(sqs, dlq, src, job="sync-account", key=9)
    monkeypatch.setenv("SQSJOBS_DLQ_URL", dlq)
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", src)
    handler = load_handler()

    result = handler.handler({"job": "invoice-email", "wait_time_seconds": 0}, Context(300_000))

    assert json.loads(json.dumps(result)) == result  # a JSON-ready return value
    assert (result["moved"], result["skipped"], result["left"], result["stopped"]) == (3, {"filtered": 1}, 1, "drained")
    assert depth(sqs, src) == 3


def test_lambda_stops_before_its_timeout_and_reports_what_is_left(
    sqs: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dlq = make_queues(sqs)
    for key in range(25):
        dead_letter(sqs, dlq, src, key=key)
    monkeypatch.setenv("SQSJOBS_DLQ_URL", dlq)
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", src)
    handler = load_handler()

    # 30 s left and 5 s gone at each look (before a receive, before a send); stop when under 10 s:
    # two rounds of 10 are sent, the third round's 10 go back.
    result = handler.handler({"wait_time_seconds": 0}, Context(30_000, step_ms=5_000))

    assert (result["moved"], result["stopped"], result["left"]) == (20, "deadline", 5)
    again = handler.handler({"wait_time_seconds": 0}, Context(300_000))
    assert (again["moved"], again["left"]) == (5, 0)


def test_cli_native_error_from_sqs_exits_1_cleanly(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    make_queues(sqs)
    real = BaseClient._make_api_call

    def call(self: Any, name: str, params: Any) -> Any:
        if name == "StartMessageMoveTask":  # moto has no such API; this is what SQS says for a non-DLQ
            raise ClientError({"Error": {"Code": "InvalidParameterValue", "Message": "not a DLQ"}}, name)
        return real(self, name, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", call)
    result = run("--dlq", "jobs-dlq", "--native")
    assert result.exit_code == 1
    assert "not a DLQ" in result.output


def test_cli_finds_the_dlq_from_the_jobs_queue(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, src)
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", src)
    result = CliRunner().invoke(build_app(), ["redrive", "--wait-time", "0", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["dlq_url"] == dlq
    assert depth(sqs, src) == 1


def test_cli_without_any_queue_says_which_flag(sqs: Any) -> None:
    sqs.create_queue(QueueName="no-policy")
    result = run()
    assert result.exit_code == 2 and "--dlq" in result.output
    result = run("--queue", "no-policy")
    assert result.exit_code == 2 and "no redrive policy" in result.output


def test_cli_dry_run_groups_a_long_plan(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsjobs.cli import redrive as cli_redrive

    src, dlq = make_queues(sqs)
    for key in range(4):
        dead_letter(sqs, dlq, src, key=key)
    dead_letter(sqs, dlq, src, job="sync-account", key=9)
    monkeypatch.setattr(cli_redrive, "PLAN_ROWS", 3)
    result = run("--dlq", dlq, "--dry-run")
    assert result.exit_code == 0, result.output
    assert "grouped" in result.output
    row = next(line for line in result.output.splitlines() if "invoice-email" in line)
    assert row.rstrip(" │").endswith("4")


def test_lambda_dry_run_returns_the_first_lines_and_the_count(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsjobs.ops import _redrive_event as engine

    src, dlq = make_queues(sqs)
    for key in range(5):
        dead_letter(sqs, dlq, src, key=key)
    monkeypatch.setenv("SQSJOBS_DLQ_URL", dlq)
    monkeypatch.setattr(engine, "LAMBDA_PLANNED_LINES", 2)
    result = load_handler().handler({"dry_run": True, "wait_time_seconds": 0}, Context(300_000))
    assert (result["planned_total"], len(result["planned"]), result["matched"]) == (5, 2, 5)
    assert depth(sqs, dlq) == 5


def test_cli_native_start_status_cancel(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """moto has no message move tasks: answer those three calls here, the rest goes to moto."""
    from botocore.client import BaseClient

    _, dlq = make_queues(sqs)
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    real = BaseClient._make_api_call
    calls: list[tuple[str, dict[str, Any]]] = []
    answers = {
        "StartMessageMoveTask": {"TaskHandle": "task-1"},
        "ListMessageMoveTasks": {"Results": [{"TaskHandle": "task-1", "Status": "RUNNING", "SourceArn": arn,
                                              "ApproximateNumberOfMessagesMoved": 3,
                                              "ApproximateNumberOfMessagesToMove": 9}]},
        "CancelMessageMoveTask": {"ApproximateNumberOfMessagesMoved": 4},
    }

    def call(self: Any, name: str, params: Any) -> Any:
        if name in answers:
            calls.append((name, params))
            return answers[name]
        return real(self, name, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", call)
    started = run("--dlq", "jobs-dlq", "--native", "--rate", "25", "--json")
    assert started.exit_code == 0, started.output
    assert json.loads(started.stdout) == {"task_handle": "task-1"}
    assert calls[0] == ("StartMessageMoveTask", {"SourceArn": arn, "MaxNumberOfMessagesPerSecond": 25})
    status = run("--dlq", "jobs-dlq", "--native", "--status")
    assert status.exit_code == 0 and "RUNNING" in status.output
    cancelled = run("--dlq", "jobs-dlq", "--native", "--cancel", "--json")
    assert json.loads(cancelled.stdout) == {"cancelled": True, "moved": 4}
    assert calls[-1] == ("CancelMessageMoveTask", {"TaskHandle": "task-1"})
