"""Each job option at work in the worker, against moto: attempts, backoff, retry rules, time limits,
trace ids in logs, and upcasting messages already in flight."""

from __future__ import annotations

import io
import json
import random
import signal
import uuid
from typing import Any

import pytest
from aws_lambda_powertools import Logger
from aws_support import MAX_ATTEMPTS

from sqsjobs import Outcome, PermanentError, RetryableError, TimeLimitExceeded
from sqsjobs._tracing import current_trace_id
from sqsjobs.enqueue._message import ATTR_RESENDS, ATTR_TRACE_ID
from sqsjobs.store._lease import LeaseState
from sqsjobs.testing import given_attempts, messages_in, queue_arn, receive_event, sqs_event
from sqsjobs.worker._dead_letters import ATTR_ATTEMPTS, ATTR_ERROR_MESSAGE, ATTR_ERROR_TYPE, ATTR_REASON
from sqsjobs.worker._decision import MAX_RESENDS
from sqsjobs.worker._time_limit import TIME_LIMIT_REPEAT, TimeLimit


def attr(message: dict[str, Any], name: str) -> str:
    return str(message["MessageAttributes"][name]["StringValue"])


def dead_letters(aws: Any) -> dict[str, dict[str, Any]]:
    """DLQ messages by the ``kind`` argument of their body."""
    return {json.loads(m["Body"])["args"]["kind"]: m for m in messages_in(aws.sqs, aws.dlq_url)}


class TransientError(Exception):
    pass


class CardDeclined(Exception):
    pass


# -- max_attempts -----------------------------------------------------------------------------------------------
def test_a_job_with_fewer_attempts_is_dead_lettered_when_it_reaches_them(make_app: Any, aws: Any) -> None:
    app = make_app()
    assert app.settings.max_attempts == MAX_ATTEMPTS == 3
    runs: list[int] = []

    # backoff 0: each retry is visible again at once, so the test needs no waiting.
    @app.job("fragile", key="fragile:{n}", max_attempts=2, backoff_base=0, backoff_cap=0)
    def fragile(n: int) -> None:
        runs.append(n)
        raise TransientError("upstream 503")

    fragile.enqueue(n=1)
    first = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    second = app.process_batch(receive_event(aws.sqs, aws.queue_url))

    assert [first.deliveries[0].outcome, second.deliveries[0].outcome] == [Outcome.RETRY, Outcome.DEAD_LETTERED]
    assert runs == [1, 1]  # two attempts, not the queue's three
    assert messages_in(aws.sqs, aws.queue_url) == []
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "exhausted"
    assert attr(dead, ATTR_ATTEMPTS) == "2"
    assert attr(dead, ATTR_ERROR_TYPE) == "TransientError"
    assert attr(dead, ATTR_ERROR_MESSAGE) == "upstream 503"


def test_a_delivery_past_the_jobs_attempts_is_dead_lettered_without_running(make_app: Any, aws: Any) -> None:
    # E.g. its last attempt's DLQ send failed, or a deploy lowered max_attempts while it was in flight.
    app = make_app()
    runs: list[int] = []

    @app.job("fragile", key="fragile:{n}", max_attempts=2)
    def fragile(n: int) -> None:
        runs.append(n)

    message = fragile.message(n=1)
    given_attempts(app, message, 2, last_error="TransientError: upstream 503")
    result = app.process_batch(sqs_event([json.loads(message.body)], attempt=3))
    (delivery,) = result.deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and runs == []
    record = app.runtime.store.get("fragile:1")
    assert record.attempts == 2 and record.get("outcome") == "dead_lettered"  # this delivery ran nothing
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "exhausted"
    assert attr(dead, ATTR_ERROR_MESSAGE) == "attempt 2 of 2 failed; last error: TransientError: upstream 503"


# -- backoff ----------------------------------------------------------------------------------------------------
def test_jitter_off_retries_after_exactly_the_bound(make_app: Any, aws: Any) -> None:
    app = make_app(max_attempts=5)

    @app.job("steady", key="steady:{n}", backoff_base=10, backoff_cap=40, jitter=False)
    def steady(n: int) -> None:
        raise TransientError("down")

    messages = [steady.message(n=n) for n in range(1, 5)]
    for n, message in enumerate(messages, start=1):
        given_attempts(app, message, n - 1)  # so that message n runs its n-th attempt
    event = sqs_event([json.loads(m.body) for m in messages])
    result = app.process_batch(event)
    assert [d.outcome for d in result.deliveries] == [Outcome.RETRY] * 4
    assert [d.delay for d in result.deliveries] == [10, 20, 40, 40]  # doubling, then the cap


def test_full_jitter_uses_the_injected_random_and_the_jobs_bounds(make_app: Any, aws: Any) -> None:
    app = make_app(random=random.Random(99))

    @app.job("jittery", key="jittery:{n}", backoff_base=50, backoff_cap=150)
    def jittery(n: int) -> None:
        raise TransientError("down")

    jittery.enqueue(n=1)
    (first,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    expected = random.Random(99).uniform(0, 50)
    assert first.outcome is Outcome.RETRY and first.delay == expected
    given_attempts(app, jittery.message(n=2), 1)
    (second,) = app.process_batch(sqs_event([json.loads(jittery.message(n=2).body)], attempt=2)).deliveries
    replay = random.Random(99)
    replay.uniform(0, 50)
    assert second.delay == replay.uniform(0, 100)  # attempt 2: bound 100, still under the cap


def test_a_retry_really_hides_the_message_for_its_delay(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("steady", key="steady:{n}", backoff_base=30, backoff_cap=30, jitter=False)
    def steady(n: int) -> None:
        raise TransientError("down")

    steady.enqueue(n=1)
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url, visibility_timeout=0)).deliveries
    assert delivery.outcome is Outcome.RETRY and delivery.delay == 30
    assert receive_event(aws.sqs, aws.queue_url)["Records"] == []


# -- retry_on / permanent_on ------------------------------------------------------------------------------------
def test_retry_and_permanent_rules_in_one_batch(make_app: Any, aws: Any) -> None:
    app = make_app()
    raised = {
        "transient": TransientError("timeout talking to the card processor"),
        "declined": CardDeclined("card 4242 declined"),
        "bug": KeyError("amount"),
        "retryable": RetryableError("rate limited", delay=17),
        "permanent": PermanentError("customer deleted"),
    }

    @app.job("charge", key="charge:{kind}", retry_on=(TransientError,), permanent_on=(CardDeclined,))
    def charge(kind: str) -> None:
        if kind in raised:
            raise raised[kind]

    kinds = ["transient", "declined", "bug", "retryable", "permanent", "ok"]
    result = app.process_batch(sqs_event([json.loads(charge.message(kind=k).body) for k in kinds]))
    outcomes = {k: d.outcome for k, d in zip(kinds, result.deliveries, strict=True)}
    assert outcomes == {
        "transient": Outcome.RETRY,  # in retry_on
        "declined": Outcome.DEAD_LETTERED,  # in permanent_on
        "bug": Outcome.DEAD_LETTERED,  # in neither, with retry_on narrowed: not retried (like autoretry_for)
        "retryable": Outcome.RETRY,  # RetryableError is always retried
        "permanent": Outcome.DEAD_LETTERED,  # PermanentError never is
        "ok": Outcome.SUCCEEDED,
    }
    assert result.deliveries[3].delay == 17
    dead = dead_letters(aws)
    assert sorted(dead) == ["bug", "declined", "permanent"]
    assert {attr(m, ATTR_REASON) for m in dead.values()} == {"permanent"}
    assert {k: attr(m, ATTR_ERROR_TYPE) for k, m in dead.items()} == {
        "bug": "KeyError", "declined": "CardDeclined", "permanent": "PermanentError"}
    assert {attr(m, ATTR_ATTEMPTS) for m in dead.values()} == {"1"}  # straight to the DLQ


class SlowDown(Exception):
    """Another library's exception that happens to have a ``delay`` attribute."""

    def delay(self) -> float:
        return 5.0


def test_only_retryable_error_chooses_its_delay(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("client", key="client:{kind}", backoff_base=10, backoff_cap=10, jitter=False)
    def client(kind: str) -> None:
        raise SlowDown() if kind == "foreign" else RetryableError("busy", delay=3)

    result = app.process_batch(sqs_event([json.loads(client.message(kind=k).body) for k in ("foreign", "ours")]))
    assert [(d.outcome, d.delay) for d in result.deliveries] == [(Outcome.RETRY, 10), (Outcome.RETRY, 3)]


def test_by_default_every_exception_is_retried_until_the_last_attempt(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("plain", key="plain:{kind}")
    def plain(kind: str) -> None:
        raise ValueError(kind)

    first = app.process_batch(sqs_event([json.loads(plain.message(kind="a").body)], attempt=1))
    given_attempts(app, plain.message(kind="b"), MAX_ATTEMPTS - 1)
    last = app.process_batch(sqs_event([json.loads(plain.message(kind="b").body)], attempt=MAX_ATTEMPTS))
    assert first.deliveries[0].outcome is Outcome.RETRY
    assert last.deliveries[0].outcome is Outcome.DEAD_LETTERED
    assert attr(dead_letters(aws)["b"], ATTR_REASON) == "exhausted"


# -- time_limit -------------------------------------------------------------------------------------------------
def alarm_now() -> None:
    """What the interval timer does when the limit passes, without waiting for it."""
    signal.raise_signal(signal.SIGALRM)


def test_a_record_past_its_time_limit_is_stopped_and_retried_while_the_batch_goes_on(make_app: Any) -> None:
    app = make_app()
    progress: list[str] = []

    @app.job("export", key="export:{n}", time_limit=30)
    def export(n: int) -> None:
        progress.append(f"start {n}")
        if n == 1:
            alarm_now()
            progress.append("never reached")
        progress.append(f"done {n}")

    previous_handler = signal.getsignal(signal.SIGALRM)
    outer_timer = signal.getitimer(signal.ITIMER_REAL)  # pytest-timeout's, when it runs
    result = app.process_batch(sqs_event([json.loads(export.message(n=n).body) for n in (1, 2)]))

    assert progress == ["start 1", "start 2", "done 2"]
    stopped, other = result.deliveries
    assert stopped.outcome is Outcome.RETRY and isinstance(stopped.error, TimeLimitExceeded)
    assert "ran past its time_limit of 30 s" in str(stopped.error)
    assert other.outcome is Outcome.SUCCEEDED
    assert result.failures == (stopped.message_id,)
    # The alarm is disarmed: whatever timer ran before is back, with the previous handler.
    remaining, interval = signal.getitimer(signal.ITIMER_REAL)
    assert (remaining == 0 and outer_timer[0] == 0) or 0 < remaining <= outer_timer[0]
    assert interval == outer_timer[1]
    assert signal.getsignal(signal.SIGALRM) is previous_handler


def test_the_job_runs_under_its_own_timer_and_handler(make_app: Any) -> None:
    # The real timer stopping a spinning job is tests/unit/test_options_time_limit.py's one slow test;
    # here: the worker arms it with the job's limit, for the job's call only.
    app = make_app()
    seen: list[Any] = []

    @app.job("armed", key="armed:{n}", time_limit=45)
    def armed(n: int) -> None:
        seen.append((signal.getitimer(signal.ITIMER_REAL), getattr(signal.getsignal(signal.SIGALRM), "__self__", None)))

    handler = signal.getsignal(signal.SIGALRM)
    (delivery,) = app.process_batch(sqs_event([json.loads(armed.message(n=1).body)])).deliveries
    (((remaining, interval), limit),) = seen
    assert delivery.outcome is Outcome.SUCCEEDED
    assert 0 < remaining <= 45 and interval == TIME_LIMIT_REPEAT
    assert isinstance(limit, TimeLimit) and limit.seconds == 45 and limit.job == "armed"
    assert signal.getsignal(signal.SIGALRM) is handler


def test_swallowing_the_time_limit_does_not_make_the_job_succeed(make_app: Any) -> None:
    app = make_app()

    @app.job("sly", key="sly:{n}", time_limit=30)
    def sly(n: int) -> None:
        try:
            alarm_now()
        except Exception:  # a broad except in job code catches TimeLimitExceeded too
            return

    (delivery,) = app.process_batch(sqs_event([json.loads(sly.message(n=1).body)])).deliveries
    assert delivery.outcome is Outcome.RETRY and isinstance(delivery.error, TimeLimitExceeded)


def test_a_job_that_swallows_the_limit_and_carries_on_is_interrupted_again(make_app: Any) -> None:
    app = make_app()
    caught: list[str] = []

    @app.job("stubborn", key="stubborn:{n}", time_limit=30)
    def stubborn(n: int) -> None:
        try:
            alarm_now()
        except TimeLimitExceeded:
            caught.append("first")
        alarm_now()  # carries on regardless; the repeated alarm ends it
        caught.append("never reached")

    (delivery,) = app.process_batch(sqs_event([json.loads(stubborn.message(n=1).body)])).deliveries
    assert caught == ["first"]
    assert delivery.outcome is Outcome.RETRY and isinstance(delivery.error, TimeLimitExceeded)


def test_a_limit_turned_into_another_error_still_counts_as_retryable(make_app: Any) -> None:
    app = make_app()

    # retry_on=() would dead-letter a ValueError; the time limit decides instead.
    @app.job("wrapper", key="wrapper:{n}", time_limit=30, retry_on=())
    def wrapper(n: int) -> None:
        try:
            alarm_now()
        except TimeLimitExceeded as error:
            raise ValueError("export aborted") from error

    (delivery,) = app.process_batch(sqs_event([json.loads(wrapper.message(n=1).body)])).deliveries
    assert delivery.outcome is Outcome.RETRY and isinstance(delivery.error, TimeLimitExceeded)
    assert "then raised ValueError: export aborted" in str(delivery.error)


def test_a_time_limit_on_the_last_attempt_dead_letters_as_exhausted(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("export", key="export:{kind}", time_limit=30)
    def export(kind: str) -> None:
        alarm_now()

    given_attempts(app, export.message(kind="late"), MAX_ATTEMPTS - 1)
    app.process_batch(sqs_event([json.loads(export.message(kind="late").body)], attempt=MAX_ATTEMPTS))
    dead = dead_letters(aws)["late"]
    assert attr(dead, ATTR_REASON) == "exhausted" and attr(dead, ATTR_ERROR_TYPE) == "TimeLimitExceeded"


# -- trace ids --------------------------------------------------------------------------------------------------
def json_logger() -> tuple[Logger, io.StringIO]:
    stream = io.StringIO()
    # A unique service name: Powertools loggers are shared by name across the process.
    return Logger(service=f"trace-{uuid.uuid4().hex[:8]}", stream=stream), stream


def log_lines(stream: io.StringIO, message: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    return [line for line in lines if line.get("message") == message]


def test_the_trace_id_goes_from_producer_to_job_logs_and_on_to_the_jobs_it_enqueues(make_app: Any, aws: Any) -> None:
    logger, stream = json_logger()
    app = make_app(logger=logger)
    seen: list[str | None] = []

    @app.job("receipt", key="receipt:{order_id}")
    def receipt(order_id: int) -> None:
        seen.append(current_trace_id())
        app.runtime.logger.info("receipt sent")

    @app.job("checkout", key="checkout:{order_id}")
    def checkout(order_id: int) -> None:
        seen.append(current_trace_id())
        app.runtime.logger.info("order charged")
        receipt.enqueue(order_id=order_id)

    checkout.enqueue(order_id=9, trace_id="req-123")
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    (child_message,) = messages_in(aws.sqs, aws.queue_url)
    assert attr(child_message, ATTR_TRACE_ID) == "req-123"
    app.process_batch(receive_event(aws.sqs, aws.queue_url))

    assert seen == ["req-123", "req-123"]
    (parent_line,) = log_lines(stream, "order charged")
    (child_line,) = log_lines(stream, "receipt sent")
    assert (parent_line["trace_id"], parent_line["job"], parent_line["key"]) == ("req-123", "checkout", "checkout:9")
    assert (child_line["trace_id"], child_line["job"], child_line["key"]) == ("req-123", "receipt", "receipt:9")
    assert current_trace_id() is None  # nothing leaks out of the batch


def test_a_message_without_a_trace_id_starts_one_named_by_its_message_id(make_app: Any, aws: Any) -> None:
    logger, stream = json_logger()
    app = make_app(logger=logger)

    @app.job("child", key="child:{n}")
    def child(n: int) -> None: ...

    @app.job("root", key="root:{n}")
    def root(n: int) -> None:
        app.runtime.logger.info("root ran")
        child.enqueue(n=n)

    message_id = root.enqueue(n=1)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    (line,) = log_lines(stream, "root ran")
    assert line["trace_id"] == message_id
    (child_message,) = messages_in(aws.sqs, aws.queue_url)
    assert attr(child_message, ATTR_TRACE_ID) == message_id


def test_trace_ids_do_not_leak_between_records_of_a_batch(make_app: Any) -> None:
    logger, stream = json_logger()
    app = make_app(logger=logger)

    @app.job("step", key="step:{n}")
    def step(n: int) -> None:
        app.runtime.logger.info("step ran", extra={"n": n})

    records = [sqs_event([json.loads(step.message(n=n).body)], attributes={ATTR_TRACE_ID: f"t-{n}"})["Records"][0]
               for n in (1, 2)]
    app.process_batch({"Records": records})
    assert [(line["n"], line["trace_id"]) for line in log_lines(stream, "step ran")] == [(1, "t-1"), (2, "t-2")]


# -- versions and upcasting -------------------------------------------------------------------------------------
def test_a_v1_message_in_flight_is_consumed_by_the_v2_job(make_app: Any, aws: Any) -> None:
    before = make_app()

    @before.job("greet", key="greet:{user_id}")
    def greet_v1(user_id: int) -> None: ...

    greet_v1.enqueue(user_id=7)  # sent by the old deploy, still on the queue
    assert json.loads(messages_in(aws.sqs, aws.queue_url)[0]["Body"])["job_version"] == 1

    after = make_app()
    calls: list[tuple[int, bool]] = []

    @after.job("greet", key="greet:{user_id}", version=2)
    def greet(user_id: int, loud: bool) -> None:
        calls.append((user_id, loud))

    @greet.upcaster(from_version=1)
    def add_loud(args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "loud": False}

    greet.enqueue(user_id=8, loud=True)  # sent by the new deploy
    result = after.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    assert sorted(calls) == [(7, False), (8, True)]
    assert after.runtime.store.get("greet:7").state is LeaseState.DONE


def test_upcasters_chain_across_versions(make_app: Any) -> None:
    app = make_app()
    calls: list[dict[str, Any]] = []

    @app.job("greet", key="greet:{account_id}", version=3)
    def greet(account_id: int, loud: bool) -> None:
        calls.append({"account_id": account_id, "loud": loud})

    @greet.upcaster(from_version=1)
    def v1_to_v2(args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "loud": False}

    @greet.upcaster(from_version=2)
    def v2_to_v3(args: dict[str, Any]) -> dict[str, Any]:
        args = dict(args)
        return {"account_id": args.pop("user_id"), **args}

    v1 = {"v": 1, "job": "greet", "job_version": 1, "key": "greet:1", "args": {"user_id": 1}}
    v2 = {"v": 1, "job": "greet", "job_version": 2, "key": "greet:2", "args": {"user_id": 2, "loud": True}}
    result = app.process_batch(sqs_event([v1, v2]))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    assert calls == [{"account_id": 1, "loud": False}, {"account_id": 2, "loud": True}]


def test_a_message_newer_than_the_worker_waits_for_the_deploy(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None: ...

    newer = {"v": 1, "job": "greet", "job_version": 2, "args": {"user_id": 1, "loud": True}}
    (delivery,) = app.process_batch(sqs_event([newer])).deliveries
    assert delivery.outcome is Outcome.RETRY  # not the DLQ: the new code is on its way
    assert 0 < delivery.delay <= 30  # after the job's backoff, not at once (which would burn every attempt)
    assert messages_in(aws.sqs, aws.dlq_url) == []
    # It never ran, so no attempt was used: at the queue's last receive it is re-sent, not left to SQS's redrive...
    arn = queue_arn(aws.sqs, aws.queue_url)
    app = make_app(backoff_base=0, backoff_cap=0)  # (so the copy is visible at once)
    app.job("greet", key="greet:{user_id}")(greet.fn)
    (resent,) = app.process_batch(sqs_event([newer], attempt=MAX_ATTEMPTS + 1, event_source_arn=arn)).deliveries
    assert resent.outcome is Outcome.RETRY and resent.acknowledged
    (copy,) = messages_in(aws.sqs, aws.queue_url)
    assert copy["MessageAttributes"][ATTR_RESENDS]["StringValue"] == "1"
    # ...and if the deploy never comes, it is dead-lettered with the reason after MAX_RESENDS re-sends.
    given_up = sqs_event([newer], attempt=MAX_ATTEMPTS + 1, attributes={ATTR_RESENDS: str(MAX_RESENDS)},
                         event_source_arn=arn)
    (last,) = app.process_batch(given_up).deliveries
    assert last.outcome is Outcome.DEAD_LETTERED
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "exhausted" and "job_version 2" in attr(dead, ATTR_ERROR_MESSAGE)


@pytest.mark.parametrize(
    ("register", "reason"),
    [("none", "has no upcaster from version 1 to 2"), ("raises", "KeyError while decoding"),
     ("bad args", "missing argument 'loud'")],
)
def test_an_upcast_that_cannot_work_dead_letters_as_malformed(make_app: Any, aws: Any, register: str,
                                                              reason: str) -> None:
    app = make_app()

    @app.job("greet", key="greet:{user_id}", version=2)
    def greet(user_id: int, loud: bool) -> None: ...

    if register == "raises":
        greet.upcaster(from_version=1)(lambda args: {**args, "loud": args["missing"]})
    elif register == "bad args":
        greet.upcaster(from_version=1)(lambda args: args)

    v1 = {"v": 1, "job": "greet", "job_version": 1, "args": {"user_id": 1}}
    (delivery,) = app.process_batch(sqs_event([v1])).deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert attr(dead, ATTR_REASON) == "malformed" and reason in attr(dead, ATTR_ERROR_MESSAGE)
