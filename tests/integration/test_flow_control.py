"""Flow control in the worker (moto, an injected clock): rate slots reserved in one write and each job deferred at
most once, to its slot; concurrency slots; deferrals that use no attempt and never reach the DLQ, the one extra
write, FIFO order and tenants (docs/flow-control.md)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from aws_support import MAX_ATTEMPTS, CallRecorder, create_queues

from sqsjobs import JobApp, Outcome
from sqsjobs import _metrics as m
from sqsjobs.enqueue._message import ATTR_RESENDS, ATTR_SLOTS
from sqsjobs.flow import _schedule as schedule
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
def sent_copies(aws: Any) -> list[dict[str, Any]]:
    """Every SendMessageBatch entry the worker sends from now on (its deferred copies among them)."""
    sent: list[dict[str, Any]] = []
    aws.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch",
                                 lambda params, **kwargs: sent.extend(params["Entries"]))
    return sent


def copy_record(entry: dict[str, Any], arn: str | None = None) -> dict[str, Any]:
    """The record Lambda would deliver for a copy the worker sent (its body and attributes) to queue ``arn``."""
    record = sqs_record(json.loads(entry["MessageBody"]), event_source_arn=arn)
    record["messageAttributes"] = {name: {"dataType": a["DataType"], "stringValue": a["StringValue"]}
                                   for name, a in entry["MessageAttributes"].items()}
    return record


def test_a_batch_reserves_its_slots_in_one_write_runs_the_near_ones_and_defers_the_rest_once_to_their_slots(
        make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app(sleep=clock.advance)
    app.rate_limit("ses", rate=3)
    starts: dict[int, float] = {}

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int) -> None:
        starts[n] = clock()

    step = schedule.interval(app.runtime.registry.limiters["ses"])  # (1 s + 50 ms) / 3
    began = clock()
    for i in range(10):
        email.enqueue(n=i)
    event = receive_event(aws.sqs, aws.queue_url)
    copies = sent_copies(aws)
    recorder = CallRecorder(aws.dynamodb)
    result = app.process_batch(event)

    # One conditional write reserved ten slots, 0.35 s apart; the six within the batch's 2 s ran, each at its slot.
    assert [c["op"] for c in recorder.calls].count("UpdateItem") == 1
    assert sorted(starts) == list(range(6))
    # The first slot is the batch's lead after the write (its claims come between: 0.15 s for a fresh container).
    first = starts[0]
    assert first == pytest.approx(began + 0.15)
    assert [round(starts[i] - first, 6) for i in range(6)] == [round(i * step, 6) for i in range(6)]
    deferred = [d for d in result.deliveries if d.outcome is Outcome.DEFERRED]
    assert [d.key for d in deferred] == [f"email:{i}" for i in range(6, 10)]
    assert result.failures == ()  # each left as a copy carrying its slot: nothing comes back at random
    assert all(app.status(d.key) is None for d in deferred)  # no record touched, no attempt used
    # Each copy comes back just before its slot (whole seconds, half a second early at least) and carries it.
    assert len(copies) == 4
    for i, entry in zip(range(6, 10), copies, strict=True):
        slot = schedule.carried(copy_record(entry)["messageAttributes"])["ses"]
        assert slot == pytest.approx(first + i * step)
        assert entry["DelaySeconds"] == math.floor(slot - began - schedule.RETURN_MARGIN_SECONDS)  # at the take
    tat = app.runtime.store.get("limit#ses#gcra")
    assert tat is not None and tat.get("tat") == pytest.approx(first + 10 * step)

    # The copies come back: they start at their slots with no limiter call at all, and nobody is deferred again.
    clock.now = first + 6 * step - 1.0
    keys: list[str] = []
    aws.dynamodb.meta.events.register("provide-client-params.dynamodb.UpdateItem",
                                      lambda params, **kwargs: keys.append(params["Key"]["pk"]["S"]))
    again = app.process_batch({"Records": [copy_record(entry) for entry in copies]})
    assert [d.outcome for d in again.deliveries] == [Outcome.SUCCEEDED] * 4
    assert not [key for key in keys if key.startswith("limit#")]
    assert [round(starts[i] - first, 6) for i in range(6, 10)] == [round(i * step, 6) for i in range(6, 10)]


def test_a_copy_back_too_late_for_its_slot_takes_a_new_one_and_one_too_early_waits(
        make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app(sleep=clock.advance)
    app.rate_limit("ses", rate=1, per=10.0)
    starts: list[float] = []

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int) -> None:
        starts.append(clock())

    email.enqueue(n=0)
    email.enqueue(n=1)
    event = receive_event(aws.sqs, aws.queue_url)
    arn = event["Records"][0]["eventSourceARN"]
    copies = sent_copies(aws)
    app.process_batch(event)
    (entry,) = copies
    slot = schedule.carried(copy_record(entry)["messageAttributes"])["ses"]
    clock.now = slot + 1.0  # its poller was slow: the slot is gone (a start now could crowd the next window)
    late = app.process_batch({"Records": [copy_record(entry, arn)]})
    assert late.deliveries[0].outcome is Outcome.DEFERRED and len(starts) == 1
    (second,) = copies[1:]
    new_slot = schedule.carried(copy_record(second)["messageAttributes"])["ses"]
    assert new_slot >= slot + schedule.interval(app.runtime.registry.limiters["ses"])
    clock.now = new_slot - 2.0  # back early (whole-second delays): it waits for its slot in the batch
    on_time = app.process_batch({"Records": [copy_record(second, arn)]})
    assert on_time.deliveries[0].outcome is Outcome.SUCCEEDED and starts[1] == new_slot


def test_invocations_sharing_a_limiter_never_crowd_a_window(make_app: Any, clock: Any) -> None:
    """Two workers (two processors, one table) with batches at once, interleaved; no window holds more."""
    starts: list[float] = []
    apps = [make_app(sleep=clock.advance) for _ in range(2)]
    for app in apps:
        app.rate_limit("sms", rate=4, per=2.0)

        @app.job("sms", key="sms:{n}", limits=["sms"])
        def sms(n: int) -> None:
            starts.append(clock())

    for n in range(12):  # batches every 0.2 s, alternating workers
        app = apps[n % 2]
        app.process_batch(sqs_event([body(app.jobs["sms"], n=n * 10 + i) for i in range(3)]))
        clock.advance(0.2)
    assert len(starts) >= 4
    for first in starts:  # every window of `per` seconds, measured from each start
        assert sum(1 for s in starts if first <= s < first + 2.0) <= 4


def test_ten_limited_jobs_cost_one_extra_write_and_a_batch_without_any_costs_none(
        make_app: Any, aws: Any) -> None:
    app = make_app()
    app.rate_limit("ses", rate=100)

    @app.job("email", key="email:{n}", limits=["ses"])
    def email(n: int) -> None: ...

    @app.job("plain", key="plain:{n}")
    def plain(n: int) -> None: ...

    recorder = CallRecorder(aws.dynamodb)
    result = app.process_batch(sqs_event([body(email, n=i) for i in range(10)]))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 10
    # One reservation for the ten (the limiter's one item), then the claims and the completions every batch pays.
    assert sorted(c["op"] for c in recorder.calls) == ["BatchExecuteStatement"] * 2 + ["UpdateItem"]
    assert recorder.sequential_round_trips() == 3

    warm = CallRecorder(aws.dynamodb)  # the container remembers where the schedule was: one write again
    app.process_batch(sqs_event([body(email, n=i) for i in range(10, 20)]))
    assert sorted(c["op"] for c in warm.calls) == ["BatchExecuteStatement"] * 2 + ["UpdateItem"]

    plain_recorder = CallRecorder(aws.dynamodb)
    app.process_batch(sqs_event([body(plain, n=i) for i in range(10)]))
    assert len(plain_recorder.calls) == 2 and plain_recorder.sequential_round_trips() == 2


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


def test_a_job_refused_a_concurrency_slot_goes_back_without_its_rate_slot(make_app: Any, clock: Any) -> None:
    app = make_app()
    app.rate_limit("ses", rate=5)
    app.concurrency_limit("pdf", 1)

    @app.job("invoice", key="invoice:{n}", limits=["ses", "pdf"])
    def invoice(n: int) -> None: ...

    busy = Acquire(key="limit#pdf#slot#0", owner="another-invocation", now=clock(), lease_until=clock() + 60,
                   expires_at=clock() + LIMIT_TTL_SECONDS)
    assert app.runtime.store.write(busy).ok
    result = app.process_batch(sqs_event([body(invoice, n=1)]))
    d = result.deliveries[0]
    assert (d.outcome, d.deferred_by) == (Outcome.DEFERRED, "pdf")
    # It returns (no copy: it holds no slot worth carrying) and takes a new rate slot when it comes back; the one
    # it reserved is simply a start that did not happen.
    assert result.failures == (d.message_id,) and 1 <= d.delay <= 3


# ---------------------------------------------------------------- deferrals and SQS
def test_a_deferral_at_the_backstop_receive_is_resent_with_its_delay_and_never_dead_lettered(
        ses_app: tuple[JobApp, list[int]], aws: Any) -> None:
    app, ran = ses_app
    email = app.jobs["email"]
    for i in range(8):
        email.enqueue(n=i)
    event = receive_event(aws.sqs, aws.queue_url)
    for record in event["Records"]:  # received as often as SQS allows but once: the next receive would redrive it
        record["attributes"]["ApproximateReceiveCount"] = str(MAX_ATTEMPTS + 1)
    result = app.process_batch(event)

    deferred = [d for d in result.deliveries if d.outcome is Outcome.DEFERRED]
    assert len(ran) == 6 and len(deferred) == 2  # slots 0.35 s apart: six within the batch's 2 s
    assert result.failures == ()  # acknowledged: a fresh copy was sent instead of letting SQS redrive it
    attributes = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url, AttributeNames=["All"])["Attributes"]
    # The copies wait their delays (DelaySeconds) or are back already (their slot is under 2.5 s away).
    assert int(attributes["ApproximateNumberOfMessagesDelayed"]) + int(attributes["ApproximateNumberOfMessages"]) \
        == 2
    assert messages_in(aws.sqs, aws.dlq_url) == []
    assert all(app.status(d.key) is None for d in deferred)  # and they never used an attempt


def test_a_deferred_copy_keeps_its_tenant_and_is_not_counted_as_a_resend(make_app: Any, aws: Any) -> None:
    app = make_app()
    app.rate_limit("ses", rate=1, per=60.0)

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
    assert ATTR_SLOTS in entry["MessageAttributes"]  # and it carries its slot


def test_a_deferred_fifo_record_holds_back_the_rest_of_its_group(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "fifo-limited", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)
    app.rate_limit("ses", rate=1, per=60.0)
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
    # A FIFO copy cannot wait with DelaySeconds nor carry its slot: it returns, and its group waits behind it.
    assert result.deliveries[1].message_id in result.failures


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
