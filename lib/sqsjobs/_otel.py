"""OpenTelemetry traces when the application uses OpenTelemetry, and nothing at all when it does not.

sqsjobs never imports OpenTelemetry itself. Tracing is *active* once the
application (or the ADOT Lambda layer's wrapper) has imported
``opentelemetry.trace`` and set a tracer provider, which it must do to record
anything; until then every hook here is one ``sys.modules`` lookup (and a
global read) and returns. So a function without OpenTelemetry installed imports
nothing of it, and one with the API installed but no SDK configured pays
nothing either (``bench/tracing.py`` measures both).

What the producer carries (``docs/observability.md``, Traces):

- each message gets the W3C trace context of its "send" span as the message
  attributes ``traceparent`` and ``tracestate`` (the API's own W3C propagator,
  whatever ``OTEL_PROPAGATORS`` says: a message is read by workers in any
  language), within ``MAX_PRODUCER_ATTRIBUTES`` and its size limit; a message
  that already carries a ``traceparent`` (an outbox item, a re-send) keeps it;
- a message that waits in an EventBridge Scheduler schedule (which sends a body
  and no attributes) carries the same two in its envelope's ``trace``.

The worker's spans are in ``worker/_spans.py``.

Example (tracing is not active in the doctests' process unless something imported OpenTelemetry):
    >>> from sqsjobs.enqueue._message import JobMessage
    >>> m = JobMessage(job="a", key="a:1", body="{}")
    >>> carried(m, {"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}, fits=lambda _: True).attributes()[
    ...     "traceparent"]["StringValue"][:8]
    '00-11111'
"""

from __future__ import annotations

import dataclasses
import json
import sys
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqsjobs.enqueue._message import JobMessage

TRACEPARENT = "traceparent"
TRACESTATE = "tracestate"
#: the envelope's property that carries both through a schedule (``enqueue/_envelope.py``)
ENVELOPE_TRACE = "trace"
#: SQS takes 10 attributes a message; the worker may add 3 to a copy (``sqsjobs.resends``, ``sqsjobs.finish``,
#: ``sqsjobs.result``: worker/_send_back.py), so the trace context is added only while a message has at most this many
MAX_PRODUCER_ATTRIBUTES = 7
#: the SQS system attribute X-Ray's active tracing sets on a message (the conventions' fallback link)
AWS_TRACE_HEADER = "AWSTraceHeader"
#: the tracer's name (instrumentation scope)
SCOPE = "sqsjobs"
MESSAGING_SYSTEM = "aws_sqs"


def api() -> Any:
    """``opentelemetry.trace`` when the application imported it and set a tracer provider, else None.

    The one check every hook makes: a dictionary lookup when OpenTelemetry was not imported, and a global
    read when it was but no provider is set (the API's own no-op: nothing would be recorded or sent).

    Example:
        >>> import sys
        >>> "opentelemetry.trace" in sys.modules or api() is None
        True
    """
    trace = sys.modules.get("opentelemetry.trace")
    if trace is None or isinstance(trace.get_tracer_provider(), (trace.ProxyTracerProvider,
                                                                 trace.NoOpTracerProvider)):
        return None
    return trace


_tracers: dict[int, tuple[Any, Any]] = {}


def tracer() -> Any:
    """sqsjobs' tracer from the current global provider (cached per provider; call only when ``api()`` is set)."""
    trace = api()
    provider = trace.get_tracer_provider()
    found = _tracers.get(id(provider))
    if found is None or found[0] is not provider:
        version = getattr(sys.modules.get("sqsjobs"), "__version__", None)  # the package, imported before this
        found = _tracers[id(provider)] = (provider, provider.get_tracer(SCOPE, version))
    return found[1]


_propagator: list[Any] = []


def propagator() -> Any:
    """The API's W3C trace-context propagator (``traceparent``/``tracestate``), made once."""
    if not _propagator:
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        _propagator.append(TraceContextTextMapPropagator())
    return _propagator[0]


def queue_name(url_or_arn: str) -> str:
    """A queue's name, from its URL or ARN (``messaging.destination.name``).

    Example:
        >>> queue_name("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"), queue_name("arn:aws:sqs:r:1:jobs.fifo")
        ('jobs', 'jobs.fifo')
    """
    return url_or_arn.rstrip("/").rsplit("/", 1)[-1].rsplit(":", 1)[-1]


# ---------------------------------------------------------------- the producer
def send_span(queue_url: str, count: int) -> Any:
    """A "send <queue>" PRODUCER span made current (a context manager), or None when tracing is not active.

    It records an exception and sets the error status when the send raises.
    """
    trace = api()
    if trace is None:
        return None
    attributes: dict[str, Any] = {
        "messaging.system": MESSAGING_SYSTEM, "messaging.operation.type": "send",
        "messaging.operation.name": "send", "messaging.destination.name": queue_name(queue_url),
    }
    if count != 1:
        attributes["messaging.batch.message_count"] = count
    try:
        return tracer().start_as_current_span(f"send {queue_name(queue_url)}", kind=trace.SpanKind.PRODUCER,
                                              attributes=attributes)
    except Exception:  # the application's tracer failed: the message is sent untraced, never refused
        return None


def current_carrier() -> dict[str, str]:
    """The current context as ``traceparent``/``tracestate`` ({} when not active, or no span is current)."""
    if api() is None:
        return {}
    carrier: dict[str, str] = {}
    propagator().inject(carrier)
    return carrier


def carrying(message: JobMessage, fits: Callable[[JobMessage], bool]) -> JobMessage:
    """``message`` with the current trace context as attributes (see ``carried``); itself when not active."""
    if api() is None or TRACEPARENT in message.extra_attributes:
        return message
    return carried(message, current_carrier(), fits=fits)


def carried(message: JobMessage, carrier: Mapping[str, str], *, fits: Callable[[JobMessage], bool]) -> JobMessage:
    """``message`` with ``carrier``'s ``traceparent`` (and ``tracestate``) added as String attributes.

    Within ``MAX_PRODUCER_ATTRIBUTES`` and what ``fits`` (the size check): ``tracestate`` goes first, then
    ``traceparent``; tracing never makes a message that could be sent unsendable.
    """
    parent = carrier.get(TRACEPARENT)
    if not parent or TRACEPARENT in message.extra_attributes:
        return message
    count = len(message.attributes())
    extra = dict(message.extra_attributes)
    if count + 1 > MAX_PRODUCER_ATTRIBUTES:
        return message
    extra[TRACEPARENT] = parent
    state = carrier.get(TRACESTATE)
    if state and count + 2 <= MAX_PRODUCER_ATTRIBUTES:
        with_state = dataclasses.replace(message, extra_attributes={**extra, TRACESTATE: state})
        if fits(with_state):
            return with_state
    without = dataclasses.replace(message, extra_attributes=extra)
    return without if fits(without) else message


def body_carrying(body: str, carrier: Mapping[str, str]) -> str:
    """An envelope ``body`` with ``carrier`` as its ``trace`` property (a schedule sends no attributes).

    Example:
        >>> body_carrying('{"job":"a","v":1}', {"traceparent": "00-ab-cd-01"})
        '{"job":"a","trace":{"traceparent":"00-ab-cd-01"},"v":1}'
        >>> body_carrying('{"job":"a","v":1}', {})
        '{"job":"a","v":1}'
    """
    trace = {name: carrier[name] for name in (TRACEPARENT, TRACESTATE) if carrier.get(name)}
    if TRACEPARENT not in trace:
        return body
    try:
        data = json.loads(body)
    except ValueError:
        return body
    if not isinstance(data, dict) or ENVELOPE_TRACE in data:
        return body
    data[ENVELOPE_TRACE] = trace
    return json.dumps(data, separators=(",", ":"), sort_keys=True, allow_nan=False)


def attribute_carrier(message_attributes: Mapping[str, Any]) -> dict[str, str]:
    """``traceparent``/``tracestate`` from message attributes (the Lambda event's or ``SendMessage``'s shape).

    Example:
        >>> attribute_carrier({"traceparent": {"stringValue": "00-ab-cd-01", "dataType": "String"}, "x": {}})
        {'traceparent': '00-ab-cd-01'}
    """
    carrier: dict[str, str] = {}
    for name in (TRACEPARENT, TRACESTATE):
        attr = message_attributes.get(name)
        if isinstance(attr, dict):
            value = attr.get("stringValue", attr.get("StringValue"))
            if isinstance(value, str) and value:
                carrier[name] = value
    return carrier
