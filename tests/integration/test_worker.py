"""The worker against moto: the guard, retries, the DLQ with reasons, deadlines and FIFO groups."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_support import MAX_ATTEMPTS, create_queues

from sqsjobs import InvalidEventError, Outcome, PermanentError, RetryableError
from sqsjobs._backoff import BackoffPolicy
from sqsjobs.enqueue._message import ATTR_JOB
from sqsjobs.store._lease import LeaseState
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.testing import FakeContext, messages_in, receive_event, sqs_event
from sqsjobs.worker._dead_letters import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_MESSAGE,
    ATTR_ERROR_TYPE,
    ATTR_FIRST_RECEIVE_TIME,
    ATTR_ORIGINAL_MESSAGE_ID,
    ATTR_REASON,
    ATTR_SOURCE_QUEUE,
)


def attr(message: dict[str, Any], name: str) -> str:
    return str(message["MessageAttributes"][name]["StringValue"])


def test_duplicate_delivery_runs_the_function_once(make_app: Any, aws: Any) -> None:
    app = make_app()
    calls: list[int] = []

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None:
        calls.append(invoice_id)

    send.enqueue(invoice_id=42)
    send.enqueue(invoice_id=42)  # a producer that double-sends
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))

    assert calls == [42]
    assert sorted(d.outcome for d in result.deliveries) == [Outcome.DUPLICATE, Outcome.SUCCEEDED]
    assert result.failures == ()

    send.enqueue(invoice_id=42)  # a late duplicate, in another batch
    late = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert [d.outcome for d in late.deliveries] == [Outcome.DUPLICATE]
    assert calls == [42]
    assert app.status("invoice-email:42").state == "succeeded"


def test_a_crashed_claim_is_taken_over_after_its_lease(make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app()
    calls: list[int] = []

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None:
        calls.append(invoice_id)

    # An invocation claimed the key and died before completing it.
    app.runtime.store.write(Acquire(key="invoice-email:7", owner="crashed", now=clock(), lease_until=clock() + 60,
                            expires_at=clock() + 3600, count_attempt=True))
    send.enqueue(invoice_id=7)
    busy = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    (delivery,) = busy.deliveries
    assert delivery.outcome is Outcome.UNSTARTED  # no attempt used: it never ran here
    assert 60 <= delivery.delay <= 62  # about the lease's remaining time
    assert calls == []

    clock.advance(61)
    event = sqs_event([json.loads(send.message(invoice_id=7).body)], attempt=2)
    taken = app.process_batch(event)
    assert [d.outcome for d in taken.deliveries] == [Outcome.SUCCEEDED]
    assert calls == [7]
    record = app.runtime.store.get("invoice-email:7")
    assert record.state is LeaseState.DONE and record.owner != "crashed"
    assert record.attempts == 2  # the run that died counts


def test_retry_delay_is_full_jitter_and_the_visibility_really_changes(make_app: Any, aws: Any) -> None:
    app = make_app(backoff_base=100, backoff_cap=600)

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise ConnectionError("dependency down")

    flaky.enqueue(n=1)
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    (delivery,) = result.deliveries
    assert delivery.outcome is Outcome.RETRY
    assert result.failures == (delivery.message_id,)
    bound = BackoffPolicy(base=100, cap=600).bound(delivery.attempt)
    assert 1 <= delivery.delay <= bound
    # The message stays invisible for the delay: an immediate receive finds nothing.
    assert receive_event(aws.sqs, aws.queue_url)["Records"] == []
    # The claim was released, so the retry can claim the key again.
    assert app.runtime.store.get("flaky:1").state is LeaseState.RELEASED
    assert app.status("flaky:1").state == "retrying"


def test_retryable_error_may_choose_its_delay(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("rate-limited")
    def rate_limited(n: int) -> None:
        raise RetryableError("429", delay=17)

    rate_limited.enqueue(n=1)
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    assert delivery.outcome is Outcome.RETRY and delivery.delay == 17


def test_final_attempt_goes_to_the_dlq_with_its_reason(make_app: Any, aws: Any) -> None:
    app = make_app()
    attempts: list[int] = []

    @app.job("always-fails", key="always-fails:{n}")
    def always_fails(n: int) -> None:
        attempts.append(n)
        raise RetryableError("still broken", delay=0)

    message_id = always_fails.enqueue(n=5)
    outcomes = []
    for _ in range(MAX_ATTEMPTS):
        result = app.process_batch(receive_event(aws.sqs, aws.queue_url))
        outcomes.append(result.deliveries[0].outcome)
    assert outcomes == [Outcome.RETRY, Outcome.RETRY, Outcome.DEAD_LETTERED]
    assert len(attempts) == MAX_ATTEMPTS
    assert messages_in(aws.sqs, aws.queue_url) == []

    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "exhausted"
    assert attr(dead, ATTR_ERROR_TYPE) == "RetryableError"
    assert attr(dead, ATTR_ERROR_MESSAGE) == "still broken"
    assert attr(dead, ATTR_ATTEMPTS) == str(MAX_ATTEMPTS)
    assert attr(dead, ATTR_ORIGINAL_MESSAGE_ID) == message_id
    assert attr(dead, ATTR_JOB) == "always-fails"
    assert attr(dead, ATTR_SOURCE_QUEUE) == aws.queue_url
    assert int(attr(dead, ATTR_FIRST_RECEIVE_TIME)) > 0
    assert json.loads(dead["Body"])["args"] == {"n": 5}


def test_permanent_error_goes_straight_to_the_dlq(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("gone")
    def gone(invoice_id: int) -> None:
        raise PermanentError(f"invoice {invoice_id} was deleted")

    gone.enqueue(invoice_id=9)
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert [d.outcome for d in result.deliveries] == [Outcome.DEAD_LETTERED]
    assert result.failures == ()  # acknowledged: it is safe in the DLQ
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "permanent"
    assert attr(dead, ATTR_ERROR_MESSAGE) == "invoice 9 was deleted"
    assert attr(dead, ATTR_ATTEMPTS) == "1"


MALFORMED = {
    "not json": "{nope",
    "array": "[1, 2, 3]",
    "no version": json.dumps({"job": "ok", "args": {"n": 1}}),
    "future version": json.dumps({"v": 99, "job": "ok", "args": {"n": 1}}),
    "unknown job": json.dumps({"v": 1, "job": "nobody", "args": {}}),
    "bad args": json.dumps({"v": 1, "job": "ok", "args": {"n": "one"}}),
    "extra arg": json.dumps({"v": 1, "job": "ok", "args": {"n": 1, "m": 2}}),
    "args not an object": json.dumps({"v": 1, "job": "ok", "args": [1]}),
}


@pytest.mark.parametrize("kind", sorted(MALFORMED))
def test_a_malformed_body_fails_alone_and_lands_in_the_dlq(make_app: Any, aws: Any, kind: str) -> None:
    app = make_app()
    ran: list[int] = []

    @app.job("ok")
    def ok(n: int) -> None:
        ran.append(n)

    good = json.loads(ok.message(n=1).body)
    event = sqs_event([MALFORMED[kind], good, MALFORMED[kind]])
    event["Records"][2]["messageId"] = "other"
    result = app.process_batch(event)

    assert [d.outcome for d in result.deliveries] == [Outcome.DEAD_LETTERED, Outcome.SUCCEEDED,
                                                      Outcome.DEAD_LETTERED]
    assert ran == [1]
    dead = messages_in(aws.sqs, aws.dlq_url)
    assert len(dead) == 2
    assert {attr(m, ATTR_REASON) for m in dead} == {"malformed"}
    assert all(attr(m, ATTR_ERROR_MESSAGE) for m in dead)


def test_a_bad_event_raises_a_clear_error(make_app: Any) -> None:
    app = make_app()
    for event in ({}, {"Records": []}, {"Records": [{"body": "x"}]}, [], None):
        with pytest.raises(InvalidEventError):
            app.handle_batch(event)


def test_records_are_not_started_past_the_deadline(make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app(deadline_margin=5)
    ran: list[int] = []

    @app.job("slow", key="slow:{n}")
    def slow(n: int) -> None:
        ran.append(n)
        clock.advance(10)  # each job takes 10 s of the invocation

    context = FakeContext(remaining_ms=27_000, clock=clock)
    bodies = [json.loads(slow.message(n=n).body) for n in range(4)]
    result = app.process_batch(sqs_event(bodies), context)

    # 27 s: runs at 27 and 17 remaining; at 7 s it still starts one; at -3 s it stops.
    assert ran == [0, 1, 2]
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 3 + [Outcome.UNSTARTED]
    unstarted = result.deliveries[3]
    assert result.failures == (unstarted.message_id,)
    assert unstarted.delay == 0 and unstarted.error is None
    record = app.runtime.store.get("slow:3")  # released: its retry can claim at once, and no attempt was used
    assert record.state is LeaseState.RELEASED and record.attempts == 0


def test_fifo_stops_a_group_after_a_failure(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "fifo-jobs", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)
    ran: list[str] = []

    @app.job("sync", key="sync:{account_id}:{step}", group="{account_id}")
    def sync(account_id: str, step: int) -> None:
        ran.append(f"{account_id}{step}")
        if (account_id, step) == ("a", 1):
            raise ConnectionError("boom")

    bodies = [json.loads(sync.message(account_id=a, step=s).body) for a, s in (("a", 1), ("a", 2), ("b", 1), ("a", 3))]
    groups = ["a", "a", "b", "a"]
    event = {"Records": [sqs_event([b], group_id=g)["Records"][0] for b, g in zip(bodies, groups, strict=True)]}
    result = app.process_batch(event)

    assert ran == ["a1", "b1"]
    assert [d.outcome for d in result.deliveries] == [Outcome.RETRY, Outcome.GROUP_BLOCKED, Outcome.SUCCEEDED,
                                                      Outcome.GROUP_BLOCKED]
    assert set(result.failures) == {result.deliveries[i].message_id for i in (0, 1, 3)}
    blocked = app.runtime.store.get("sync:a:2")  # blocked records keep no claim and use no attempt
    assert blocked.state is LeaseState.RELEASED and blocked.attempts == 0


def test_fifo_producer_sets_group_and_dedup_from_the_key(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "fifo-producer", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)

    @app.job("sync", key="sync:{account_id}", group="{account_id}")
    def sync(account_id: str) -> None: ...

    sync.enqueue(account_id="acme")
    sync.enqueue(account_id="acme")  # same key → same dedup id: SQS keeps one
    (message,) = messages_in(aws.sqs, queue_url)
    assert message["Attributes"]["MessageGroupId"] == "acme"
