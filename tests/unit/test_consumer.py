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
    from sqsjobs.store._memory import InMemoryStore

    sqs = RecordingSQS()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/1/q", dlq_url="https://sqs.us-east-1.amazonaws.com/1/d",
                 store=InMemoryStore(), sqs_client=sqs, max_attempts=4, backoff_base=2, backoff_cap=60,
                 emit_metrics=lambda line: None)

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise ConnectionError("dependency down")

    return app, sqs


def test_a_later_copy_of_a_key_follows_the_first_and_uses_no_attempt() -> None:
    # Two copies of one job in a batch. Attempts are the runs that started, counted in the key's record:
    # the copy never runs, so it comes back with the first copy's delay and spends nothing.
    from sqsjobs import Outcome
    from sqsjobs.testing import FakeContext, sqs_record

    app, _ = _copies_app()
    body = app.runtime.job("flaky").message(n=1).body
    for expected_attempt in (1, 2, 3):
        result = app.process_batch({"Records": [sqs_record(body, attempt=3), sqs_record(body, attempt=1)]},
                                   FakeContext(clock=lambda: 0.0))
        first, copy = result.deliveries
        assert first.outcome is copy.outcome is Outcome.RETRY
        assert copy.delay == first.delay and copy.duration_ms is None
        assert app.status("flaky:1").attempts == expected_attempt


def test_a_later_copy_at_the_queues_last_receive_is_re_sent_not_left_to_sqs() -> None:
    # Returning a record at the queue's last receive let its redrive policy move it to the DLQ without any
    # reason attributes. The worker re-sends it as a fresh message instead (it has attempts left).
    from sqsjobs import Outcome
    from sqsjobs.testing import FakeContext, sqs_record

    app, sqs = _copies_app()
    body = app.runtime.job("flaky").message(n=2).body
    last = sqs_record(body, attempt=5)  # max_attempts=4: maxReceiveCount is 5
    result = app.process_batch({"Records": [sqs_record(body, attempt=1), last]}, FakeContext(clock=lambda: 0.0))
    first, copy = result.deliveries
    assert first.outcome is copy.outcome is Outcome.RETRY
    assert copy.acknowledged and not first.acknowledged
    (resent,) = [e for e in sqs.sent if e["MessageBody"] == body]
    assert resent["MessageAttributes"]["sqsjobs.resends"]["StringValue"] == "1"
    assert sqs.dead_letters == []
