"""What ``enqueue`` really puts on the queue matches the published schema; ``sqsjobs schema`` prints it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aws_support import create_queues
from jsonschema import Draft202012Validator
from typer.testing import CliRunner

from sqsjobs.cli import build_app
from sqsjobs.cli.schema import load_schema, schema_text
from sqsjobs.enqueue._message import ATTR_JOB, ATTR_TRACE_ID
from sqsjobs.testing import messages_in

VALIDATOR = Draft202012Validator(load_schema())


def receive_all(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every message in the queue (received and hidden, so more than 10 can be read)."""
    received: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                    MessageAttributeNames=["All"]).get("Messages", [])
        if not batch:
            return received
        received.extend(batch)


def errors(body: str) -> list[str]:
    return [f"{'/'.join(map(str, e.path))}: {e.message}" for e in VALIDATOR.iter_errors(json.loads(body))]


def test_every_body_enqueue_sends_matches_the_schema(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int, resend: bool = False) -> None: ...

    @app.job("report", version=3)
    def report(account_id: str, months: list[int], ratio: float | None = None, note: str = "") -> None: ...

    @app.job("ping")
    def ping() -> None: ...

    send_invoice_email.enqueue(invoice_id=42)
    send_invoice_email.enqueue(invoice_id=43, resend=True, delay=0, trace_id="req-7")
    report.enqueue(account_id="acme", months=[1, 2, 3], ratio=0.25)
    report.enqueue(account_id="ünïcode ✓", months=[], ratio=None, note="x" * 1000)
    app.enqueue("ping")
    batch = app.enqueue_many([send_invoice_email.message(invoice_id=i) for i in range(100, 112)])
    assert batch.ok

    sent = receive_all(aws.sqs, aws.queue_url)
    assert len(sent) == 5 + 12
    for message in sent:
        assert errors(message["Body"]) == [], message["Body"]
        assert message["MessageAttributes"][ATTR_JOB]["StringValue"] == json.loads(message["Body"])["job"]
    traced = [m for m in sent if ATTR_TRACE_ID in m.get("MessageAttributes", {})]
    assert [m["MessageAttributes"][ATTR_TRACE_ID]["StringValue"] for m in traced] == ["req-7"]
    versions = sorted(json.loads(m["Body"])["job_version"] for m in sent)
    assert versions[-2:] == [3, 3]


def test_fifo_bodies_match_the_schema_too(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "schema-fifo", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)

    @app.job("sync", key="sync:{account_id}:{step}", group="{account_id}")
    def sync(account_id: str, step: int) -> None: ...

    sync.enqueue(account_id="a", step=1)
    sync.enqueue(account_id="b", step=1, group="override")
    bodies = [m["Body"] for m in messages_in(aws.sqs, queue_url)]
    assert len(bodies) == 2
    assert all(errors(body) == [] for body in bodies)


def test_sqsjobs_schema_prints_the_shipped_file(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(build_app(), ["schema"])
    assert result.exit_code == 0, result.output
    assert result.output == schema_text()
    assert json.loads(result.output)["properties"]["v"]["const"] == 1

    target = tmp_path / "envelope.schema.json"
    written = runner.invoke(build_app(), ["schema", "--output", str(target)])
    assert written.exit_code == 0 and written.output == ""
    assert json.loads(target.read_text()) == load_schema()


def test_the_packaged_schema_is_the_repository_file() -> None:
    repository_file = Path(__file__).resolve().parents[2] / "lib" / "sqsjobs" / "envelope.schema.json"
    assert schema_text() == repository_file.read_text(encoding="utf-8")
