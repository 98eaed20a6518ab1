"""The message body: what a producer sends and a worker reads.

Envelope version 1 is a JSON object::

    {"v": 1, "job": "invoice-email", "job_version": 1,
     "key": "invoice-email:42", "args": {"invoice_id": 42}, "enqueued_at": 1767225600.0}

``v`` is the envelope's own format; ``job_version`` is the version of the
job's arguments (see upcasting in docs/jobs.md). A member of a job group
carries ``"member_of": {"group": "<id>", "shard": 3}`` and a step of a chain
``"step_of": {"chain": "<id>", "step": 1}`` (docs/groups.md). A job a durable
workflow awaits carries ``"callback": {"to": "lambda", "id": "<callback id>"}``
(``"to": "states"`` for a Step Functions task token; ``"heartbeat": true``
when the workflow asked for heartbeats; docs/durable.md). The JSON Schema shipped as
``sqsjobs/envelope.schema.json`` describes the same thing for producers in
other languages. Decoding never raises anything but ``MalformedMessageError``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from sqsjobs._errors import MalformedMessageError
from sqsjobs._settings import DEFAULT_MAX_MESSAGE_BYTES, SQS_MAX_MESSAGE_BYTES
from sqsjobs.enqueue._arguments import MAX_LIST_ITEMS
from sqsjobs.store._lease import RESERVED_PREFIXES, is_reserved

ENVELOPE_VERSION = 1
SUPPORTED_VERSIONS = frozenset({ENVELOPE_VERSION})
#: the largest message SQS takes on any queue (a queue's ``MaximumMessageSize`` is 1,024..1,048,576 bytes). A body
#: delivered is within its queue's limit, so decoding bounds it by this; senders check the app's own limit
#: (``Settings.max_message_bytes``, ``sqsjobs.enqueue._sizes``).
MAX_BODY_BYTES = SQS_MAX_MESSAGE_BYTES
#: the template's ``MaximumMessageSize`` default: IDs-only payloads stay far below it
DEFAULT_MESSAGE_BYTES = DEFAULT_MAX_MESSAGE_BYTES
#: SQS bills a message per 64 KiB chunk: a 1 MiB message is 16 requests to send, 16 to receive, 16 to delete
BILLED_CHUNK_BYTES = 64 * 1024
#: DynamoDB's partition key limit is 2048 bytes; the key is the partition key.
MAX_KEY_BYTES = 2048
#: what a group's or a chain's id may be (they are parts of table keys and of job keys)
RELATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: the largest shard or step index a body may name
MAX_INDEX = 9999
#: a member's place in its group (groups are created with at most this many members)
MAX_MEMBER_INDEX = 10_000_000


@dataclass(frozen=True)
class MemberOf:
    """The job group a message belongs to, the counter shard its outcome is counted in, and its place in the group.

    ``index`` identifies the member in its shard's count (``workflows/_groups.py``);
    a message written before members had one reads as ``None``.

    Example:
        >>> MemberOf("3f2a9c", 2, 12).wire()
        {'group': '3f2a9c', 'shard': 2, 'index': 12}
    """

    group: str
    shard: int
    index: int | None = None

    def wire(self) -> dict[str, Any]:
        """The envelope's ``member_of`` object."""
        wire: dict[str, Any] = {"group": self.group, "shard": self.shard}
        if self.index is not None:
            wire["index"] = self.index
        return wire


@dataclass(frozen=True)
class StepOf:
    """The chain a message is a step of, and which step (0 = the first).

    Example:
        >>> StepOf("8b1e04", 1).wire()
        {'chain': '8b1e04', 'step': 1}
    """

    chain: str
    step: int

    def wire(self) -> dict[str, Any]:
        """The envelope's ``step_of`` object."""
        return {"chain": self.chain, "step": self.step}


#: where a callback goes: a Lambda durable execution's callback, a Step Functions task token
CALLBACK_SERVICES = ("lambda", "states")
#: botocore's ``CallbackId`` shape (SendDurableExecutionCallback*): 1..1024 characters of base64
DURABLE_CALLBACK_ID = re.compile(r"[A-Za-z0-9+/]+={0,2}")
MAX_CALLBACK_ID = {"lambda": 1024, "states": 2048}


@dataclass(frozen=True, eq=False)
class CallbackTo:
    """The workflow a message's request answers when its fate is final (``workflows/_callbacks.py``).

    ``service`` is ``"lambda"`` (a durable execution's callback id) or
    ``"states"`` (a Step Functions task token); ``heartbeat`` asks for a
    heartbeat each time the job goes back to wait (a retry, a deferral).

    Example:
        >>> CallbackTo("lambda", "Y2IxMjM=").wire()
        {'to': 'lambda', 'id': 'Y2IxMjM='}
    """

    service: str
    id: str
    heartbeat: bool = False

    def __post_init__(self) -> None:
        problem = callback_problem(self.service, self.id, self.heartbeat)
        if problem is not None:
            raise ValueError(problem)

    def __eq__(self, other: object) -> bool:  # a DurableCallback equals the CallbackTo a body decodes to
        return isinstance(other, CallbackTo) and (self.service, self.id, self.heartbeat) == (
            other.service, other.id, other.heartbeat)

    def __hash__(self) -> int:
        return hash((self.service, self.id, self.heartbeat))

    def wire(self) -> dict[str, Any]:
        """The envelope's ``callback`` object."""
        wire: dict[str, Any] = {"to": self.service, "id": self.id}
        if self.heartbeat:
            wire["heartbeat"] = True
        return wire


def callback_problem(service: Any, ident: Any, heartbeat: Any = False) -> str | None:
    """What is wrong with a callback, or None (the one check, at enqueue and at decoding).

    Example:
        >>> callback_problem("lambda", "not base64!")
        "a durable callback id is 1..1024 characters of base64 (A-Z a-z 0-9 + / =), got 'not base64!'"
    """
    if service not in CALLBACK_SERVICES:
        return f"a callback goes to 'lambda' (a durable callback id) or 'states' (a task token), got {service!r}"
    if not isinstance(heartbeat, bool):
        return f"a callback's heartbeat is true or false, got {heartbeat!r}"
    limit = MAX_CALLBACK_ID[service]
    if service == "lambda":
        if not isinstance(ident, str) or not 0 < len(ident) <= limit or not DURABLE_CALLBACK_ID.fullmatch(ident):
            return f"a durable callback id is 1..{limit} characters of base64 (A-Z a-z 0-9 + / =), got {ident!r:.80}"
    elif not isinstance(ident, str) or not 0 < len(ident) <= limit or not ident.isprintable():
        return f"a task token is 1..{limit} printable characters, got {ident!r:.80}"
    return None


def as_callback(value: Any, what: str, error: type[Exception]) -> CallbackTo:
    """``value`` as a callback (a ``DurableCallback`` or ``TaskToken``, ``workflows/_callbacks.py``), else ``error``.

    Example:
        >>> as_callback("Y2FsbGJhY2s=", "job 'resize'", TypeError)
        Traceback (most recent call last):
        ...
        TypeError: job 'resize': callback= takes DurableCallback(callback_id) or TaskToken(token), got str
    """
    if not isinstance(value, CallbackTo):
        raise error(f"{what}: callback= takes DurableCallback(callback_id) or TaskToken(token), "
                    f"got {type(value).__name__}")
    return value


@dataclass(frozen=True, kw_only=True)
class Envelope:
    """A decoded job message.

    Example:
        >>> e = Envelope(job="invoice-email", key="invoice-email:42", args={"invoice_id": 42})
        >>> Envelope.decode(e.encode()).args
        {'invoice_id': 42}
    """

    job: str
    key: str
    args: dict[str, Any] = field(default_factory=dict)
    job_version: int = 1
    enqueued_at: float | None = None
    #: seconds after ``enqueued_at`` past which the message is acknowledged without running
    expires_in: float | None = None
    #: the job group this message is a member of
    member_of: MemberOf | None = None
    #: the chain this message is a step of
    step_of: StepOf | None = None
    #: a debounced enqueue's burst token: the delivery runs only while it is the key's latest (enqueue/_debounce.py)
    debounce: str | None = None
    #: W3C ``traceparent``/``tracestate`` of a message that waited in a schedule (no attributes there; sqsjobs._otel)
    trace: dict[str, str] | None = None
    #: the workflow this request answers when its fate is final (it never changes the key)
    callback: CallbackTo | None = None
    v: int = ENVELOPE_VERSION

    def encode(self) -> str:
        """The JSON body, compact and with sorted keys (stable for dedup ids)."""
        body: dict[str, Any] = {
            "v": self.v,
            "job": self.job,
            "job_version": self.job_version,
            "key": self.key,
            "args": self.args,
        }
        if self.enqueued_at is not None:
            body["enqueued_at"] = self.enqueued_at
        if self.expires_in is not None:
            body["expires_in"] = self.expires_in
        if self.member_of is not None:
            body["member_of"] = self.member_of.wire()
        if self.step_of is not None:
            body["step_of"] = self.step_of.wire()
        if self.debounce is not None:
            body["debounce"] = self.debounce
        if self.trace:
            body["trace"] = self.trace
        if self.callback is not None:
            body["callback"] = self.callback.wire()
        return json.dumps(body, separators=(",", ":"), sort_keys=True, allow_nan=False)

    @classmethod
    def decode(cls, body: str | bytes | None) -> Envelope:
        """Parse and check a body; every problem is a ``MalformedMessageError`` with a reason."""
        if body is None:
            raise MalformedMessageError("message has no body")
        raw = body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body
        if len(raw) > MAX_BODY_BYTES:
            raise MalformedMessageError(f"body is {len(raw)} bytes, over the {MAX_BODY_BYTES}-byte limit")
        try:
            # NaN/Infinity are not JSON (RFC 8259): other languages' parsers and the schema refuse them.
            data = json.loads(raw, parse_constant=_reject_constant)
        # RecursionError: absurdly deep nesting is a malformed body, not a crash.
        except (ValueError, RecursionError) as error:
            raise MalformedMessageError(f"body is not valid JSON: {error}") from None
        if not isinstance(data, dict):
            raise MalformedMessageError(f"body must be a JSON object, got {type(data).__name__}")
        version = _integer(data.get("v"))
        if version is None:
            raise MalformedMessageError(f"body has no integer envelope version 'v' (got {data.get('v')!r})")
        if version not in SUPPORTED_VERSIONS:
            raise MalformedMessageError(
                f"unsupported envelope version {version}; this worker reads {sorted(SUPPORTED_VERSIONS)}"
            )
        job = data.get("job")
        if not isinstance(job, str) or not job:
            raise MalformedMessageError("body has no job name ('job' must be a non-empty string)")
        args = data.get("args", {})
        if not isinstance(args, dict):
            raise MalformedMessageError(f"'args' must be a JSON object, got {type(args).__name__}")
        _check_args(args)
        key = data.get("key")
        if key is not None and (not isinstance(key, str) or not key):
            raise MalformedMessageError("'key' must be a non-empty string when present")
        if key is not None:
            try:
                # The key is the table's partition key: DynamoDB takes UTF-8 only, so a key that
                # decodes to a lone surrogate ("\udc80") could never be claimed.
                key_bytes = len(key.encode("utf-8"))
            except UnicodeEncodeError:
                raise MalformedMessageError("'key' is not valid UTF-8 (it holds a lone surrogate)") from None
            if key_bytes > MAX_KEY_BYTES:
                raise MalformedMessageError(f"'key' is longer than {MAX_KEY_BYTES} bytes")
            if is_reserved(key):
                raise MalformedMessageError(f"'key' starts with a reserved prefix ({', '.join(RESERVED_PREFIXES)}): "
                                            "those keys belong to sqsjobs' own records")
        job_version = _integer(data.get("job_version", 1))
        if job_version is None or job_version < 1:
            raise MalformedMessageError(f"'job_version' must be a positive integer, got {data.get('job_version')!r}")
        enqueued_at = data.get("enqueued_at")
        if enqueued_at is not None and (isinstance(enqueued_at, bool) or not isinstance(enqueued_at, int | float)):
            raise MalformedMessageError("'enqueued_at' must be a number of epoch seconds")
        expires_in = data.get("expires_in")
        if expires_in is not None and (isinstance(expires_in, bool) or not isinstance(expires_in, int | float)
                                       or not expires_in > 0):
            raise MalformedMessageError("'expires_in' must be a positive number of seconds")
        member = _relation(data.get("member_of"), "member_of", "group", "shard", optional="index")
        step = _relation(data.get("step_of"), "step_of", "chain", "step")
        debounce = data.get("debounce")
        if debounce is not None and (not isinstance(debounce, str) or not RELATION_ID.fullmatch(debounce)):
            raise MalformedMessageError("'debounce' must be 1..64 letters, digits, '-' or '_'")
        callback = callback_from_wire(data.get("callback"))
        # A missing key is filled in by the consumer from the job's key template.
        return cls(job=job, key=key or "", args=args, job_version=job_version, enqueued_at=enqueued_at,
                   expires_in=expires_in, member_of=None if member is None else MemberOf(*member),
                   step_of=None if step is None else StepOf(*step), debounce=debounce, trace=_trace(data.get("trace")),
                   callback=callback, v=version)


def callback_from_wire(value: Any) -> CallbackTo | None:
    """``callback``: null, or an object of ``to`` and ``id`` (and ``heartbeat``)."""
    if value is None:
        return None
    if not isinstance(value, dict) or not {"to", "id"} <= set(value) <= {"to", "id", "heartbeat"}:
        raise MalformedMessageError("'callback' must be an object of exactly 'to' and 'id' (and 'heartbeat')")
    problem = callback_problem(value["to"], value["id"], value.get("heartbeat", False))
    if problem is not None:
        raise MalformedMessageError(f"'callback': {problem}")
    return CallbackTo(value["to"], value["id"], bool(value.get("heartbeat", False)))


def _relation(value: Any, name: str, id_name: str, index_name: str,
              optional: str | None = None) -> tuple[Any, ...] | None:
    """``member_of``/``step_of``: null, or an object of exactly an id and an index (and the ``optional`` one)."""
    if value is None:
        return None
    allowed = {id_name, index_name} | ({optional} if optional else set())
    if not isinstance(value, dict) or not {id_name, index_name} <= set(value) <= allowed:
        raise MalformedMessageError(f"'{name}' must be an object of exactly {id_name!r} and {index_name!r}"
                                    + (f" (and {optional!r})" if optional else ""))
    ident, index = value[id_name], _integer(value[index_name])
    if not isinstance(ident, str) or not RELATION_ID.fullmatch(ident):
        raise MalformedMessageError(f"'{name}.{id_name}' must be 1..64 letters, digits, '-' or '_'")
    if index is None or not 0 <= index <= MAX_INDEX:
        raise MalformedMessageError(f"'{name}.{index_name}' must be an integer within 0..{MAX_INDEX}")
    if optional is None:
        return ident, index
    extra = _integer(value[optional]) if optional in value else None
    if optional in value and (extra is None or not 0 <= extra <= MAX_MEMBER_INDEX):
        raise MalformedMessageError(f"'{name}.{optional}' must be an integer within 0..{MAX_MEMBER_INDEX}")
    return ident, index, extra


#: what a ``trace`` property may hold: W3C trace context's two headers, as short text
TRACE_NAMES = frozenset({"traceparent", "tracestate"})
MAX_TRACE_TEXT = 512


def _trace(value: Any) -> dict[str, str] | None:
    """The ``trace`` property when it is what a sender writes, else None: tracing never fails a message."""
    if not isinstance(value, dict) or not value or not set(value) <= TRACE_NAMES:
        return None
    if not all(isinstance(v, str) and 0 < len(v) <= MAX_TRACE_TEXT for v in value.values()):
        return None
    return dict(value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _integer(value: Any) -> int | None:
    """``value`` as an int when it is a JSON integer, else None.

    JSON (and JSON Schema's ``integer``) does not tell ``1`` from ``1.0``; some
    producers' serializers write the latter, so both are accepted. ``true`` is not.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


_SCALARS = (str, int, float, bool, type(None))


def _check_args(args: dict[str, Any]) -> None:
    """The wire rule for argument values: IDs and scalars, or flat lists of them (as the schema says)."""
    for name, value in args.items():
        if isinstance(value, list):
            if len(value) > MAX_LIST_ITEMS:
                raise MalformedMessageError(f"argument {name!r} has {len(value)} items; at most {MAX_LIST_ITEMS}")
            if not all(isinstance(item, _SCALARS) for item in value):
                raise MalformedMessageError(f"argument {name!r} must be a flat list of scalars")
        elif not isinstance(value, _SCALARS):
            raise MalformedMessageError(
                f"argument {name!r} is a JSON {'object' if isinstance(value, dict) else type(value).__name__}; "
                "arguments are IDs and scalars "
                "(string, number, boolean, null) or flat lists of them"
            )
