"""Found while building the chaos ledger, pinned as plain tests."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from sqsjobs.testing import messages_in


@pytest.fixture
def sqs() -> Any:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def test_messages_in_returns_every_message_and_leaves_them_visible(sqs: Any) -> None:
    # Receiving with VisibilityTimeout=0 hands back the same first ten messages every time (moto
    # always, SQS often), so the helper stopped at ten and counted each of them twice.
    queue = sqs.create_queue(QueueName="many")["QueueUrl"]
    for start in range(0, 35, 5):
        sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"}
                                                        for i in range(5)])
    first = messages_in(sqs, queue)
    assert sorted(m["Body"] for m in first) == sorted(f"m{i}" for i in range(35))
    again = messages_in(sqs, queue)
    assert len(again) == 35
    # Each look is one receive per message, not two.
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}


def _copies_app() -> tuple[Any, Any]:
    from fuzz.strategies import RecordingSQS

    from sqsjobs import JobApp
    from sqsjobs.guard import InMemoryStore

    sqs = RecordingSQS()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/1/q", dlq_url="https://sqs.us-east-1.amazonaws.com/1/d",
                 store=InMemoryStore(), sqs_client=sqs, max_attempts=4, backoff_base=2, backoff_cap=60,
                 emit_metrics=lambda line: None)

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise ConnectionError("dependency down")

    return app, sqs


def test_a_later_copy_of_a_key_retries_on_its_own_attempt_count() -> None:
    # Two copies of one job in a batch: the first on its third attempt, this one on its first. The
    # copy shared the first copy's delay, drawn from the attempt-3 bound (8 s), not its own (2 s).
    from sqsjobs import Outcome
    from sqsjobs.testing import FakeContext, sqs_record

    app, _ = _copies_app()
    body = app.get_job("flaky").message(n=1).body
    for _ in range(50):
        result = app.process_batch({"Records": [sqs_record(body, attempt=3), sqs_record(body, attempt=1)]},
                                   FakeContext(clock=lambda: 0.0))
        first, copy = result.deliveries
        assert first.outcome is copy.outcome is Outcome.RETRY
        assert 0 <= copy.delay <= 2.0, copy.delay


def test_a_later_copy_on_its_last_attempt_is_dead_lettered_with_its_reason() -> None:
    # Sharing the first copy's RETRY on the copy's own final attempt sent it back to the queue,
    # whose redrive policy then moved it to the DLQ without any reason attributes.
    from sqsjobs import Outcome
    from sqsjobs.testing import FakeContext, sqs_record

    app, sqs = _copies_app()
    body = app.get_job("flaky").message(n=2).body
    last = sqs_record(body, attempt=4)
    result = app.process_batch({"Records": [sqs_record(body, attempt=1), last]}, FakeContext(clock=lambda: 0.0))
    first, copy = result.deliveries
    assert first.outcome is Outcome.RETRY
    assert copy.outcome is Outcome.DEAD_LETTERED
    (entry,) = sqs.dead_letters
    assert entry["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "exhausted"
    assert entry["MessageAttributes"]["sqsjobs.original_message_id"]["StringValue"] == last["messageId"]
