"""Flow control in the worker (moto, an injected clock): rate tokens, concurrency slots, deferrals that use no
attempt and never reach the DLQ, the one extra round trip, FIFO order and tenants (docs/flow-control.md)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_support import MAX_ATTEMPTS, CallRecorder, create_queues

from sqsjobs import JobApp, Outcome
from sqsjobs import _metrics as m
from sqsjobs.enqueue._message import ATTR_RESENDS
from sqsjobs.flow._permits import LIMIT_TTL_SECONDS, SLOT_PROBES
from sqsjobs.store._lease import LeaseState
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.testing import messages_in, receive_event, sqs_event, sqs_record


def body(job: Any, **args: Any) -> dict[str, Any]:
    return json.loads(job.message(**args).body)


def emf(lines: list[str], metric: str) -> list[dict[str, Any]]:
    """The EMF documents of ``lines`` that carry ``metric``."""
    return [doc for doc in map(json.loads, lines) if metric in doc]


@pytest.fixture
def lines() -> list[str]:
    return []


@pytest.fixture
def ses_app(make_app: Any, lines: list[str]) -> tuple[JobApp, list[int]]:
    app = make_app(emit_metrics=lines.append)
    app.rate_limit("ses", rate=3)
    ran: list[int] = []

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int) -> None:
        ran.append(n)

    return app, ran


# ---------------------------------------------------------------- rate
def test_a_rate_limit_runs_what_its_tokens_allow_and_defers_the_rest_untouched(
        ses_app: tuple[JobApp, list[int]], lines: list[str]) -> None:
    app, ran = ses_app
    result = app.process_batch(sqs_event([body(app.jobs["email"], n=i) for i in range(10)]))

    assert ran == [0, 1, 2]
    deferred = [d for d in result.deliveries if d.outcome is Outcome.DEFERRED]
    assert len(deferred) == 7 and all(d.deferred_by == "ses" for d in deferred)
    # Back at the next window plus jitter, in whole seconds (SQS has no fractions), never at once: the tokens
    # free 1.22 s after the take (a window plus what a fresh process allows for its jobs to start), and the
    # jitter spreads the backlog (7 jobs: 7 / 3 windows) over as many windows as the limiter needs for it.
    assert all(isinstance(d.delay, int) and 2 <= d.delay <= 4 for d in deferred)
    assert len({d.delay for d in deferred}) > 1
    assert set(result.failures) == {d.message_id for d in deferred}
    # A deferred job's record is never written: no attempt used, nothing to clean up.
    assert all(app.status(f"email:{i}") is None for i in range(3, 10))
    assert [app.status(f"email:{i}").attempts for i in range(3)] == [1, 1, 1]
    tokens = [app.runtime.store.get(f"limit#ses#token#{i}") for i in range(3)]
    assert all(t is not None and t.state is LeaseState.HELD for t in tokens)
    (doc,) = emf(lines, m.DEFERRED)
    assert doc[m.DIMENSION_LIMITER] == "ses" and doc[m.DEFERRED] == [7.0]
    assert [m.DIMENSION_JOB, m.DIMENSION_LIMITER, m.DIMENSION_SERVICE] in doc["_aws"]["CloudWatchMetrics"][0][
        "Dimensions"]


def test_a_full_limiter_defers_the_next_batch_without_a_call_until_its_window_ends(
        ses_app: tuple[JobApp, list[int]], aws: Any, clock: Any) -> None:
    app, ran = ses_app
    email = app.jobs["email"]
    app.process_batch(sqs_event([body(email, n=i) for i in range(3)]))
    recorder = CallRecorder(aws.dynamodb)

    again = app.process_batch(sqs_event([body(email, n=i) for i in range(3, 6)]))
    assert [d.outcome for d in again.deliveries] == [Outcome.DEFERRED] * 3
    assert recorder.calls == []  # this container saw every token taken: it knows when the first one frees

    clock.advance(1.5)  # the window (1 s plus the grace) is over
    later = app.process_batch(sqs_event([body(email, n=i) for i in range(3, 6)]))
    assert [d.outcome for d in later.deliveries] == [Outcome.SUCCEEDED] * 3
    assert ran == [0, 1, 2, 3, 4, 5]


def test_a_token_admits_one_start_per_window_across_invocations(make_app: Any, clock: Any) -> None:
    """Two workers (two processors, one table) at the same instant share the limit; no window holds more."""
    starts: list[float] = []
    apps = [make_app() for _ in range(2)]
    for app in apps:
        app.rate_limit("sms", rate=4, per=2.0)

        @app.job("sms", key="sms:{n}", limits=["sms"])
        def sms(n: int) -> None:
            starts.append(clock())

    for n in range(12):  # 2.4 s of batches, every 0.2 s, alternating workers
        app = apps[n % 2]
        app.process_batch(sqs_event([body(app.jobs["sms"], n=n * 10 + i) for i in range(3)]))
        clock.advance(0.2)
    assert len(starts) >= 4
    for first in starts:  # every window of `per` seconds, measured from each start
        assert sum(1 for s in starts if first <= s <= first + 2.0) <= 4


def limiter_memory(app: Any) -> Any:
    """What the worker's limits stage learned of its limiters (flow/_stage.py; built on demand: worker/_stages.py)."""
    from sqsjobs.flow._stage import LimitsStage

    stage = next(s for s in app.runtime.consumer.stages.stages if s.name == "LimitsStage").stage
    assert isinstance(stage, LimitsStage)
    return stage.memory


def test_ten_limited_jobs_cost_one_extra_round_trip_and_a_batch_without_any_costs_none(
        make_app: Any, aws: Any) -> None:
    app = make_app()
    app.rate_limit("ses", rate=10)

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int) -> None: ...

    @app.job("plain", key="plain:{n}")
    def plain(n: int) -> None: ...

    # A warm container whose batches start their jobs 10 ms after the take: its tokens cover that, no more.
    memory = limiter_memory(app)
    memory.lag, memory.lag_deviation = 0.01, 0.005
    # Calls of one wave of ten are held until all ten arrived: they overlap however late their threads run.
    recorder = CallRecorder(aws.dynamodb, wave=10, gated=frozenset({"UpdateItem"}))
    result = app.process_batch(sqs_event([body(email, n=i) for i in range(10)]))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 10
    # 10 token probes (one wave), then the claims and the completions every batch pays (a statement call each).
    assert sorted(c["op"] for c in recorder.calls) == ["BatchExecuteStatement"] * 2 + ["UpdateItem"] * 10
    assert recorder.sequential_round_trips() == 3 and not recorder.broken_waves

    plain_recorder = CallRecorder(aws.dynamodb)
    app.process_batch(sqs_event([body(plain, n=i) for i in range(10)]))
    assert len(plain_recorder.calls) == 2 and plain_recorder.sequential_round_trips() == 2


def test_a_job_starting_after_its_token_covers_waits_and_one_starting_early_gives_time_back(
        make_app: Any, clock: Any) -> None:
    app = make_app(sleep=clock.advance)
    app.rate_limit("ses", rate=10, per=1.0)
    ran: list[int] = []

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int, work: float = 0.0) -> None:
        ran.append(n)
        clock.advance(work)

    memory = limiter_memory(app)
    taken = clock()
    result = app.process_batch(sqs_event([body(email, n=0, work=0.3), body(email, n=1)]))
    # A fresh process allows 0.22 s after the take for its jobs to start: n=1, 0.3 s later, is past what its
    # token covers, so it waits for another window (its claim gave its attempt back).
    assert ran == [0] and (result.deliveries[1].outcome, result.deliveries[1].deferred_by) == (Outcome.DEFERRED, "ses")
    record = app.runtime.store.get("email:1")
    assert record is not None and record.state is LeaseState.RELEASED and record.attempts == 0
    tokens = sorted((t for t in (app.runtime.store.get(f"limit#ses#token#{i}") for i in range(10)) if t is not None),
                    key=lambda t: t.lease_until or 0.0)
    # n=1's token went back as it was (no previous start: free at once); n=0's is held a window after its start
    # (it started 0.22 s earlier than its token allowed for: shortened).
    assert [t.lease_until for t in tokens] == [taken + 0.3, taken + 1.0]
    # It learned the pace: the next batch's tokens cover a second job that starts 0.3 s after the first.
    assert memory.step == pytest.approx(0.3 * 0.3)
    assert memory.cover(1) > memory.cover(0) + 0.09


def test_a_token_taken_before_its_window_ends_waits_for_it_briefly_or_not_at_all(make_app: Any, clock: Any) -> None:
    app = make_app(sleep=clock.advance)
    app.rate_limit("ses", rate=1, per=1.0)
    starts: list[float] = []

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int) -> None:
        starts.append(clock())

    memory = limiter_memory(app)
    app.process_batch(sqs_event([body(email, n=0)]))
    # Batches of this container start their jobs about 0.5 s after the take: it takes a token that much before
    # the previous window ends, and does its claims meanwhile.
    memory.lag, memory.lag_deviation = 0.5, 0.0
    clock.now = starts[0] + 0.85  # the window of the first start ends in 0.15 s
    app.process_batch(sqs_event([body(email, n=1)]))
    assert starts[1] == starts[0] + 1.0  # it waited the last 0.15 s, and started exactly a window later
    token = app.runtime.store.get("limit#ses#token#0")
    assert token is not None and token.lease_until == starts[1] + 1.0

    clock.now = starts[1] + 0.6  # 0.4 s before the window ends: longer than a job may wait
    late = app.process_batch(sqs_event([body(email, n=2)]))
    assert late.deliveries[0].outcome is Outcome.DEFERRED and len(starts) == 2
    token = app.runtime.store.get("limit#ses#token#0")
    assert token is not None and token.lease_until == starts[1] + 1.0  # given back with the window it had


# ---------------------------------------------------------------- concurrency
def test_a_concurrency_slot_is_held_by_the_invocation_and_freed_when_its_jobs_are_done(
        make_app: Any, clock: Any) -> None:
    first, second = make_app(), make_app()
    inside: list[Any] = []
    for app in (first, second):
        app.concurrency_limit("pdf", 1)

    @first.job("render", key="render:{n}", limits=["pdf"])
    def render(n: int) -> None:
        # While this invocation renders, another one is refused the only slot.
        inside.append(second.process_batch(sqs_event([body(second.jobs["render"], n=100)])))

    @second.job("render", key="render:{n}", limits=["pdf"])
    def render_elsewhere(n: int) -> None: ...

    result = first.process_batch(sqs_event([body(render, n=1), body(render, n=2)]))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 2
    refused = [d for batch in inside for d in batch.deliveries]
    assert [(d.outcome, d.deferred_by) for d in refused] == [(Outcome.DEFERRED, "pdf")] * 2
    slot = first.runtime.store.get("limit#pdf#slot#0")
    assert slot is not None and slot.state is LeaseState.RELEASED  # given back when the batch's last render ended
    again = second.process_batch(sqs_event([body(second.jobs["render"], n=100)]))
    assert again.deliveries[0].outcome is Outcome.SUCCEEDED


def test_a_batch_takes_one_slot_whatever_its_size(make_app: Any, aws: Any) -> None:
    app = make_app()
    app.concurrency_limit("pdf", 5)

    @app.job("render", key="render:{n}", limits=["pdf"])
    def render(n: int) -> None: ...

    recorder = CallRecorder(aws.dynamodb)
    result = app.process_batch(sqs_event([body(render, n=i) for i in range(10)]))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 10
    # probes + releases of the extras + the kept slot's release, beside the claims' and the completions' calls
    assert len(recorder.calls) == 2 + SLOT_PROBES + SLOT_PROBES
    slots = [app.runtime.store.get(f"limit#pdf#slot#{i}") for i in range(5)]
    assert sum(1 for s in slots if s is not None) == SLOT_PROBES  # probed 3, kept 1, gave 2 back at once
    assert all(s is None or s.state is LeaseState.RELEASED for s in slots)


def test_a_job_over_one_of_its_limiters_gives_the_others_back(make_app: Any, clock: Any) -> None:
    app = make_app()
    app.rate_limit("ses", rate=5)
    app.concurrency_limit("pdf", 1)

    @app.job("invoice", key="invoice:{n}", limits=["ses", "pdf"])
    def invoice(n: int) -> None: ...

    busy = Acquire(key="limit#pdf#slot#0", owner="another-invocation", now=clock(), lease_until=clock() + 60,
                   expires_at=clock() + LIMIT_TTL_SECONDS)
    assert app.runtime.store.write(busy).ok
    result = app.process_batch(sqs_event([body(invoice, n=1)]))
    assert (result.deliveries[0].outcome, result.deliveries[0].deferred_by) == (Outcome.DEFERRED, "pdf")
    tokens = [t for t in (app.runtime.store.get(f"limit#ses#token#{i}") for i in range(5)) if t is not None]
    # The token went back as it was: its lease ends now (no earlier start to keep apart from).
    assert len(tokens) == 1 and tokens[0].lease_until == clock()


# ---------------------------------------------------------------- deferrals and SQS
def test_a_deferral_at_the_backstop_receive_is_resent_with_its_delay_and_never_dead_lettered(
        ses_app: tuple[JobApp, list[int]], aws: Any) -> None:
    app, ran = ses_app
    email = app.jobs["email"]
    for i in range(4):
        email.enqueue(n=i)
    event = receive_event(aws.sqs, aws.queue_url)
    for record in event["Records"]:  # received as often as SQS allows but once: the next receive would redrive it
        record["attributes"]["ApproximateReceiveCount"] = str(MAX_ATTEMPTS + 1)
    result = app.process_batch(event)

    (deferred,) = [d for d in result.deliveries if d.outcome is Outcome.DEFERRED]
    assert len(ran) == 3
    assert result.failures == ()  # acknowledged: a fresh copy was sent instead of letting SQS redrive it
    attributes = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["All"])["Attributes"]
    assert int(attributes["ApproximateNumberOfMessagesDelayed"]) == 1  # the copy waits its delay (DelaySeconds)
    assert messages_in(aws.sqs, aws.dlq_url) == []
    assert app.status(deferred.key) is None  # and it never used an attempt


def test_a_deferred_copy_keeps_its_tenant_and_is_not_counted_as_a_resend(make_app: Any, aws: Any) -> None:
    app = make_app()
    app.rate_limit("ses", rate=1)

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int) -> None: ...

    email.enqueue(n=1, tenant="acme")
    email.enqueue(n=2, tenant="acme")
    event = receive_event(aws.sqs, aws.queue_url, visibility_timeout=0)
    for record in event["Records"]:
        record["attributes"]["ApproximateReceiveCount"] = str(MAX_ATTEMPTS + 1)
        record["messageAttributes"][ATTR_RESENDS] = {"dataType": "Number", "stringValue": "9"}
    sent: list[dict[str, Any]] = []
    aws.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch",
                                 lambda params, **kwargs: sent.extend(params["Entries"]))
    result = app.process_batch(event)
    (deferred,) = [d for d in result.deliveries if d.outcome is Outcome.DEFERRED]
    (entry,) = sent
    assert entry["MessageGroupId"] == "acme" and entry["DelaySeconds"] == deferred.delay >= 1
    # Nine re-sends for other reasons stay nine: waiting for a limiter is never counted toward MAX_RESENDS.
    assert entry["MessageAttributes"][ATTR_RESENDS]["StringValue"] == "9"


def test_a_deferred_fifo_record_holds_back_the_rest_of_its_group(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "fifo-limited", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)
    app.rate_limit("ses", rate=1)
    ran: list[str] = []

    @app.job("step", key="step:{account}:{n}", group="{account}")
    def step(account: str, n: int) -> None:
        ran.append(f"{account}{n}")

    @app.job("mail", key="mail:{account}:{n}", group="{account}", limits=["ses"])
    def mail(account: str, n: int) -> None:
        ran.append(f"mail-{account}{n}")

    bodies = [body(mail, account="a", n=1), body(mail, account="a", n=2), body(step, account="a", n=3),
              body(step, account="b", n=1)]
    event = {"Records": [sqs_record(b, group_id=g) for b, g in zip(bodies, ["a", "a", "a", "b"], strict=True)]}
    result = app.process_batch(event)
    assert ran == ["mail-a1", "b1"]
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED, Outcome.DEFERRED, Outcome.GROUP_BLOCKED,
                                                      Outcome.SUCCEEDED]


# ---------------------------------------------------------------- tenants
def test_a_tenant_is_a_standard_queues_group_id_and_a_metric_dimension(make_app: Any, aws: Any,
                                                                         lines: list[str]) -> None:
    app = make_app(emit_metrics=lines.append)
    ran: list[int] = []

    @app.job("sync", key="sync:{n}", tenant_metrics=True)
    def sync(n: int) -> None:
        ran.append(n)
        if n == 1:
            raise ConnectionError("partner down")

    sync.enqueue(n=1, tenant="acme")
    sync.enqueue(n=2, tenant="acme")
    event = receive_event(aws.sqs, aws.queue_url)
    assert {r["attributes"]["MessageGroupId"] for r in event["Records"]} == {"acme"}
    result = app.process_batch(event)
    # A standard queue keeps no order per group: acme's failure holds nothing of acme's back.
    assert sorted(ran) == [1, 2] and Outcome.GROUP_BLOCKED not in [d.outcome for d in result.deliveries]
    assert {d.tenant for d in result.deliveries} == {"acme"}
    docs = emf(lines, m.SUCCEEDED) + emf(lines, m.RETRIED)
    assert docs and all(doc[m.DIMENSION_TENANT] == "acme" for doc in docs)
    assert all([m.DIMENSION_JOB, m.DIMENSION_TENANT, m.DIMENSION_SERVICE] in doc["_aws"]["CloudWatchMetrics"][0][
        "Dimensions"] for doc in docs)


def test_jobs_without_tenant_metrics_keep_their_dimensions(make_app: Any, aws: Any, lines: list[str]) -> None:
    app = make_app(emit_metrics=lines.append)

    @app.job("sync", key="sync:{n}")
    def sync(n: int) -> None: ...

    sync.enqueue(n=1, tenant="acme")
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    (doc,) = emf(lines, m.SUCCEEDED)
    assert m.DIMENSION_TENANT not in doc
