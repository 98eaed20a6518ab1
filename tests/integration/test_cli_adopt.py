"""The CLI a new user meets (issue 14): `sqsjobs jobs`, `enqueue --from`, one-line errors for configuration,
one region rule, and redrive's refusals, against moto."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_support import create_queues
from moto import mock_aws
from moto.server import ThreadedMotoServer
from typer.testing import CliRunner

from sqsjobs import ConfigurationError, JobApp
from sqsjobs.cli import build_app
from sqsjobs.testing import messages_in

ROOT = Path(__file__).resolve().parents[2]
NO_REGION = "no AWS region is set: export AWS_REGION (or AWS_DEFAULT_REGION), give the profile a region, or pass " \
            "--region"


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # the reference app is handlers.app:app from the project root


@pytest.fixture
def no_region(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("AWS_REGION", "AWS_DEFAULT_REGION", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


def invoke(*arguments: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(build_app(), list(arguments))


def flat(output: str) -> str:
    """The output as one line: rich wraps long lines and frames usage errors in a box."""
    return " ".join(output.replace("│", " ").split())


def test_jobs_lists_the_registered_jobs_with_their_options(in_repo: None) -> None:
    table = invoke("jobs")
    assert table.exit_code == 0, table.output
    for name in ("billing-run-report", "invoice-email", "nightly-report", "process-order", "reindex-products"):
        assert name in table.output
    rows = {row["name"]: row for row in json.loads(invoke("jobs", "--json").output)}
    assert rows["nightly-report"]["schedule"] == "cron(0 2 * * ? *)"
    assert rows["reindex-products"]["chunked"] is True
    assert rows["invoice-email"]["key"] == "invoice-email:{invoice_id}"
    assert rows["invoice-email"]["parameters"] == ["invoice_id"]
    assert (rows["sms-reminder"]["limits"], rows["password-reset"]["queue"]) == (["sms"], "critical")
    assert rows["password-reset"]["tenant_metrics"] is True and rows["invoice-email"]["queue"] == "default"
    # A batch handler lists its batch size and one item's parameters.
    assert (rows["product-search-bulk"]["batch"], rows["product-search-bulk"]["parameters"]) == (25, ["product_id"])
    assert rows["product-search"]["batch"] is None and "batch of 25" in flat(table.output)
    missing = invoke("jobs", "--app", "no_such_module:app")
    assert missing.exit_code == 2 and missing.output.count("\n") == 1
    assert ("cannot import 'no_such_module' for the app 'no_such_module:app': No module named 'no_such_module'"
            in missing.output)


def test_enqueue_from_a_jsonl_file_checks_every_line_first(in_repo: None, tmp_path: Path) -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url, _ = create_queues(sqs, "from-file")
        good = tmp_path / "good.jsonl"
        good.write_text("\n".join(json.dumps({"job": "invoice-email", "args": {"invoice_id": i}}) for i in range(25))
                        + '\n{"job": "invoice-email", "args": {"invoice_id": 99}, "delay": 5}\n')
        sent = invoke("enqueue", "--from", str(good), "--queue-url", queue_url)
        assert sent.exit_code == 0, sent.output
        assert "sent 26 message(s) in 3 SendMessageBatch call(s)" in sent.output
        by_args = invoke("enqueue", "invoice-email", "--from", str(_lines(tmp_path, [{"invoice_id": 7}])),
                         "--queue-url", queue_url)
        assert "sent 1 message(s)" in by_args.output

        bad = _lines(tmp_path, [{"job": "invoice-email", "args": {"invoice_id": 1}},
                                {"job": "invoice-email", "args": {"invoice_id": "one"}}])
        refused = invoke("enqueue", "--from", str(bad), "--queue-url", queue_url)
        assert refused.exit_code == 1
        assert refused.output == ("error: lines.jsonl:2: job 'invoice-email': argument 'invoice_id' must be int, "
                                  "got str 'one'\n")
        counts = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
        # 26 visible and the one sent with delay=5; nothing of the bad file was sent
        assert (counts["ApproximateNumberOfMessages"], counts["ApproximateNumberOfMessagesDelayed"]) == ("26", "1")


def _lines(folder: Path, entries: list[dict[str, Any]]) -> Path:
    path = folder / "lines.jsonl"
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    return path


def test_a_key_value_given_twice_is_refused(in_repo: None) -> None:
    result = invoke("enqueue", "invoice-email", "invoice_id=1", "invoice_id=2", "--queue-url", "https://x")
    assert result.exit_code == 2 and "invoice_id is given twice (invoice_id=1, invoice_id=2): keep one" in flat(
        result.output)


@pytest.mark.parametrize("arguments", [
    ("status", "--queue", "jobs"),
    ("redrive", "--dlq", "jobs-dlq", "--dry-run"),
    ("enqueue", "invoice-email", "invoice_id=1", "--aws", "--queue-url", "https://sqs.example/1/jobs"),
])
def test_no_region_is_one_line_naming_the_variables_not_a_traceback(in_repo: None, no_region: None,
                                                                    arguments: tuple[str, ...]) -> None:
    result = invoke(*arguments)
    assert result.exit_code in (1, 2), result.output
    assert NO_REGION in flat(result.output) and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_enqueue_aws_reads_aws_region_as_the_other_commands_do(in_repo: None, no_region: None,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-west-1")
    with mock_aws():
        sqs = boto3.client("sqs", region_name="eu-west-1")
        queue_url, _ = create_queues(sqs, "regional")
        result = invoke("enqueue", "invoice-email", "invoice_id=5", "--aws", "--queue-url", queue_url)
        assert result.exit_code == 0, result.output
        (message,) = messages_in(sqs, queue_url)
        assert json.loads(message["Body"])["args"] == {"invoice_id": 5}


def test_an_unconfigured_app_says_which_setting_is_missing(no_region: None) -> None:
    app = JobApp()

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None: ...

    with pytest.raises(ConfigurationError, match="queue_url is not set: pass queue_url= to JobApp or set "
                                                 "SQSJOBS_QUEUE_URL"):
        greet.enqueue(user_id=1)
    configured = JobApp(queue_url="https://sqs.example/1/jobs")
    configured.job("greet")(greet.fn)
    with pytest.raises(ConfigurationError, match="no AWS region is set"):
        configured.enqueue("greet", user_id=1)


def test_redrive_refuses_the_jobs_queue_as_its_dlq() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url, dlq_url = create_queues(sqs, "jobs")
        result = invoke("redrive", "--dlq", queue_url, "--dry-run")
        assert result.exit_code == 2, result.output
        assert "is not a dead-letter queue: no queue sends its failures there, and it sends its own to " \
               f"{dlq_url}; pass --dlq {dlq_url}" in flat(result.output)


def test_native_redrive_against_an_endpoint_without_move_tasks_is_one_line() -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name="us-east-1")
        _, dlq_url = create_queues(sqs, "native")
        result = invoke("redrive", "--dlq", dlq_url, "--native", "--status", "--endpoint-url", endpoint)
    finally:
        server.stop()
    assert result.exit_code == 2, result.output
    output = flat(result.output)
    assert "does not support SQS message move tasks" in output and "without --native" in output
    assert "<html" not in result.output.lower()


def test_the_worker_status_and_redrive_name_a_failure_by_the_same_message_id(make_app: Any, aws: Any) -> None:
    from sqsjobs import Outcome, PermanentError
    from sqsjobs.ops._redrive import Redrive
    from sqsjobs.ops._redrive_options import RedriveOptions
    from sqsjobs.ops._status import collect_status
    from sqsjobs.testing import FakeContext, receive_event

    app = make_app()

    @app.job("poison", key="poison:{n}")
    def poison(n: int) -> None:
        raise PermanentError("gone")

    sent_id = poison.enqueue(n=1)
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url), FakeContext())
    (delivery,) = result.deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and delivery.message_id == sent_id  # what the logs say

    report = collect_status(sqs_client=aws.sqs, queue=aws.queue_url, dlq=aws.dlq_url)
    (failure,) = report.recent_failures
    plan = Redrive(RedriveOptions(dlq=aws.dlq_url, dry_run=True, wait_time_seconds=0), sqs_client=aws.sqs).run()
    (planned,) = plan.planned
    (letter,) = messages_in(aws.sqs, aws.dlq_url)
    assert letter["MessageId"] != sent_id  # the DLQ's own id is another
    assert failure.message_id == planned.message_id == sent_id
