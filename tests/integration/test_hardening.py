"""The worker-side findings of the hardening review, each pinned against moto (docs/reliability.md)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from aws_support import MAX_ATTEMPTS

from sqsjobs import InvalidArgumentsError, Outcome, PermanentError
from sqsjobs.store._lease import LeaseState
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.testing import given_attempts, messages_in, queue_arn, receive_event, sqs_event
from sqsjobs.worker._dead_letters import ATTR_REASON, ATTR_REDRIVE_COUNT, ATTR_SOURCE_QUEUE
from sqsjobs.worker._record_writes import FLUSH_AFTER


def attr(message: dict[str, Any], name: str) -> str | None:
    value = message.get("MessageAttributes", {}).get(name)
    return None if value is None else str(value["StringValue"])


# -- 1. large permanent failures reach the DLQ: its batches are cut by bytes as well as by count ------------------
def test_five_large_permanent_failures_in_one_batch_all_reach_the_dlq_with_reasons(make_app: Any, aws: Any) -> None:
    app = make_app()
    runs: list[int] = []

    @app.job("import", key="import:{n}")
    def import_rows(n: int, rows: list[str]) -> None:
        runs.append(n)
        raise PermanentError("rows rejected")

    for n in range(5):
        import_rows.enqueue(n=n, rows=["x" * 220] * 1000)  # ~220 KB each: five cannot share one 256 KiB request
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert [d.outcome for d in result.deliveries] == [Outcome.DEAD_LETTERED] * 5
    assert sorted(runs) == [0, 1, 2, 3, 4]  # each ran once, none is retried
    dead = messages_in(aws.sqs, aws.dlq_url)
    assert len(dead) == 5 and {attr(m, ATTR_REASON) for m in dead} == {"permanent"}


# -- 3. a key belongs to one job and one set of arguments; reserved keys are never claimed ------------------------
def test_two_jobs_sharing_a_key_do_not_swallow_each_other(make_app: Any, aws: Any) -> None:
    app = make_app()
    ran: list[str] = []

    @app.job("welcome-email", key="user:{user_id}")
    def welcome(user_id: int) -> None:
        ran.append("welcome")

    @app.job("provision-account", key="user:{user_id}")
    def provision(user_id: int) -> None:
        ran.append("provision")

    welcome.enqueue(user_id=7)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    provision.enqueue(user_id=7)
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    # Not acknowledged as a duplicate of the other job: dead-lettered, so somebody sees it.
    assert delivery.outcome is Outcome.DEAD_LETTERED and ran == ["welcome"]
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "key_conflict"
    assert "belongs to job 'welcome-email'" in (attr(dead, "sqsjobs.error_message") or "")


def test_reserved_keys_can_never_be_claimed_from_a_message_or_an_enqueue(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("report", key="{name}")
    def report(name: str) -> None: ...

    with pytest.raises(InvalidArgumentsError, match="reserved prefix"):
        report.enqueue(name="lock#nightly-report:2026-01-02")
    forged = {"v": 1, "job": "report", "key": "lock#nightly-report:2026-01-02", "args": {"name": "x"}}
    (delivery,) = app.process_batch(sqs_event([forged])).deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and delivery.reason == "malformed"
    assert app.runtime.store.get("lock#nightly-report:2026-01-02") is None


# -- 5. producer-set sqsjobs.* attributes never survive into a dead letter ----------------------------------------
def test_a_dead_letter_carries_only_the_workers_own_sqsjobs_attributes(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("gone")
    def gone(n: int) -> None:
        raise PermanentError("gone")

    body = json.loads(gone.message(n=1).body)
    forged = {ATTR_SOURCE_QUEUE: "https://sqs.us-east-1.amazonaws.com/123456789012/attacker",
              ATTR_REASON: "exhausted", "sqsjobs.whatever": "x", ATTR_REDRIVE_COUNT: "-1000000", "tenant": "acme"}
    app.process_batch(sqs_event([body], attributes=forged, event_source_arn=queue_arn(aws.sqs, aws.queue_url)))
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_SOURCE_QUEUE) == aws.queue_url and attr(dead, ATTR_REASON) == "permanent"
    assert attr(dead, "sqsjobs.whatever") is None
    assert attr(dead, ATTR_REDRIVE_COUNT) is None  # a forged count is dropped, never carried
    assert attr(dead, "tenant") == "acme"  # the producer's own attributes stay


# -- 8. no argument value in a key, a log line or a DLQ attribute unless the key template names it ------------------
def test_the_default_key_is_a_hash_so_secrets_stay_out_of_logs(make_app: Any, aws: Any) -> None:
    stream = io.StringIO()
    app = make_app(logger=Logger(service="secrets-test", stream=stream))

    @app.job("reset-password")
    def reset(user_id: int, token: str) -> None:
        raise ConnectionError("mail server down")

    reset.enqueue(user_id=7, token="tok_SECRET_123")
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    assert delivery.outcome is Outcome.RETRY
    assert "tok_SECRET_123" not in delivery.key and "tok_SECRET_123" not in stream.getvalue()
    assert "job failed" in stream.getvalue()


# -- 9. empty key fields are refused at enqueue ----------------------------------------------------------------------
@pytest.mark.parametrize("value", ["", None])
def test_an_empty_key_field_is_refused_before_anything_is_sent(make_app: Any, aws: Any, value: Any) -> None:
    app = make_app()

    @app.job("fetch", key="fetch:{ref}")
    def fetch(ref: str | None) -> None: ...

    with pytest.raises(InvalidArgumentsError, match="needs a value for 'ref'"):
        fetch.enqueue(ref=value)
    assert messages_in(aws.sqs, aws.queue_url) == []


# -- 10. an acknowledgement lost after the DLQ send runs nothing twice and writes no second letter --------------
def test_a_redelivery_of_a_dead_lettered_message_is_acknowledged_without_running(make_app: Any, aws: Any) -> None:
    app = make_app()
    runs: list[int] = []

    @app.job("charge", key="charge:{n}")
    def charge(n: int) -> None:
        runs.append(n)
        raise PermanentError("card declined")

    charge.enqueue(n=1)
    event = receive_event(aws.sqs, aws.queue_url, visibility_timeout=0)
    app.process_batch(event)  # dead-lettered; then Lambda's delete of the message is lost
    again = app.process_batch(event)  # the same message comes back
    assert [d.outcome for d in again.deliveries] == [Outcome.DUPLICATE] and runs == [1]
    assert len(messages_in(aws.sqs, aws.dlq_url)) == 1
    assert "already in the DLQ" in again.deliveries[0].notes[0]


# -- a reason on every dead letter: the last attempt that never reported is dead-lettered as lost ----------------
def test_a_last_attempt_that_died_is_dead_lettered_as_lost_with_its_last_error(make_app: Any, aws: Any,
                                                                               clock: Any) -> None:
    app = make_app()
    runs: list[int] = []

    @app.job("export", key="export:{n}")
    def export(n: int) -> None:
        runs.append(n)

    message = export.message(n=1)
    given_attempts(app, message, MAX_ATTEMPTS - 1, last_error="TimeoutError: warehouse slow")
    # The last attempt claims the key, then the invocation dies (a timeout, out of memory): no word.
    app.runtime.store.write(Acquire(key=message.key, owner="died", now=clock(), lease_until=clock() + 60,
                            expires_at=clock() + 9999, count_attempt=True))
    clock.advance(61)
    arn = queue_arn(aws.sqs, aws.queue_url)
    (delivery,) = app.process_batch(sqs_event([json.loads(message.body)], attempt=MAX_ATTEMPTS + 1,
                                              event_source_arn=arn)).deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and runs == []
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "lost"
    assert "never reported" in (attr(dead, "sqsjobs.error_message") or "")
    assert "TimeoutError: warehouse slow" in (attr(dead, "sqsjobs.error_message") or "")
    assert app.status(message.key).state == "dead_lettered"


# -- the crash window is one job: each completion is written as soon as its job returns -------------------------
class Killed(BaseException):
    """The invocation dies (SIGKILL, timeout): nothing after it runs."""


def test_a_crash_mid_batch_leaves_the_jobs_before_it_completed(make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app()

    @app.job("step", key="step:{n}")
    def step(n: int) -> None:
        clock.advance(FLUSH_AFTER)  # a job that takes its time: the records before it are written meanwhile
        if n == 3:
            raise Killed()

    event = sqs_event([json.loads(step.message(n=n).body) for n in range(5)])
    with pytest.raises(Killed):
        app.process_batch(event)
    app.runtime.store.close()  # wait for the writes already started (they were on the wire when the process died)
    states = [app.runtime.store.get(f"step:{n}").state for n in range(5)]
    assert states[:3] == [LeaseState.DONE] * 3  # only job 3 (and those never started) will run again
    assert states[3:] == [LeaseState.HELD] * 2


def test_a_crash_after_quick_jobs_leaves_them_held_until_their_lease_ends(make_app: Any, aws: Any,
                                                                         clock: Any) -> None:
    app = make_app()
    ran: list[int] = []

    @app.job("step", key="step:{n}")
    def step(n: int) -> None:
        ran.append(n)
        if n == 3:
            raise Killed()

    event = sqs_event([json.loads(step.message(n=n).body) for n in range(5)])
    with pytest.raises(Killed):
        app.process_batch(event)
    app.runtime.store.close()
    # Quick jobs' records wait to go together (worker/_record_writes.py): the crash came first, so jobs 0-2
    # are not recorded, but their keys stay held: a redelivery before the lease ends runs nothing.
    assert [app.runtime.store.get(f"step:{n}").state for n in range(5)] == [LeaseState.HELD] * 5
    again = app.process_batch(sqs_event([json.loads(step.message(n=n).body) for n in range(3)], attempt=2))
    assert [d.outcome for d in again.deliveries] == [Outcome.UNSTARTED] * 3 and ran == [0, 1, 2, 3]
