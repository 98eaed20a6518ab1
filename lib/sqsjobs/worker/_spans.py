"""The worker's OpenTelemetry spans, when the application traces (``sqsjobs._otel``); never built otherwise.

Following the conventions for an AWS Lambda SQS consumer (docs/observability.md names the version):

- a batch span ``<queue> process`` (CONSUMER; ``multiple_sources process`` when the
  batch mixes queues), child of whatever span is current (the ADOT layer's
  invocation span), with one **link per message** to the context the message
  carries: its ``traceparent`` attribute, the ``trace`` a schedule kept in its
  envelope, else SQS's ``AWSTraceHeader`` system attribute (X-Ray);
- one span per message, of the same name, child of the batch span and linked to
  its message's context: a job run's span is current while the job runs (its
  own spans and the jobs it enqueues are its children), so it belongs to that
  run even when runs interleave (a context variable); a message that did not
  run gets its span when the batch ends;
- a group's callback and a chain's next step carry the context of the run
  that completed them (``completed_by``), so their runs link to it;
- every message span says how it ended: ``sqsjobs.outcome`` (succeeded,
  duplicate, deferred, superseded, cancelled, dead_lettered...), an event for a
  dead letter (with its reason) and for a retry (with its delay); a failure
  records the exception and sets the error status.

A job run's span ends when its run does (its end time is kept) but is handed to
the exporter once the batch knows the run's outcome: ``close``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqsjobs import _otel
from sqsjobs.enqueue._sizes import fits

if TYPE_CHECKING:
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.worker._delivery import Delivery

MULTIPLE_SOURCES = "multiple_sources"


class Batch(Protocol):
    """What a batch's trace reads of it (``worker/_batch.py``'s ``Batch``, which holds the trace)."""

    @property
    def deliveries(self) -> Sequence[Delivery]: ...

    @property
    def context(self) -> Any: ...



class BatchTrace:
    """The spans of one batch: opened after decoding (links need the messages), closed when the batch ends."""

    def __init__(self, batch: Batch, trace: Any, queue_url: str | None = None) -> None:
        self.trace = trace
        self.tracer = _otel.tracer()
        # the records' event source (an event without one: the app's queue)
        sources = {d.event_source_arn for d in batch.deliveries if d.event_source_arn} or {queue_url or "sqs"}
        self.queue = _otel.queue_name(next(iter(sources))) if len(sources) == 1 else MULTIPLE_SOURCES
        self.name = f"{self.queue} process"
        self.links = {d.index: message_context(d, trace) for d in batch.deliveries}
        attributes: dict[str, Any] = {**self._common(), "messaging.batch.message_count": len(batch.deliveries)}
        request = getattr(batch.context, "aws_request_id", None)
        if isinstance(request, str):
            attributes["faas.invocation_id"] = request
        self.started_ns = time.time_ns()
        self.span = self.tracer.start_span(
            self.name, kind=trace.SpanKind.CONSUMER, attributes=attributes, start_time=self.started_ns,
            links=[trace.Link(c) for c in self.links.values() if c is not None])
        from opentelemetry import context

        self._context: Any = context
        self._token = context.attach(trace.set_span_in_context(self.span))
        #: each job run's span, and when its run ended (ns), by delivery index
        self.runs: dict[int, tuple[Any, int | None]] = {}

    @classmethod
    def open(cls, batch: Batch, log: Any = None, queue_url: str | None = None) -> BatchTrace | None:
        """The batch's spans, or None when the application does not trace (or its tracer failed: the batch
        runs untraced, with a warning; tracing never fails a batch)."""
        trace = _otel.api()
        if trace is None:
            return None
        try:
            return cls(batch, trace, queue_url)
        except Exception as error:  # a tracer provider or a processor of the application's
            if log is not None:
                log.warning("tracing failed; the batch runs untraced", extra={"error": repr(error)})
            return None

    def _common(self) -> dict[str, Any]:
        common: dict[str, Any] = {"faas.trigger": "pubsub", "messaging.system": _otel.MESSAGING_SYSTEM,
                                  "messaging.operation.type": "process", "messaging.operation.name": "process"}
        if self.queue != MULTIPLE_SOURCES:
            common["messaging.destination.name"] = self.queue
        return common

    def _message_span(self, d: Delivery, start_ns: int) -> Any:
        attributes = {**self._common(), "messaging.message.id": d.message_id, "sqsjobs.job": d.job_name}
        if d.key:
            attributes["sqsjobs.key"] = d.key
        if d.envelope is not None and d.envelope.member_of is not None:
            attributes["sqsjobs.group"] = d.envelope.member_of.group
        if d.envelope is not None and d.envelope.step_of is not None:
            attributes["sqsjobs.chain"] = d.envelope.step_of.chain
        link = self.links.get(d.index)
        return self.tracer.start_span(
            self.name, context=self.trace.set_span_in_context(self.span), kind=self.trace.SpanKind.CONSUMER,
            attributes=attributes, links=[self.trace.Link(link)] if link is not None else (), start_time=start_ns)

    # -------------------------------------------------------------- a job run
    def run_started(self, d: Delivery) -> object:
        """``d``'s job starts: its span becomes current (in this context only); returns the token to end it."""
        span = self._message_span(d, time.time_ns())
        span.set_attribute("sqsjobs.attempt", d.attempt)
        self.runs[d.index] = (span, None)
        return self._context.attach(self.trace.set_span_in_context(span))

    def run_ended(self, d: Delivery, token: object | None, error: BaseException | None) -> None:
        """``d``'s job returned or raised: its span keeps its end time and exception, and stops being current
        (``token``: None when its run had a context of its own, which went with it)."""
        if token is not None:
            self._context.detach(token)
        span, _ = self.runs[d.index]
        if error is not None:
            span.record_exception(error)
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        self.runs[d.index] = (span, time.time_ns())

    # -------------------------------------------------------------- workflows
    def completed_by(self, done: Sequence[Delivery], message: JobMessage) -> JobMessage:
        """``message`` (a group's callback, a chain's next step) carrying the context of the first of ``done``
        that ran here (else the context its own message carried): its run links to what completed it."""
        for d in sorted(done, key=lambda d: d.index not in self.runs):  # the runs first
            span = self.runs.get(d.index, (None, None))[0]
            found = span.get_span_context() if span is not None else self.links.get(d.index)
            if found is not None:
                carrier: dict[str, str] = {}
                context = self.trace.set_span_in_context(self.trace.NonRecordingSpan(found))
                _otel.propagator().inject(carrier, context=context)
                return _otel.carried(message, carrier, fits=fits)
        return message

    # -------------------------------------------------------------- the end
    def close(self, batch: Batch) -> None:
        """Every message span gets its outcome and ends; then the batch span."""
        try:
            for d in batch.deliveries:
                span, ended = self.runs.get(d.index, (None, None))
                if span is None:
                    span = self._message_span(d, self.started_ns)
                    if d.attempt:
                        span.set_attribute("sqsjobs.attempt", d.attempt)
                self._outcome(span, d)
                span.end(end_time=ended)
            failed = sum(1 for d in batch.deliveries if d.outcome is not None and d.outcome.value in FAILED)
            if failed:
                self.span.set_attribute("sqsjobs.failed", failed)
        finally:
            self._context.detach(self._token)
            self.span.end()

    def _outcome(self, span: Any, d: Delivery) -> None:
        outcome = d.outcome
        if outcome is None:
            return
        span.set_attribute("sqsjobs.outcome", outcome.value)
        if outcome.value == "dead_lettered":
            reason = d.reason.value if d.reason is not None else "unknown"
            span.add_event("sqsjobs.dead_letter", {"sqsjobs.reason": reason})
            if d.error is not None and d.index not in self.runs:
                span.record_exception(d.error)
            span.set_status(self.trace.Status(self.trace.StatusCode.ERROR, f"dead-lettered: {reason}"))
        elif outcome.value in ("retry", "deferred"):
            attributes: dict[str, Any] = {"sqsjobs.delay": float(d.delay)}
            if d.deferred_by:
                attributes["sqsjobs.limiter"] = d.deferred_by
            span.add_event(f"sqsjobs.{outcome.value}", attributes)


#: outcomes the batch span counts as failed
FAILED = frozenset({"retry", "dead_lettered"})


def message_context(d: Delivery, trace: Any) -> Any:
    """The span context ``d`` carries (``traceparent``, a schedule's envelope ``trace``, else ``AWSTraceHeader``)."""
    carrier = _otel.attribute_carrier(d.message_attributes)
    if not carrier and d.envelope is not None and d.envelope.trace:
        carrier = d.envelope.trace
    if carrier:
        found = trace.get_current_span(_otel.propagator().extract(carrier)).get_span_context()
        if found.is_valid:
            return found
    system = d.raw.get("attributes")
    header = system.get(_otel.AWS_TRACE_HEADER) if isinstance(system, dict) else None
    return xray_context(header, trace) if isinstance(header, str) else None


def xray_context(header: str, trace: Any) -> Any:
    """The span context of an X-Ray trace header (``Root=1-<8 hex>-<24 hex>;Parent=<16 hex>;Sampled=1``), or None.

    Parsed here because the X-Ray propagator is a separate package, not in the API the ``otel`` extra brings.

    Example:
        >>> import opentelemetry.trace as trace
        >>> c = xray_context("Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1", trace)
        >>> format(c.trace_id, "032x"), format(c.span_id, "016x"), c.trace_flags.sampled, c.is_remote
        ('5759e988bd862e3fe1be46a994272793', '53995c3f42cd8ad8', True, True)
        >>> xray_context("Root=1-5759e988-bd862e3fe1be46a994272793", trace) is None
        True
    """
    parts = dict(part.split("=", 1) for part in header.split(";") if "=" in part)
    root, parent = parts.get("Root", "").split("-"), parts.get("Parent", "")
    try:
        if len(root) != 3 or root[0] != "1" or len(root[1]) != 8 or len(root[2]) != 24 or len(parent) != 16:
            return None
        trace_id, span_id = int(root[1] + root[2], 16), int(parent, 16)
    except ValueError:
        return None
    flags = trace.TraceFlags(trace.TraceFlags.SAMPLED if parts.get("Sampled") == "1" else trace.TraceFlags.DEFAULT)
    found = trace.SpanContext(trace_id, span_id, is_remote=True, trace_flags=flags)
    return found if found.is_valid else None
