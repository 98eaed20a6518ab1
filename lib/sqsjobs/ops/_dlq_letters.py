"""What a DLQ message says: the worker's reason attributes, read back for operators.

The worker writes them (:mod:`sqsjobs.worker._dead_letters`); ``sqsjobs status`` and
``sqsjobs redrive`` read them through :class:`DlqMessage`, and redrive sends a
message back with :func:`resend_attributes` (the producer's attributes, no
``sqsjobs.*`` but the producer's two, plus one more redrive) and, on FIFO
queues, a fresh :func:`dedup_id`. This module never calls AWS.

Reading is defensive, because a DLQ holds whatever reached it:

- The reason attributes are trusted only on a letter that carries
  ``sqsjobs.reason``, i.e. one the worker wrote. A letter without it was moved
  by SQS's own redrive (the backstop) and its reason reads ``none``; any
  ``sqsjobs.*`` reason attribute it carries came from elsewhere and is ignored.
- Counters and times are parsed as bounded whole numbers. A value that is not
  one (``-1000000``, ``"1e999"``, ``"abc"``, ``NaN``, a huge number) is a
  malformed attribute: it is reported, never raised. An unreadable
  ``sqsjobs.redrive_count`` leaves ``redrive_count`` ``None``: the letter is
  poison-suspect, never a letter redriven 0 times.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import TYPE_CHECKING, Final

from sqsjobs._metrics import UNKNOWN_JOB
from sqsjobs.enqueue._message import ATTR_JOB, ATTR_TRACE_ID, RESERVED_PREFIX
from sqsjobs.worker._dead_letters import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_MESSAGE,
    ATTR_ERROR_TYPE,
    ATTR_FIRST_RECEIVE_TIME,
    ATTR_ORIGINAL_MESSAGE_ID,
    ATTR_REASON,
    ATTR_REDRIVE_COUNT,
    ATTR_SOURCE_QUEUE,
    MAX_ATTRIBUTES,
    REASON_ATTRIBUTES,
    Reason,
)

if TYPE_CHECKING:
    from collections.abc import Mapping

    from mypy_boto3_sqs.type_defs import (
        MessageAttributeValueOutputTypeDef,
        MessageAttributeValueTypeDef,
        MessageTypeDef,
    )

# The worker's side of the wire contract (docs/architecture.md): one definition, imported.
# The reason attributes are stale once the message goes back (the worker writes
# fresh ones if it fails again), and dropping them keeps the message under SQS's
# 10-attribute limit after the redrive count is added.
STALE_REASON_ATTRIBUTES: Final = frozenset(REASON_ATTRIBUTES)
MAX_MESSAGE_ATTRIBUTES: Final = MAX_ATTRIBUTES
#: the ``sqsjobs.*`` attributes a redriven message keeps: the producer's own two
PRODUCER_ATTRIBUTES: Final = frozenset({ATTR_JOB, ATTR_TRACE_ID})
#: the reason of a letter without ``sqsjobs.reason``: SQS's own redrive moved it
NO_REASON: Final = "none"
#: more redrives or attempts than this is not a count but a forgery
MAX_COUNT: Final = 1_000_000
#: epoch milliseconds up to the year 5138: anything later is not a time
MAX_EPOCH_MS: Final = 10**14
#: how much of a bad value a report line quotes
QUOTED_CHARS: Final = 40


@dataclass(frozen=True, kw_only=True)
class AttributeProblem:
    """One ``sqsjobs.*`` attribute of a letter that could not be read as what it should be.

    Example:
        >>> AttributeProblem(name="sqsjobs.redrive_count", value="1e999",
        ...                  problem="not a whole number from 0 to 1000000").line()
        "sqsjobs.redrive_count '1e999': not a whole number from 0 to 1000000"
    """

    name: str
    value: str
    problem: str

    def line(self) -> str:
        """One report line: the attribute, the value (cut short) and what is wrong with it."""
        shown = self.value if len(self.value) <= QUOTED_CHARS else self.value[:QUOTED_CHARS] + "..."
        return f"{self.name} {shown!r}: {self.problem}"


@dataclass(frozen=True, kw_only=True)
class DlqMessage:
    """One DLQ message as the operator sees it: which job, why, how old.

    ``redrive_count`` is ``None`` when the attribute is there but unreadable
    (``poison_suspect``); ``attempts`` is ``None`` when unknown.
    ``delivery_age_seconds`` is the time since the job's first delivery (the
    worker's first receive, else SQS's ``SentTimestamp``): how old its
    idempotency record can be.

    Example:
        >>> msg = {"MessageId": "m1", "Body": '{"v": 1, "job": "a"}',
        ...        "Attributes": {"SentTimestamp": "1000"},
        ...        "MessageAttributes": {
        ...            "sqsjobs.reason": {"DataType": "String", "StringValue": "permanent"}}}
        >>> letter = DlqMessage.from_message(msg, now=61.0)
        >>> (letter.job, letter.reason, letter.age_seconds, letter.malformed, letter.redrive_count)
        ('a', 'permanent', 60.0, False, 0)

        A forged counter is reported, and makes the letter poison-suspect:

        >>> msg["MessageAttributes"]["sqsjobs.redrive_count"] = {"DataType": "Number", "StringValue": "-1000000"}
        >>> letter = DlqMessage.from_message(msg, now=61.0)
        >>> letter.poison_suspect, [p.line() for p in letter.bad_attributes]
        (True, ["sqsjobs.redrive_count '-1000000': not a whole number from 0 to 1000000"])
    """

    message_id: str
    job: str
    reason: str
    error_type: str
    error_message: str
    attempts: int | None
    redrive_count: int | None
    source_queue: str | None
    sent_at: float | None
    age_seconds: float | None
    malformed: bool
    original_message_id: str | None = None
    delivery_age_seconds: float | None = None
    #: True when the worker wrote the reason attributes (the letter carries ``sqsjobs.reason``)
    worker_written: bool = False
    bad_attributes: tuple[AttributeProblem, ...] = ()
    #: ``sqsjobs.*`` reason attributes on a letter the worker did not write: not trusted, not used
    ignored_attributes: tuple[str, ...] = ()
    #: the job key the body names (None when it names none: the worker derives it from the job's template)
    key: str | None = None

    @property
    def poison_suspect(self) -> bool:
        """True when the redrive count is unreadable: the poison guard treats it as at its limit."""
        return self.redrive_count is None

    @classmethod
    def from_message(cls, message: MessageTypeDef, *, now: float) -> DlqMessage:
        """Read the worker's reason attributes, falling back to the body for the job name; never raises."""
        attrs = message.get("MessageAttributes", {})
        reader = _Reader(attrs)
        body_job, body_key = _body_job_and_key(message.get("Body", ""))
        reason_text = attribute_value(attrs, ATTR_REASON)
        worker_written = bool(reason_text)
        trusted = reader if worker_written else _Reader({})
        reason = reason_text if reason_text else NO_REASON
        job = attribute_value(attrs, ATTR_JOB) or body_job or UNKNOWN_JOB
        sent_ms = _bounded(message.get("Attributes", {}).get("SentTimestamp"), MAX_EPOCH_MS)
        sent_at = sent_ms / 1000 if sent_ms is not None else None
        first_ms = trusted.number(ATTR_FIRST_RECEIVE_TIME, MAX_EPOCH_MS)
        starts = [t for t in (sent_at, first_ms / 1000 if first_ms is not None else None) if t is not None]
        redrive_count = reader.number(ATTR_REDRIVE_COUNT, MAX_COUNT) if ATTR_REDRIVE_COUNT in attrs else 0
        return cls(
            message_id=message.get("MessageId", ""),
            job=job,
            reason=reason,
            error_type=trusted.text(ATTR_ERROR_TYPE) or "",
            error_message=trusted.text(ATTR_ERROR_MESSAGE) or "",
            attempts=trusted.number(ATTR_ATTEMPTS, MAX_COUNT),
            redrive_count=redrive_count,
            source_queue=trusted.text(ATTR_SOURCE_QUEUE),
            sent_at=sent_at,
            age_seconds=max(0.0, now - sent_at) if sent_at is not None else None,
            malformed=body_job is None or reason == Reason.MALFORMED,
            original_message_id=trusted.text(ATTR_ORIGINAL_MESSAGE_ID),
            key=body_key,
            delivery_age_seconds=max(0.0, now - min(starts)) if starts else None,
            worker_written=worker_written,
            bad_attributes=tuple(reader.problems),  # trusted is reader, or reads nothing
            ignored_attributes=() if worker_written else tuple(
                sorted(n for n in attrs if n in STALE_REASON_ATTRIBUTES and n != ATTR_REASON)
            ),
        )


class _Reader:
    """Reads attributes of one letter, recording each one it cannot read instead of raising."""

    def __init__(self, attrs: Mapping[str, MessageAttributeValueOutputTypeDef]) -> None:
        self.attrs = attrs
        self.problems: list[AttributeProblem] = []

    def text(self, name: str) -> str | None:
        if name not in self.attrs:
            return None
        value = attribute_value(self.attrs, name)
        if value is None:
            self.problems.append(AttributeProblem(name=name, value="", problem="not a string value"))
        return value

    def number(self, name: str, high: int) -> int | None:
        text = self.text(name)
        if text is None:
            return None
        value = _bounded(text, high)
        if value is None:
            self.problems.append(AttributeProblem(name=name, value=text,
                                                  problem=f"not a whole number from 0 to {high}"))
        return value


def resend_attributes(
    message: MessageTypeDef, *, redrive_count: int
) -> dict[str, MessageAttributeValueTypeDef]:
    """The attributes a redriven ``message`` carries: the producer's, its redrive count, nothing else of ours.

    Every ``sqsjobs.*`` attribute but the producer's two is dropped: the
    reason attributes are stale (the worker writes fresh ones if the job fails
    again) and any other one was not written by sqsjobs.

    Example:
        >>> msg = {"MessageId": "m", "Body": "{}", "MessageAttributes": {
        ...     "sqsjobs.job": {"DataType": "String", "StringValue": "a"},
        ...     "tenant": {"DataType": "String", "StringValue": "acme"},
        ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "exhausted"},
        ...     "sqsjobs.forged": {"DataType": "String", "StringValue": "x"}}}
        >>> sorted(resend_attributes(msg, redrive_count=1))
        ['sqsjobs.job', 'sqsjobs.redrive_count', 'tenant']
    """
    attrs: dict[str, MessageAttributeValueTypeDef] = {}
    for name, value in message.get("MessageAttributes", {}).items():
        if name.lower().startswith(RESERVED_PREFIX) and name not in PRODUCER_ATTRIBUTES:
            continue
        # Only the value fields: the *ListValues fields come back empty and
        # SQS rejects them on send ("reserved for future use").
        copy: MessageAttributeValueTypeDef = {"DataType": value["DataType"]}
        if "StringValue" in value:
            copy["StringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            copy["BinaryValue"] = value["BinaryValue"]
        attrs[name] = copy
    attrs[ATTR_REDRIVE_COUNT] = {"DataType": "Number", "StringValue": str(redrive_count)}
    return attrs


def dedup_id(message: MessageTypeDef, redrive_count: int) -> str:
    """A FIFO deduplication id for the ``redrive_count``-th redrive of ``message``.

    Deterministic, so a re-run that sends the same DLQ message again within
    SQS's 5-minute window is deduplicated by SQS itself; fresh, because the
    original id would be swallowed as a duplicate of the first delivery.

    Example:
        >>> dedup_id({"MessageId": "m1", "Attributes": {"MessageDeduplicationId": "k"}}, 1) == \\
        ...     dedup_id({"MessageId": "m2", "Attributes": {"MessageDeduplicationId": "k"}}, 1)
        True
    """
    attrs = message.get("MessageAttributes", {})
    # The worker's original id only when the worker wrote it: a forged one could make
    # SQS drop this send as a duplicate of another message's.
    trusted = attribute_value(attrs, ATTR_ORIGINAL_MESSAGE_ID) if attribute_value(attrs, ATTR_REASON) else None
    original = message.get("Attributes", {}).get("MessageDeduplicationId") or trusted or message.get("MessageId", "")
    return hashlib.sha256(f"{original}|redrive|{redrive_count}".encode()).hexdigest()


def attribute_value(attrs: Mapping[str, MessageAttributeValueOutputTypeDef], name: str) -> str | None:
    """The string value of message attribute ``name``, or None.

    Example:
        >>> attribute_value({"sqsjobs.job": {"DataType": "String", "StringValue": "a"}}, "sqsjobs.job")
        'a'
    """
    value = attrs.get(name)
    if not isinstance(value, dict):
        return None
    text = value.get("StringValue")
    return text if isinstance(text, str) else None


def _bounded(text: str | None, high: int) -> int | None:
    """``text`` as a whole number from 0 to ``high``, else None (never raises).

    Example:
        >>> [_bounded(t, 10) for t in ("3", "3.0", " 4 ", "3.5", "-1", "11", "1e999", "NaN", "abc", None)]
        [3, 3, 4, None, None, None, None, None, None, None]
    """
    if text is None or len(text) > 64:
        return None
    try:
        number = Decimal(text)
    except (InvalidOperation, ValueError):
        return None
    # Finite first: comparing a signalling NaN raises. Range before int(): 1e999 stays a Decimal.
    if not number.is_finite() or not 0 <= number <= high or number != number.to_integral_value():
        return None
    return int(number)


def _body_job_and_key(body: str) -> tuple[str | None, str | None]:
    """The job and key an envelope body names (each None when the body does not name one)."""
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(data, dict):
        return None, None
    job, key = data.get("job"), data.get("key")
    return (job if isinstance(job, str) and job else None), (key if isinstance(key, str) and key else None)
