"""What a DLQ message says, and what of it is true: the worker's evidence, read back for operators.

The worker proves each letter it writes with an evidence item in the
idempotency table (``dlq#<the DLQ copy's id>``, :mod:`sqsjobs.worker._dead_letters`),
and redrive counts each send-back there (``redrive#<the id SQS gave it>``).
``sqsjobs status``, ``sqsjobs redrive``, the console and the redrive Lambda
read letters through :class:`DlqMessage`, built with what the table says
(:mod:`sqsjobs.ops._dlq_evidence` looks it up). Redrive sends a message back with
:func:`resend_attributes` (the producer's attributes, no ``sqsjobs.*`` but the
producer's two, plus the redrive count for people reading raw SQS) and, on
FIFO queues, a fresh :func:`dedup_id`. This module never calls AWS.

A letter's :class:`Provenance` decides what is believed:

- ``worker``: its evidence exists. Reason, error, attempts, key, source queue
  and original message id come from the evidence, never from the attributes.
- ``unproven``: the table has no evidence for it: SQS's own move at
  ``maxReceiveCount`` (the backstop: SQS keeps the message id and every
  attribute a sender set), a forgery, or a worker whose evidence write
  failed. Its reason reads ``none``; every ``sqsjobs.*`` reason attribute on
  it is ignored and named in ``ignored_attributes``.
- ``unchecked``: there was no table to ask. The attributes' claims are shown,
  and renderers mark them unverified.

With a table the redrive count is the ``redrive#<original message id>`` item's
(0 without one); the ``sqsjobs.redrive_count`` attribute is read only for an
unchecked letter. Claims are parsed defensively: a counter or time that is not
a bounded whole number (``-1000000``, ``"1e999"``, ``"abc"``, ``NaN``) is a
malformed attribute, reported, never raised, and an unreadable count leaves
``redrive_count`` ``None``: poison-suspect, never a letter redriven 0 times.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from enum import StrEnum
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
    Evidence,
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
#: the reason of a letter without evidence: SQS's own redrive moved it, or nobody can say who wrote it
NO_REASON: Final = "none"
#: the attributes an unproven letter's claims are read from and then ignored (``sqsjobs.job`` names a job, no reason)
CLAIMED_ATTRIBUTES: Final = frozenset({*REASON_ATTRIBUTES, ATTR_REDRIVE_COUNT})
#: more redrives or attempts than this is not a count but a forgery
MAX_COUNT: Final = 1_000_000
#: epoch milliseconds up to the year 5138: anything later is not a time
MAX_EPOCH_MS: Final = 10**14
#: how much of a bad value a report line quotes
QUOTED_CHARS: Final = 40


class Provenance(StrEnum):
    """Who a letter's reason comes from (see the module docstring)."""

    WORKER = "worker"  #: its evidence item exists: the worker dead-lettered it, for the reason the evidence says
    UNPROVEN = "unproven"  #: the table holds no evidence for it: reason ``none``, its reason attributes ignored
    UNCHECKED = "unchecked"  #: no table was read: its attributes' claims, unverified


@dataclass(frozen=True, kw_only=True)
class TableFacts:
    """What the idempotency table says about one letter: its evidence (None: none) and its redrive count.

    ``redrive_count`` is the ``redrive#`` item's count for the letter's honest
    original message id (0 without one; None when the item is unreadable).
    """

    evidence: Evidence | None
    redrive_count: int | None = 0


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
    """One DLQ message as the operator sees it: which job, why, how old, and whether that is proven.

    ``message_id`` is the DLQ copy's own id: only actions on the letter use
    it. ``original_message_id`` is the one id shown everywhere: the message the
    worker dead-lettered, the id its logs and its job's record know.
    ``copy_of`` groups copies of one letter (an acknowledgement lost after the
    DLQ send, or SQS's move of a message the worker had already dead-lettered):
    the honest original id, so only evidence (or SQS's own id) ever groups
    letters. ``redrive_count`` is ``None`` when unreadable (``poison_suspect``);
    ``attempts`` is ``None`` when unknown. ``delivery_age_seconds`` is the time
    since the job's first delivery (the worker's first receive, else SQS's
    ``SentTimestamp``): how old its idempotency record can be.

    Example:
        >>> from sqsjobs.worker._dead_letters import Evidence, Reason
        >>> msg = {"MessageId": "d1", "Body": '{"v": 1, "job": "a"}', "Attributes": {"SentTimestamp": "1000"},
        ...        "MessageAttributes": {
        ...            "sqsjobs.reason": {"DataType": "String", "StringValue": "permanent"}}}

        Without evidence the claimed reason is ignored:

        >>> letter = DlqMessage.from_message(msg, now=61.0, facts=TableFacts(evidence=None))
        >>> (letter.reason, letter.provenance.value, letter.ignored_attributes, letter.original_message_id)
        ('none', 'unproven', ('sqsjobs.reason',), 'd1')

        With the worker's evidence, the evidence is the reason:

        >>> evidence = Evidence(original_message_id="m1", job="a", key="a:1", reason=Reason.EXHAUSTED,
        ...                     error_type="TimeoutError", error_message="slow", attempts=3,
        ...                     source_queue="https://sqs/q", first_receive_time=0)
        >>> letter = DlqMessage.from_message(msg, now=61.0, facts=TableFacts(evidence=evidence, redrive_count=1))
        >>> (letter.reason, letter.attempts, letter.redrive_count, letter.original_message_id, letter.age_seconds)
        ('exhausted', 3, 1, 'm1', 60.0)

        Without a table, the claims, unverified; a forged counter is reported:

        >>> msg["MessageAttributes"]["sqsjobs.redrive_count"] = {"DataType": "Number", "StringValue": "-1000000"}
        >>> letter = DlqMessage.from_message(msg, now=61.0)
        >>> letter.reason, letter.verified, letter.poison_suspect, [p.line() for p in letter.bad_attributes]
        ('permanent', False, True, ["sqsjobs.redrive_count '-1000000': not a whole number from 0 to 1000000"])
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
    original_message_id: str
    copy_of: str
    provenance: Provenance
    delivery_age_seconds: float | None = None
    bad_attributes: tuple[AttributeProblem, ...] = ()
    #: ``sqsjobs.*`` reason attributes not used: all of an unproven letter's (an unchecked one's without a reason)
    ignored_attributes: tuple[str, ...] = ()
    #: the job key (the evidence's; else the body's, None when it names none)
    key: str | None = None
    #: an unproven letter's ``sqsjobs.original_message_id`` attribute, never shown: a redrive that sent
    #: that message skips the letter (the worker's letter of a replay, read before its evidence is written)
    named_original_id: str | None = None

    @property
    def poison_suspect(self) -> bool:
        """True when the redrive count is unreadable: the poison guard treats it as at its limit."""
        return self.redrive_count is None

    @property
    def worker_written(self) -> bool:
        """True when the worker's evidence proves the letter (its reason is the worker's)."""
        return self.provenance is Provenance.WORKER

    @property
    def verified(self) -> bool:
        """True when the table was read for it: what it shows is proven (or ``none``), not claimed."""
        return self.provenance is not Provenance.UNCHECKED

    @classmethod
    def from_message(cls, message: MessageTypeDef, *, now: float, facts: TableFacts | None = None) -> DlqMessage:
        """Read one letter with what the table says of it (``facts``; None: no table was read); never raises."""
        attrs = message.get("MessageAttributes", {})
        body_job, body_key = _body_job_and_key(message.get("Body", ""))
        job = attribute_value(attrs, ATTR_JOB) or body_job or UNKNOWN_JOB
        sent_ms = _bounded(message.get("Attributes", {}).get("SentTimestamp"), MAX_EPOCH_MS)
        sent_at = sent_ms / 1000 if sent_ms is not None else None
        own_id = message.get("MessageId", "")
        age = max(0.0, now - sent_at) if sent_at is not None else None
        if facts is None:
            return cls._claimed(attrs, message_id=own_id, job=job, body_job=body_job, body_key=body_key, now=now,
                                sent_at=sent_at, age_seconds=age)
        evidence = facts.evidence
        if evidence is None:
            # No evidence: its reason is not the worker's (its attributes are ignored), or the worker sent it
            # and has not written the evidence yet (worker/_dead_letters.py sends first).
            return cls(message_id=own_id, job=job, reason=NO_REASON, error_type="", error_message="", attempts=None,
                       redrive_count=facts.redrive_count, source_queue=None, sent_at=sent_at, age_seconds=age,
                       malformed=body_job is None, original_message_id=own_id, copy_of=own_id,
                       named_original_id=_Reader(attrs).text(ATTR_ORIGINAL_MESSAGE_ID),
                       provenance=Provenance.UNPROVEN, key=body_key, delivery_age_seconds=_age(now, sent_at, None),
                       ignored_attributes=tuple(sorted(n for n in attrs if n in CLAIMED_ATTRIBUTES)))
        return cls(message_id=own_id, job=evidence.job, reason=evidence.reason.value,
                   error_type=evidence.error_type, error_message=evidence.error_message, attempts=evidence.attempts,
                   redrive_count=facts.redrive_count, source_queue=evidence.source_queue or None, sent_at=sent_at,
                   age_seconds=age, malformed=body_job is None or evidence.reason is Reason.MALFORMED,
                   original_message_id=evidence.original_message_id, copy_of=evidence.original_message_id,
                   provenance=Provenance.WORKER, key=evidence.key or body_key,
                   delivery_age_seconds=_age(now, sent_at, evidence.first_receive_time or None))

    @classmethod
    def _claimed(cls, attrs: Mapping[str, MessageAttributeValueOutputTypeDef], *, job: str, body_job: str | None,
                 body_key: str | None, now: float, message_id: str, sent_at: float | None,
                 age_seconds: float | None) -> DlqMessage:
        """An unchecked letter: what its attributes claim, parsed defensively (no table to prove them)."""
        reader = _Reader(attrs)
        reason = attribute_value(attrs, ATTR_REASON) or NO_REASON
        claims = reader if reason != NO_REASON else _Reader({})
        first_ms = claims.number(ATTR_FIRST_RECEIVE_TIME, MAX_EPOCH_MS)
        redrive_count = reader.number(ATTR_REDRIVE_COUNT, MAX_COUNT) if ATTR_REDRIVE_COUNT in attrs else 0
        return cls(message_id=message_id, job=job, reason=reason, error_type=claims.text(ATTR_ERROR_TYPE) or "",
                   error_message=claims.text(ATTR_ERROR_MESSAGE) or "",
                   attempts=claims.number(ATTR_ATTEMPTS, MAX_COUNT), redrive_count=redrive_count,
                   source_queue=claims.text(ATTR_SOURCE_QUEUE), sent_at=sent_at, age_seconds=age_seconds,
                   malformed=body_job is None or reason == Reason.MALFORMED,
                   original_message_id=claims.text(ATTR_ORIGINAL_MESSAGE_ID) or message_id,
                   copy_of=message_id,  # only evidence groups copies
                   provenance=Provenance.UNCHECKED, key=body_key,
                   delivery_age_seconds=_age(now, sent_at, first_ms),
                   bad_attributes=tuple(reader.problems),
                   # Not even a claimed reason: the rest is not read at all.
                   ignored_attributes=() if reason != NO_REASON else tuple(
                       sorted(n for n in attrs if n in STALE_REASON_ATTRIBUTES and n != ATTR_REASON)))


def ignored_line(letter: DlqMessage) -> str:
    """Why ``letter``'s ``ignored_attributes`` were not read: one line for a report or a note.

    Example:
        >>> msg = {"MessageId": "d1", "Body": "{}", "MessageAttributes": {
        ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "permanent"}}}
        >>> ignored_line(DlqMessage.from_message(msg, now=0.0, facts=TableFacts(evidence=None)))
        "ignored sqsjobs.reason: the idempotency table holds no evidence that the worker wrote this letter \
(SQS's own redrive moved it, or a sender set them)"
    """
    names = ", ".join(letter.ignored_attributes)
    if letter.provenance is Provenance.UNCHECKED:
        return (f"ignored {names}: the letter claims no sqsjobs.reason, so the worker did not write them "
                "(SQS's own redrive moved it)")
    return (f"ignored {names}: the idempotency table holds no evidence that the worker wrote this letter "
            "(SQS's own redrive moved it, or a sender set them)")


def _age(now: float, sent_at: float | None, first_receive_ms: int | None) -> float | None:
    """Seconds since the earlier of SQS's send time and the worker's first receive (None: neither known)."""
    starts = [t for t in (sent_at, first_receive_ms / 1000 if first_receive_ms is not None else None)
              if t is not None]
    return max(0.0, now - min(starts)) if starts else None


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


def dedup_id(message: MessageTypeDef, redrive_count: int, *, original_message_id: str | None = None) -> str:
    """A FIFO deduplication id for the ``redrive_count``-th redrive of ``message``.

    Deterministic, so a re-run that sends the same DLQ message again within
    SQS's 5-minute window is deduplicated by SQS itself; fresh, because the
    original id would be swallowed as a duplicate of the first delivery.
    ``original_message_id`` is the letter's honest original id
    (:attr:`DlqMessage.copy_of`), never an attribute's claim: a forged one could
    make SQS drop this send as a duplicate of another message's.

    Example:
        >>> dedup_id({"MessageId": "m1", "Attributes": {"MessageDeduplicationId": "k"}}, 1) == \\
        ...     dedup_id({"MessageId": "m2", "Attributes": {"MessageDeduplicationId": "k"}}, 1)
        True
    """
    original = (message.get("Attributes", {}).get("MessageDeduplicationId") or original_message_id
                or message.get("MessageId", ""))
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
