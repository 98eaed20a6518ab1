"""The trace shape (docs/observability.md, Traces): producer spans and context, the worker's batch and job spans."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from sqsjobs import JobApp, Outcome, PermanentError
from sqsjobs._otel import MAX_PRODUCER_ATTRIBUTES
from sqsjobs.enqueue._sizes import WORKER_ATTRIBUTE_BYTES
from sqsjobs.worker._delivery import Delivery
from sqsjobs.worker._spans import message_context

QUEUE = "sqsjobs-test-jobs"
tracer = trace.get_tracer("the-web-app")


def named(spans: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in spans.get_finished_spans() if s.name == name]


def one(spans: InMemorySpanExporter, name: str) -> ReadableSpan:
    found = named(spans, name)
    assert len(found) == 1, [s.name for s in spans.get_finished_spans()]
    return found[0]


def traceparent(span: ReadableSpan) -> str:
    """Its W3C traceparent without the flags (the SDK may set the random-trace-id flag, 03)."""
    assert span.context is not None
    return f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}"


def carried(value: str) -> str:
    return value.rsplit("-", 1)[0]


def batch_and_jobs(spans: InMemorySpanExporter) -> tuple[list[ReadableSpan], list[ReadableSpan]]:
    process = named(spans, f"{QUEUE} process")
    return ([s for s in process if s.parent is None or "messaging.batch.message_count" in (s.attributes or {})],
            [s for s in process if "messaging.message.id" in (s.attributes or {})])


def sent_attributes(t: Any) -> list[dict[str, Any]]:
    return [m.attributes for m in t.sqs.sent_to(t.queue_url)]


@pytest.fixture
def app() -> JobApp:
    app = JobApp()
    inside: list[Any] = []

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None:
        with tracer.start_as_current_span("greeting"):
            inside.append(trace.get_current_span().get_span_context())
        if user_id == 99:
            follow_up.enqueue(user_id=user_id)

    @app.job("follow-up", key="follow-up:{user_id}")
    def follow_up(user_id: int) -> None: ...

    @app.job("flaky", key="flaky:{n}", max_attempts=2)
    def flaky(n: int) -> None:
        raise TimeoutError(f"upstream {n} timed out")

    @app.job("doomed", key="doomed:{n}")
    def doomed(n: int) -> None:
        raise PermanentError(f"invoice {n} is gone")

    app.inside = inside  # type: ignore[attr-defined]
    return app


def test_a_request_enqueued_under_a_span_is_linked_from_the_batch_and_its_job_span(
        app: JobApp, spans: InMemorySpanExporter) -> None:
    greet = app.jobs["greet"]
    with app.testing() as t:
        with tracer.start_as_current_span("POST /signup"):
            greet.enqueue(user_id=7)
        [attributes] = sent_attributes(t)
        t.drain()

    request, send = one(spans, "POST /signup"), one(spans, f"send {QUEUE}")
    assert send.kind is SpanKind.PRODUCER and send.parent is not None
    assert send.parent.span_id == request.context.span_id
    assert dict(send.attributes or {}) == {
        "messaging.system": "aws_sqs", "messaging.operation.type": "send", "messaging.operation.name": "send",
        "messaging.destination.name": QUEUE, "messaging.message.id": "fake-000001"}
    # The message carries the send span's context, as a W3C traceparent message attribute.
    assert carried(attributes["traceparent"]["StringValue"]) == traceparent(send)
    [batch], [job] = batch_and_jobs(spans)
    assert batch.kind is SpanKind.CONSUMER and job.kind is SpanKind.CONSUMER
    assert [link.context.span_id for link in batch.links] == [send.context.span_id]
    assert {k: v for k, v in (batch.attributes or {}).items() if k != "faas.invocation_id"} == {
        "faas.trigger": "pubsub", "messaging.system": "aws_sqs", "messaging.operation.type": "process",
        "messaging.operation.name": "process", "messaging.destination.name": QUEUE,
        "messaging.batch.message_count": 1}
    assert job.parent is not None and job.parent.span_id == batch.context.span_id
    assert job.context.trace_id == batch.context.trace_id
    assert [link.context.span_id for link in job.links] == [send.context.span_id]
    assert dict(job.attributes or {}) == {
        "faas.trigger": "pubsub", "messaging.system": "aws_sqs", "messaging.operation.type": "process",
        "messaging.operation.name": "process", "messaging.destination.name": QUEUE,
        "messaging.message.id": "fake-000001", "sqsjobs.job": "greet", "sqsjobs.key": "greet:7",
        "sqsjobs.attempt": 1, "sqsjobs.outcome": "succeeded"}
    assert job.status.status_code is StatusCode.UNSET
    # The job's own spans are children of its span.
    greeting = one(spans, "greeting")
    assert greeting.parent is not None and greeting.parent.span_id == job.context.span_id
    assert app.inside == [greeting.context]  # type: ignore[attr-defined]


def test_a_job_enqueued_by_a_job_carries_the_job_span_s_context(app: JobApp, spans: InMemorySpanExporter) -> None:
    with app.testing() as t:
        t.run(app.jobs["greet"].message(user_id=99))
        follow_up = [m for m in t.sqs.sent_to(t.queue_url) if json.loads(m.body)["job"] == "follow-up"]
        t.drain()
    [job] = [s for s in batch_and_jobs(spans)[1] if (s.attributes or {})["sqsjobs.job"] == "greet"]
    send = one(spans, f"send {QUEUE}")
    assert send.parent is not None and send.parent.span_id == job.context.span_id
    assert carried(follow_up[0].attributes["traceparent"]["StringValue"]) == traceparent(send)
    [child] = [s for s in batch_and_jobs(spans)[1] if (s.attributes or {})["sqsjobs.job"] == "follow-up"]
    assert [link.context.span_id for link in child.links] == [send.context.span_id]


def test_a_failure_records_the_exception_and_its_retry_then_its_dead_letter(
        app: JobApp, spans: InMemorySpanExporter) -> None:
    with app.testing() as t:
        t.run(app.jobs["flaky"].message(n=1))
        t.drain()
    first, last = batch_and_jobs(spans)[1]
    for span in (first, last):
        assert span.status.status_code is StatusCode.ERROR
        [raised] = [e for e in span.events if e.name == "exception"]
        assert (raised.attributes or {})["exception.type"] == "TimeoutError"
        assert (raised.attributes or {})["exception.message"] == "upstream 1 timed out"
    assert [(s.attributes or {})["sqsjobs.attempt"] for s in (first, last)] == [1, 2]
    assert [(s.attributes or {})["sqsjobs.outcome"] for s in (first, last)] == ["retry", "dead_lettered"]
    assert [e.name for e in first.events] == ["exception", "sqsjobs.retry"]
    assert [(e.name, dict(e.attributes or {})) for e in last.events][1:] == [
        ("sqsjobs.dead_letter", {"sqsjobs.reason": "exhausted"})]
    batches = batch_and_jobs(spans)[0]
    assert [(b.attributes or {}).get("sqsjobs.failed") for b in batches] == [1, 1]


def test_a_permanent_failure_is_dead_lettered_with_its_reason_on_the_span(
        app: JobApp, spans: InMemorySpanExporter) -> None:
    with app.testing() as t:
        t.run(app.jobs["doomed"].message(n=4))
    [job] = batch_and_jobs(spans)[1]
    assert (job.attributes or {})["sqsjobs.outcome"] == "dead_lettered"
    assert [e.name for e in job.events] == ["exception", "sqsjobs.dead_letter"]
    assert job.status.status_code is StatusCode.ERROR


def test_messages_that_do_not_run_say_why_on_their_spans(app: JobApp, spans: InMemorySpanExporter) -> None:
    greet = app.jobs["greet"]
    with app.testing() as t:
        t.run(greet.message(user_id=1), greet.message(user_id=1))  # the second is a duplicate
        app.cancel("greet:2")
        t.run(greet.message(user_id=2))
        t.run("this is not an envelope")
    outcomes = [(s.attributes or {}).get("sqsjobs.outcome") for s in batch_and_jobs(spans)[1]]
    assert sorted(outcomes) == ["cancelled", "dead_lettered", "duplicate", "succeeded"]
    malformed = [s for s in batch_and_jobs(spans)[1] if (s.attributes or {})["sqsjobs.job"] == "?"]
    [event] = [e for e in malformed[0].events if e.name == "sqsjobs.dead_letter"]
    assert (event.attributes or {})["sqsjobs.reason"] == "malformed"
    # Only the run has an attempt; the others never started.
    assert [(s.attributes or {}).get("sqsjobs.attempt") for s in batch_and_jobs(spans)[1]
            if (s.attributes or {}).get("sqsjobs.outcome") != "succeeded"] == [None, None, None]


def test_enqueue_many_is_one_send_span_whose_context_every_message_carries(
        app: JobApp, spans: InMemorySpanExporter) -> None:
    greet = app.jobs["greet"]
    with app.testing() as t:
        with tracer.start_as_current_span("import"):
            report = app.enqueue_many([greet.message(user_id=n) for n in range(12)])
        assert report.ok
        contexts = {carried(a["traceparent"]["StringValue"]) for a in sent_attributes(t)}
        t.drain()
    send = one(spans, f"send {QUEUE}")
    assert (send.attributes or {})["messaging.batch.message_count"] == 12
    assert contexts == {traceparent(send)}
    batches, jobs = batch_and_jobs(spans)
    assert len(jobs) == 12 and sum(len(b.links) for b in batches) == 12


def test_the_trace_context_stays_within_the_attribute_limit_and_the_size_limit(app: JobApp) -> None:
    greet = app.jobs["greet"]
    state = trace.TraceState([("vendor", "x" * 200)])
    parent = trace.NonRecordingSpan(trace.SpanContext(0xABC, 0xDEF, is_remote=True,
                                                      trace_flags=trace.TraceFlags(1), trace_state=state))
    with app.testing() as t, trace.use_span(parent):
        for extras in (MAX_PRODUCER_ATTRIBUTES - 3, MAX_PRODUCER_ATTRIBUTES - 2, MAX_PRODUCER_ATTRIBUTES - 1):
            app.runtime.send(dataclasses.replace(greet.message(user_id=extras),
                                                 extra_attributes={f"a{i}": "v" for i in range(extras)}))
        # A message that fits only without the trace context is sent without it, never refused.
        plain = greet.message(user_id=1000)
        room = app.settings.max_message_bytes - WORKER_ATTRIBUTE_BYTES - plain.size() - len("pad") - len("String")
        app.runtime.send(dataclasses.replace(plain, extra_attributes={"pad": "p" * (room - 30)}))
        sent = sent_attributes(t)
    names = [sorted(n for n in a if n in ("traceparent", "tracestate")) for a in sent]
    assert names[:3] == [["traceparent", "tracestate"], ["traceparent"], []]
    assert all(len(a) <= MAX_PRODUCER_ATTRIBUTES for a in sent)
    assert "traceparent" not in sent[3] and "pad" in sent[3]


def test_a_delayed_job_carries_the_context_through_its_schedule(app: JobApp, spans: InMemorySpanExporter) -> None:
    greet = app.jobs["greet"]
    with app.testing() as t:
        with tracer.start_as_current_span("POST /remind"):
            greet.enqueue(user_id=5, delay=2 * 86_400)
        [schedule] = t.scheduled()
        t.advance(2 * 86_400)
        t.drain()
    send = one(spans, f"send {QUEUE}")
    assert carried(json.loads(schedule.body)["trace"]["traceparent"]) == traceparent(send)
    [job] = batch_and_jobs(spans)[1]
    assert [link.context.span_id for link in job.links] == [send.context.span_id]


def test_an_outbox_item_keeps_the_request_s_context_for_the_relay() -> None:
    app = JobApp(outbox_table="outbox")

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None: ...

    with tracer.start_as_current_span("POST /orders") as request:
        tx = app.transaction(outbox_table="outbox")
        tx.enqueue("greet", user_id=3)
    attributes = json.loads(tx.items[0]["Put"]["Item"]["attributes"]["S"])
    assert attributes["traceparent"].split("-")[2] == f"{request.get_span_context().span_id:016x}"


def test_an_x_ray_trace_header_is_the_link_when_no_traceparent_came() -> None:
    header = "Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1"
    d = Delivery.parse({"messageId": "m", "receiptHandle": "r", "body": "{}",
                        "attributes": {"AWSTraceHeader": header}}, 0)
    found = message_context(d, trace)
    assert (f"{found.trace_id:032x}", f"{found.span_id:016x}") == ("5759e988bd862e3fe1be46a994272793",
                                                                  "53995c3f42cd8ad8")
    with_parent = Delivery.parse({"messageId": "m", "receiptHandle": "r", "body": "{}",
                                  "attributes": {"AWSTraceHeader": header}, "messageAttributes": {
                                      "traceparent": {"stringValue": f"00-{'1' * 32}-{'2' * 16}-01",
                                                      "dataType": "String"}}}, 0)
    assert f"{message_context(with_parent, trace).span_id:016x}" == "2" * 16
    for broken in ("Root=1-zz;Parent=1", "Parent=53995c3f42cd8ad8", ""):
        d = Delivery.parse({"messageId": "m", "receiptHandle": "r", "attributes": {"AWSTraceHeader": broken}}, 0)
        assert message_context(d, trace) is None


def test_a_job_s_span_is_its_own_when_runs_interleave(app: JobApp, spans: InMemorySpanExporter) -> None:
    # Two runs in flight in one thread (asyncio tasks, as an async job runs): each sees only its own span.
    import asyncio

    from sqsjobs.worker._spans import BatchTrace

    seen: dict[str, Any] = {}
    greet = app.jobs["greet"]
    with app.testing() as t:
        greet.enqueue(user_id=1)
        greet.enqueue(user_id=2)
        from sqsjobs.testing.events import record_from_message

        arn = f"arn:aws:sqs:eu-west-1:123456789012:{QUEUE}"
        records = [record_from_message(m.to_wire(), arn) for m in t.sqs.sent_to(t.queue_url)]
    deliveries = [Delivery.parse(r, i) for i, r in enumerate(records)]
    for d in deliveries:
        d.key = f"greet:{d.index + 1}"

    class _Batch:
        context = None

    _Batch.deliveries = deliveries  # type: ignore[attr-defined]
    batch_trace = BatchTrace(_Batch, trace)  # type: ignore[arg-type]

    async def run(d: Delivery) -> None:
        token = batch_trace.run_started(d)
        await asyncio.sleep(0)  # the other run starts here
        seen[d.key] = trace.get_current_span().get_span_context().span_id
        await asyncio.sleep(0)
        batch_trace.run_ended(d, token, None)

    async def both() -> None:
        await asyncio.gather(*(asyncio.create_task(run(d)) for d in deliveries))

    asyncio.run(both())
    assert seen == {d.key: batch_trace.runs[d.index][0].get_span_context().span_id for d in deliveries}
    assert len(set(seen.values())) == 2


def test_outcome_names_are_the_worker_s(app: JobApp) -> None:
    assert {o.value for o in Outcome} >= {"succeeded", "duplicate", "cancelled", "superseded", "deferred",
                                          "dead_lettered", "retry"}


def job_spans_of(spans: InMemorySpanExporter, job: str) -> list[ReadableSpan]:
    return [s for s in batch_and_jobs(spans)[1] if (s.attributes or {})["sqsjobs.job"] == job]


def test_a_chain_s_next_step_links_to_the_run_of_the_step_that_completed(
        app: JobApp, spans: InMemorySpanExporter) -> None:
    greet, follow_up = app.jobs["greet"], app.jobs["follow-up"]
    with app.testing() as t:
        app.chain(greet.message(user_id=1), follow_up.message(user_id=1), follow_up.message(user_id=2)).enqueue()
        t.drain()
    [first] = job_spans_of(spans, "greet")
    second, third = sorted(job_spans_of(spans, "follow-up"), key=lambda s: s.start_time or 0)
    assert [link.context.span_id for link in second.links] == [first.context.span_id]
    assert [link.context.span_id for link in third.links] == [second.context.span_id]
    assert {(s.attributes or {})["sqsjobs.outcome"] for s in (first, second, third)} == {"succeeded"}
    assert len({(s.attributes or {})["sqsjobs.chain"] for s in (first, second, third)}) == 1


def test_a_group_s_callback_links_to_a_member_run_that_finished_the_group(
        app: JobApp, spans: InMemorySpanExporter) -> None:
    greet, follow_up = app.jobs["greet"], app.jobs["follow-up"]
    with app.testing() as t:
        group = app.group(on_success=follow_up.message(user_id=100))
        group.add_many(greet.message(user_id=n) for n in range(3))
        group.enqueue()
        t.drain()
    members = job_spans_of(spans, "greet")
    [callback] = job_spans_of(spans, "follow-up")
    assert len(members) == 3
    assert len({(m.attributes or {})["sqsjobs.group"] for m in members}) == 1
    [link] = callback.links
    assert link.context.span_id in {m.context.span_id for m in members}
    # the member whose run finished the group ran in the callback sender's batch: its span ended before
    [finisher] = [m for m in members if m.context.span_id == link.context.span_id]
    assert (finisher.end_time or 0) <= (callback.start_time or 0)


def test_a_superseded_burst_and_a_deferral_say_so_on_their_spans(spans: InMemorySpanExporter) -> None:
    app = JobApp()
    app.rate_limit("search", rate=2, per=3.0)  # slots 1.5 s apart: two within the batch's 2 s wait

    @app.job("reindex", key="reindex:{product_id}", debounce=30)
    def reindex(product_id: int, title: str) -> None: ...

    @app.job("search", key="search:{n}", limits=["search"])
    def search(n: int) -> None: ...

    with app.testing() as t:
        for n in range(3):
            reindex.enqueue(product_id=7, title=f"edit {n}")
        t.drain()
        t.run(*(search.message(n=n) for n in range(4)))
    outcomes = [(s.attributes or {})["sqsjobs.outcome"] for s in batch_and_jobs(spans)[1]]
    assert sorted(outcomes[:3]) == ["succeeded", "superseded", "superseded"]
    assert sorted(outcomes[3:]) == ["deferred", "deferred", "succeeded", "succeeded"]
    for span in batch_and_jobs(spans)[1]:
        if (span.attributes or {})["sqsjobs.outcome"] == "deferred":
            [event] = span.events
            assert event.name == "sqsjobs.deferred" and (event.attributes or {})["sqsjobs.limiter"] == "search"
            assert (event.attributes or {})["sqsjobs.delay"] > 0


def test_group_and_chain_sends_under_a_request_carry_its_context(app: JobApp, spans: InMemorySpanExporter) -> None:
    greet, follow_up = app.jobs["greet"], app.jobs["follow-up"]
    with app.testing() as t:
        with tracer.start_as_current_span("POST /batch") as request:
            group = app.group(on_success=follow_up.message(user_id=100))
            group.add_many(greet.message(user_id=n) for n in range(3))
            group.enqueue()
            app.chain(greet.message(user_id=10), follow_up.message(user_id=10)).enqueue()
        sent = sent_attributes(t)
    sends = named(spans, f"send {QUEUE}")
    assert sends and all(s.parent is not None and s.parent.span_id == request.get_span_context().span_id
                         for s in sends)
    assert len(sent) == 4  # three members and the chain's first step
    assert {carried(a["traceparent"]["StringValue"]) for a in sent} <= {traceparent(s) for s in sends}


def test_a_failing_tracer_never_fails_a_send_or_a_batch(app: JobApp, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsjobs import _otel

    def broken() -> Any:
        raise RuntimeError("the exporter's configuration is wrong")

    monkeypatch.setattr(_otel, "tracer", broken)
    with app.testing() as t:
        app.jobs["greet"].enqueue(user_id=8)
        t.drain()
        assert [o.outcome for o in t.outcomes] == [Outcome.SUCCEEDED]


def test_async_and_threaded_jobs_in_flight_together_each_run_under_its_own_span(
        spans: InMemorySpanExporter) -> None:
    import asyncio
    import threading

    app = JobApp()
    both_started = asyncio.Event()
    arrived: list[int] = []
    two_threads = threading.Barrier(2, timeout=30)

    @app.job("fetch", key="fetch:{n}")
    async def fetch(n: int) -> None:
        arrived.append(n)
        if len(arrived) == 2:
            both_started.set()
        await both_started.wait()  # both runs are in flight here, interleaved on one loop
        with tracer.start_as_current_span(f"fetch {n}"):
            await asyncio.sleep(0)

    @app.job("resize", key="resize:{n}", threads=True)
    def resize(n: int) -> None:
        two_threads.wait()  # both runs are in flight here, on two threads
        with tracer.start_as_current_span(f"resize {n}"):
            pass

    with app.testing() as t:
        t.run(fetch.message(n=1), fetch.message(n=2), resize.message(n=3), resize.message(n=4))
    runs = {(s.attributes or {})["sqsjobs.key"]: s for s in batch_and_jobs(spans)[1]}
    assert {(s.attributes or {})["sqsjobs.outcome"] for s in runs.values()} == {"succeeded"}
    for name, key in (("fetch 1", "fetch:1"), ("fetch 2", "fetch:2"), ("resize 3", "resize:3"),
                      ("resize 4", "resize:4")):
        child = one(spans, name)
        assert child.parent is not None and child.parent.span_id == runs[key].context.span_id, name
