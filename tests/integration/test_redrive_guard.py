"""A replay is one more delivery: redriven messages pass the worker's idempotency guard (moto).

The poller is emulated as Lambda runs it: receive a batch, call the handler,
delete every record not named in ``batchItemFailures``.
"""

from __future__ import annotations

import json
from typing import Any

from aws_support import MAX_ATTEMPTS
from botocore.exceptions import EndpointConnectionError

from sqsjobs import Outcome, PermanentError, RetryableError
from sqsjobs.ops._dlq_letters import ATTR_REDRIVE_COUNT
from sqsjobs.ops._redrive import redrive
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.testing import messages_in, receive_event


def poll(app: Any, sqs: Any, queue_url: str) -> list[Outcome]:
    """One poller round: handler, then delete what it acknowledged. Returns the outcomes."""
    event = receive_event(sqs, queue_url)
    if not event["Records"]:
        return []
    result = app.process_batch(event)
    failed = {item["itemIdentifier"] for item in result.response()["batchItemFailures"]}
    for record in event["Records"]:
        if record["messageId"] not in failed:
            sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=record["receiptHandle"])
    return [d.outcome for d in result.deliveries]


def options(dlq_url: str, **kwargs: Any) -> RedriveOptions:
    return RedriveOptions(dlq=dlq_url, wait_time_seconds=0, **kwargs)


def attr(message: dict[str, Any], name: str) -> str:
    return str(message["MessageAttributes"][name]["StringValue"])


def test_a_dead_letter_whose_job_completed_meanwhile_is_acknowledged_as_a_duplicate(make_app: Any, aws: Any) -> None:
    app = make_app()
    sent: list[int] = []
    provider_down = True

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None:
        if provider_down:
            raise PermanentError("mail provider rejected the request")
        sent.append(invoice_id)

    send_invoice_email.enqueue(invoice_id=42)
    assert poll(app, aws.sqs, aws.queue_url) == [Outcome.DEAD_LETTERED]
    provider_down = False
    send_invoice_email.enqueue(invoice_id=42)  # someone pressed "resend" before the operator redrove
    assert poll(app, aws.sqs, aws.queue_url) == [Outcome.SUCCEEDED]
    assert sent == [42]

    summary = redrive(options(aws.dlq_url), sqs_client=aws.sqs)

    assert summary.moved == 1
    assert poll(app, aws.sqs, aws.queue_url) == [Outcome.DUPLICATE]
    assert sent == [42]  # no second email
    assert messages_in(aws.sqs, aws.queue_url) == [] and messages_in(aws.sqs, aws.dlq_url) == []


def test_a_replayed_failed_job_runs_once_even_when_the_redrive_sent_it_twice(make_app: Any, aws: Any) -> None:
    app = make_app()
    synced: list[int] = []
    dependency_up = False

    @app.job("sync-account", key="sync-account:{account_id}")
    def sync_account(account_id: int) -> None:
        if not dependency_up:
            raise RetryableError("CRM timed out", delay=0)
        synced.append(account_id)

    sync_account.enqueue(account_id=7)
    outcomes = [o for _ in range(MAX_ATTEMPTS) for o in poll(app, aws.sqs, aws.queue_url)]
    assert outcomes == [Outcome.RETRY] * (MAX_ATTEMPTS - 1) + [Outcome.DEAD_LETTERED]
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, "sqsjobs.reason") == "exhausted"
    dependency_up = True  # the fix is deployed

    # The first redrive sends, then loses its connection before the delete; the
    # operator runs it again, so the job is in the queue twice.
    class LostOnDelete:
        def __getattr__(self, name: str) -> Any:
            if name == "delete_message_batch":
                def lost(**kwargs: Any) -> Any:
                    raise EndpointConnectionError(endpoint_url="https://sqs")
                return lost
            return getattr(aws.sqs, name)

    first = redrive(options(aws.dlq_url), sqs_client=LostOnDelete())  # type: ignore[arg-type]
    assert first.stopped == "error"
    second = redrive(options(aws.dlq_url), sqs_client=aws.sqs)
    assert second.moved == 1
    assert len(messages_in(aws.sqs, aws.queue_url)) == 2

    outcomes = [o for _ in range(3) for o in poll(app, aws.sqs, aws.queue_url)]
    assert sorted(o.value for o in outcomes) == ["duplicate", "succeeded"]
    assert synced == [7]
    assert messages_in(aws.sqs, aws.queue_url) == [] and messages_in(aws.sqs, aws.dlq_url) == []


def test_a_replay_gets_fresh_attempts_and_carries_its_redrive_count(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("always-broken", key="always-broken:{n}")
    def always_broken(n: int) -> None:
        raise PermanentError("still broken")

    always_broken.enqueue(n=1)
    poll(app, aws.sqs, aws.queue_url)
    for expected in ("1", "2"):
        assert redrive(options(aws.dlq_url), sqs_client=aws.sqs).moved == 1
        assert poll(app, aws.sqs, aws.queue_url) == [Outcome.DEAD_LETTERED]
        (dead,) = messages_in(aws.sqs, aws.dlq_url)
        # The worker keeps the count when it dead-letters again: the poison guard can see it.
        assert attr(dead, ATTR_REDRIVE_COUNT) == expected
        assert attr(dead, "sqsjobs.attempts") == "1"


def test_malformed_bodies_go_round_as_bytes_until_the_poison_guard_keeps_them(make_app: Any, aws: Any) -> None:
    app = make_app()
    body = '{"v": 1, "job": "invoice-email", "args": {"invoice_id": "forty-two"'  # truncated JSON
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=body)
    assert poll(app, aws.sqs, aws.queue_url) == [Outcome.DEAD_LETTERED]

    for _ in range(3):
        summary = redrive(options(aws.dlq_url, max_redrives=3), sqs_client=aws.sqs)
        assert summary.moved == 1
        assert [m["Body"] for m in messages_in(aws.sqs, aws.queue_url)] == [body]  # the same bytes
        assert poll(app, aws.sqs, aws.queue_url) == [Outcome.DEAD_LETTERED]
        (dead,) = messages_in(aws.sqs, aws.dlq_url)
        assert attr(dead, "sqsjobs.reason") == "malformed"

    stopped = redrive(options(aws.dlq_url, max_redrives=3), sqs_client=aws.sqs)
    assert (stopped.moved, dict(stopped.skipped)) == (0, {"poison": 1})
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert dead["Body"] == body and attr(dead, ATTR_REDRIVE_COUNT) == "3"


def test_malformed_bodies_can_stay_in_the_dlq_with_a_stated_reason(make_app: Any, aws: Any) -> None:
    app = make_app()
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody="{nope")
    assert poll(app, aws.sqs, aws.queue_url) == [Outcome.DEAD_LETTERED]

    summary = redrive(options(aws.dlq_url, malformed="skip", dry_run=True), sqs_client=aws.sqs)
    assert [(p.job, p.reason, p.action) for p in summary.planned] == [("?", "malformed", "skip:malformed")]
    summary = redrive(options(aws.dlq_url, malformed="skip"), sqs_client=aws.sqs)
    assert (summary.moved, dict(summary.skipped)) == (0, {"malformed": 1})
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert dead["Body"] == "{nope"


def test_redrive_filters_by_the_reasons_the_worker_wrote(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("gone", key="gone:{n}")
    def gone(n: int) -> None:
        raise PermanentError(f"record {n} was deleted")

    class UpstreamTimeout(RetryableError):
        pass

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise UpstreamTimeout("upstream slow", delay=0)  # delay 0: the test's poller sees each retry at once

    gone.enqueue(n=1)
    flaky.enqueue(n=2)
    for _ in range(MAX_ATTEMPTS):
        poll(app, aws.sqs, aws.queue_url)
    assert len(messages_in(aws.sqs, aws.dlq_url)) == 2

    summary = redrive(options(aws.dlq_url, error_type="UpstreamTimeout"), sqs_client=aws.sqs)

    assert (summary.moved, dict(summary.skipped)) == (1, {"filtered": 1})
    (moved,) = messages_in(aws.sqs, aws.queue_url)
    assert json.loads(moved["Body"])["job"] == "flaky"
    (left,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(left, "sqsjobs.error_type") == "PermanentError"


def dead_lettered_jobs(make_app: Any, aws: Any, count: int) -> tuple[Any, list[int]]:
    """An app whose job fails for good, ``count`` of its jobs in the DLQ, and the list its later runs go to."""
    app = make_app()
    runs: list[int] = []

    @app.job("still-broken", key="still-broken:{n}")
    def still_broken(n: int) -> None:
        runs.append(n)
        raise PermanentError("not fixed yet")

    for n in range(count):
        still_broken.enqueue(n=n)
    poll(app, aws.sqs, aws.queue_url)
    assert len(messages_in(aws.sqs, aws.dlq_url)) == count
    runs.clear()
    return app, runs


def test_a_replay_that_fails_again_during_the_run_is_not_moved_twice(make_app: Any, aws: Any) -> None:
    app, runs = dead_lettered_jobs(make_app, aws, 3)

    class LiveWorker:
        """The deployed worker consumes each replay as soon as it lands, and dead-letters it again."""

        def __getattr__(self, name: str) -> Any:
            return getattr(aws.sqs, name)

        def send_message_batch(self, **kwargs: Any) -> Any:
            response = aws.sqs.send_message_batch(**kwargs)
            poll(app, aws.sqs, aws.queue_url)
            return response

    summary = redrive(options(aws.dlq_url), sqs_client=LiveWorker())  # type: ignore[arg-type]

    assert summary.moved == 3
    assert dict(summary.skipped) == {"failed-again": 3}
    assert sorted(runs) == [0, 1, 2]  # each replay ran once in this redrive, not until the poison guard
    dead = messages_in(aws.sqs, aws.dlq_url)
    assert sorted(attr(m, ATTR_REDRIVE_COUNT) for m in dead) == ["1", "1", "1"]


def test_a_replays_letter_seen_before_its_evidence_is_written_is_not_moved_twice(make_app: Any, aws: Any) -> None:
    # The worker sends a letter to the DLQ first and writes its evidence (dlq#<copy id>) after: a redrive
    # that receives the letter in between reads the table, finds no evidence, and must still know the
    # letter for a replay of its own (found on the local cloud: tests/integration/test_redrive_local_cloud.py).
    app, runs = dead_lettered_jobs(make_app, aws, 2)

    def evidence_keys() -> set[str]:
        items = aws.dynamodb.scan(TableName=aws.table)["Items"]
        return {item["pk"]["S"] for item in items if item["pk"]["S"].startswith("dlq#")}

    class LiveWorkerBehindItsEvidence:
        """The worker dead-letters each replay at once; its evidence is not yet in the table when read."""

        def __getattr__(self, name: str) -> Any:
            return getattr(aws.sqs, name)

        def send_message_batch(self, **kwargs: Any) -> Any:
            response = aws.sqs.send_message_batch(**kwargs)
            before = evidence_keys()
            poll(app, aws.sqs, aws.queue_url)
            for key in evidence_keys() - before:
                aws.dynamodb.delete_item(TableName=aws.table, Key={"pk": {"S": key}})
            return response

    records = DynamoDBStore(aws.dynamodb, aws.table)
    summary = redrive(options(aws.dlq_url, max_messages=10),  # a spin stops at 10 moves, not at the guard
                      sqs_client=LiveWorkerBehindItsEvidence(),  # type: ignore[arg-type]
                      records=records)

    assert summary.moved == 2
    assert dict(summary.skipped) == {"failed-again": 2}
    assert sorted(runs) == [0, 1]
