"""Operating two jobs queues that share a DLQ (moto): the worker dead-letters from either with its source,
`sqsjobs status` shows every queue, and a redrive sends each letter back to the queue it came from."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from sqsjobs import JobApp, PermanentError
from sqsjobs.cli import build_app
from sqsjobs.ops._redrive import redrive
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.ops._status import collect_status
from sqsjobs.testing import messages_in, receive_event


@pytest.fixture
def critical(aws: Any) -> str:
    arn = aws.sqs.get_queue_attributes(QueueUrl=aws.dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return str(aws.sqs.create_queue(QueueName="critical", Attributes={
        "VisibilityTimeout": "120",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "4"})})["QueueUrl"])


@pytest.fixture
def app(make_app: Any, aws: Any, critical: str) -> JobApp:
    app = make_app(queues={"critical": critical})

    @app.job("invoice-email", key="invoice-email:{n}")
    def invoice_email(n: int) -> None:
        raise PermanentError(f"invoice {n} does not exist")

    @app.job("password-reset", key="password-reset:{user_id}", queue="critical")
    def password_reset(user_id: int) -> None:
        raise PermanentError(f"user {user_id} does not exist")

    return app


def dead_letter_both(app: JobApp, aws: Any, critical: str) -> None:
    app.jobs["invoice-email"].enqueue(n=1)
    app.jobs["password-reset"].enqueue(user_id=2)
    for url in (aws.queue_url, critical):
        app.process_batch(receive_event(aws.sqs, url))


def test_status_shows_every_jobs_queue_and_the_shared_dlq(app: JobApp, aws: Any, critical: str,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    dead_letter_both(app, aws, critical)
    app.jobs["password-reset"].enqueue(user_id=3)  # waiting on the critical queue

    report = collect_status(sqs_client=aws.sqs, queue=aws.queue_url, dlq=aws.dlq_url)
    assert [q.name for q in report.queues] == ["jobs", "critical"]  # the DLQ's other source is found
    assert report.queue is not None and report.queue.name == "jobs"
    assert [q.depth for q in report.queues] == [1, 2]  # (the processed messages wait for the poller's delete)
    assert report.dlq is not None and report.dlq.depth == 2
    assert sorted(g.job for g in report.dlq_groups) == ["invoice-email", "password-reset"]
    data = report.to_dict()
    assert [(q["name"], q["depth"]) for q in data["queues"]] == [("jobs", 1), ("critical", 2)]

    # From the environment the template sets, a named queue that shares no DLQ shows too.
    bulk = aws.sqs.create_queue(QueueName="bulk")["QueueUrl"]
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", aws.queue_url)
    monkeypatch.setenv("SQSJOBS_QUEUE_URL_BULK", bulk)
    monkeypatch.setenv("SQSJOBS_DLQ_URL", aws.dlq_url)
    result = CliRunner().invoke(build_app(), ["status"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert all(f"jobs: {name}" in result.output for name in ("jobs", "critical", "bulk"))


def test_a_redrive_sends_each_letter_back_to_its_own_queue(app: JobApp, aws: Any, critical: str) -> None:
    dead_letter_both(app, aws, critical)
    for url in (aws.queue_url, critical):  # the poller's deletes of the dead-lettered originals
        for message in messages_in(aws.sqs, url):
            aws.sqs.delete_message(QueueUrl=url, ReceiptHandle=message["ReceiptHandle"])

    summary = redrive(RedriveOptions(dlq=aws.dlq_url, wait_time_seconds=0), sqs_client=aws.sqs)
    assert summary.moved == 2
    assert [json.loads(m["Body"])["key"] for m in messages_in(aws.sqs, critical)] == ["password-reset:2"]
    assert [json.loads(m["Body"])["key"] for m in messages_in(aws.sqs, aws.queue_url)] == ["invoice-email:1"]
    assert messages_in(aws.sqs, aws.dlq_url) == []
