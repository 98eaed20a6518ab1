"""Queue routing and tenants against moto: each job reaches its own queue (enqueue, enqueue_many, the outbox
relay, a worker's re-send), a tenant is a standard queue's MessageGroupId and is refused on a FIFO queue."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from aws_support import create_queues, create_table
from moto import mock_aws

from sqsjobs import EnqueueError, JobApp, OutboxRelay
from sqsjobs.testing import messages_in


@pytest.fixture
def queues(aws: Any) -> dict[str, str]:
    critical, _ = create_queues(aws.sqs, "critical")
    return {"default": aws.queue_url, "critical": critical}


@pytest.fixture
def app(make_app: Any, queues: dict[str, str]) -> JobApp:
    app = make_app(queue_url=None, queues=queues)

    @app.job("invoice-email", key="invoice-email:{n}")
    def invoice_email(n: int) -> None: ...

    @app.job("password-reset", key="password-reset:{user_id}", queue="critical")
    def password_reset(user_id: int) -> None: ...

    return app


def keys(sqs: Any, url: str) -> list[str]:
    return sorted(json.loads(m["Body"])["key"] for m in messages_in(sqs, url))


def test_each_job_goes_to_its_own_queue(app: JobApp, aws: Any, queues: dict[str, str]) -> None:
    app.jobs["password-reset"].enqueue(user_id=7)
    app.enqueue("invoice-email", n=1)
    assert keys(aws.sqs, queues["critical"]) == ["password-reset:7"]
    assert keys(aws.sqs, queues["default"]) == ["invoice-email:1"]


def test_enqueue_many_splits_by_queue_and_reports_in_the_callers_order(
        app: JobApp, aws: Any, queues: dict[str, str]) -> None:
    reset, email = app.jobs["password-reset"], app.jobs["invoice-email"]
    messages = [email.message(n=0), reset.message(user_id=1), email.message(n=2), reset.message(user_id=3)]
    report = app.enqueue_many(messages)
    assert report.ok and sorted(report.message_ids) == [0, 1, 2, 3] and report.calls == 2
    assert keys(aws.sqs, queues["critical"]) == ["password-reset:1", "password-reset:3"]
    assert keys(aws.sqs, queues["default"]) == ["invoice-email:0", "invoice-email:2"]
    by_id = {m["MessageId"]: json.loads(m["Body"])["key"] for url in queues.values() for m in messages_in(aws.sqs, url)}
    assert [by_id[report.message_ids[i]] for i in range(4)] == [m.key for m in messages]


def test_a_queue_known_by_name_but_without_a_url_fails_clearly_at_send(make_app: Any) -> None:
    app = make_app(queue_url=None, environ={})

    @app.job("invoice-email", key="invoice-email:{n}")
    def invoice_email(n: int) -> None: ...

    with pytest.raises(Exception, match=r"queue_url is not set: .* \(queues with a URL: none\)$"):
        invoice_email.enqueue(n=1)


def test_the_outbox_relay_routes_by_queue_and_keeps_the_tenant(app: JobApp, aws: Any, queues: dict[str, str]) -> None:
    create_table(aws.dynamodb, "outbox")
    images: list[dict[str, Any]] = []
    with app.use(settings={"outbox_table": "outbox"}), app.transaction() as tx:
        tx.enqueue("password-reset", user_id=9, tenant="acme")
        tx.enqueue("invoice-email", n=9)
    for item in aws.dynamodb.scan(TableName="outbox")["Items"]:
        images.append({"eventName": "INSERT", "dynamodb": {"NewImage": item, "SequenceNumber": "1"}})
    relay = OutboxRelay(queue_url=queues["default"], queues={"critical": queues["critical"]}, sqs_client=aws.sqs)
    assert relay.relay({"Records": images}).sent == 2
    (critical,) = messages_in(aws.sqs, queues["critical"])
    assert json.loads(critical["Body"])["key"] == "password-reset:9"
    assert critical["Attributes"]["MessageGroupId"] == "acme"
    assert keys(aws.sqs, queues["default"]) == ["invoice-email:9"]


def test_the_relay_reads_its_queues_from_the_environment() -> None:
    relay = OutboxRelay.from_env({"SQSJOBS_QUEUE_URL": "https://q/1/jobs", "SQSJOBS_QUEUE_URL_CRITICAL": "https://q/1/c"})
    assert relay.queues == {"critical": "https://q/1/c"}


def test_a_tenant_on_a_fifo_queue_is_refused(make_app: Any, aws: Any) -> None:
    queue_url, _ = create_queues(aws.sqs, "ordered", fifo=True)
    app = make_app(queue_url=queue_url)

    @app.job("sync", key="sync:{account}", group="{account}")
    def sync(account: str) -> None: ...

    with pytest.raises(EnqueueError) as refused:
        sync.enqueue(account="a", tenant="acme")
    assert str(refused.value) == ("job 'sync': tenant='acme' sets a standard queue's MessageGroupId (SQS fair "
                                  "queues); on a FIFO queue the group id orders messages: use group= instead")
    assert messages_in(aws.sqs, queue_url) == []
    report = app.enqueue_many([sync.message(account="a", tenant="acme"), sync.message(account="b")])
    assert report.sent == 1 and [f.index for f in report.failed] == [0] and report.failed[0].sender_fault


def test_routing_works_with_the_environment_the_template_sets() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        default = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        critical = sqs.create_queue(QueueName="critical")["QueueUrl"]
        app = JobApp(sqs_client=sqs, environ={"SQSJOBS_QUEUE_URL": default, "SQSJOBS_QUEUE_URL_CRITICAL": critical})

        @app.job("password-reset", key="password-reset:{user_id}", queue="critical")
        def password_reset(user_id: int) -> None: ...

        password_reset.enqueue(user_id=1, tenant="acme")
        (message,) = messages_in(sqs, critical)
        assert message["Attributes"]["MessageGroupId"] == "acme"
        assert messages_in(sqs, default) == []


def test_the_cli_enqueues_for_a_tenant(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from typer.testing import CliRunner

    from sqsjobs.cli import build_app

    (tmp_path / "tenant_app.py").write_text(
        "from sqsjobs import JobApp\napp = JobApp()\n\n"
        "@app.job('sync', key='sync:{n}')\ndef sync(n: int) -> None: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        result = CliRunner().invoke(build_app(), ["enqueue", "sync", "n=1", "--app", "tenant_app:app", "--queue-url",
                                                  url, "--tenant", "acme"])
        assert result.exit_code == 0, result.output
        (message,) = messages_in(sqs, url)
    assert message["Attributes"]["MessageGroupId"] == "acme"
