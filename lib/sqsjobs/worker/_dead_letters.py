"""Dead-lettering with a reason: what the worker writes to the DLQ.

A message goes to the DLQ with its original body and, as message attributes,
why it is there (docs/architecture.md lists them). Only after that send
succeeded does the worker acknowledge the source message and write the job's
record; a failed send leaves the message on its queue.

Attributes under ``sqsjobs.*`` are the worker's: on a letter it writes its own
and drops any other ``sqsjobs.*`` attribute the producer set. Only the job
name, the trace id and a well-formed redrive count are carried over.

The attributes are for people reading the raw DLQ; they prove nothing. SQS's
own move at ``maxReceiveCount`` keeps every attribute a sender set, so a letter
can carry a forged ``sqsjobs.reason``. The proof is **evidence**: once the DLQ
send succeeded, the worker writes :func:`evidence_of` under
``dlq#<the id SQS gave the DLQ copy>`` in the idempotency table (an id SQS makes
up, so nobody can write evidence for a letter in advance), and the DLQ reader
(``sqsjobs.ops._dlq_letters``) believes a letter's reason only through it. A
redrive's count is kept the same way: ``redrive#<the id SQS gave the message
sent back>`` (:func:`redrive_record`), never in the attribute.

Example:
    >>> letter = DeadLetter(message_id="m-1", body="{}", reason=Reason.PERMANENT, error_type="PermanentError",
    ...                     error_message="invoice 42 deleted", job="invoice-email", attempts=1,
    ...                     first_receive_time=0, source_queue="https://sqs/q", source_attributes={},
    ...                     key="invoice-email:42")
    >>> op = evidence_of(letter, "d-9", now=0.0, expires_at=100.0)
    >>> op.key, op.data["original_message_id"], op.data["reason"]
    ('dlq#d-9', 'm-1', 'permanent')
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import StoreError
from sqsjobs.enqueue._batching import entry_size
from sqsjobs.enqueue._envelope import DEFAULT_MESSAGE_BYTES
from sqsjobs.enqueue._message import ATTR_JOB, ATTR_TRACE_ID
from sqsjobs.store._lease_ops import Close

if TYPE_CHECKING:
    from collections.abc import Mapping

    from sqsjobs.store._lease import LeaseItem, LeaseStore
    from sqsjobs.store._lease_ops import FieldValue

ATTR_REASON = "sqsjobs.reason"
ATTR_ERROR_TYPE = "sqsjobs.error_type"
ATTR_ERROR_MESSAGE = "sqsjobs.error_message"
ATTR_ATTEMPTS = "sqsjobs.attempts"
ATTR_ORIGINAL_MESSAGE_ID = "sqsjobs.original_message_id"
ATTR_FIRST_RECEIVE_TIME = "sqsjobs.first_receive_time"
ATTR_SOURCE_QUEUE = "sqsjobs.source_queue"
ATTR_REDRIVE_COUNT = "sqsjobs.redrive_count"
#: the namespace only the worker writes
NAMESPACE = "sqsjobs."
#: the idempotency table's keys of a dead letter's evidence and of a redrive's count (reserved: store/_lease.py)
EVIDENCE_PREFIX = "dlq#"
REDRIVE_PREFIX = "redrive#"


class Reason(StrEnum):
    """Why a message is in the DLQ (the ``sqsjobs.reason`` attribute)."""

    PERMANENT = "permanent"  #: the job raised PermanentError (or an exception in ``permanent_on``)
    EXHAUSTED = "exhausted"  #: its last attempt failed
    MALFORMED = "malformed"  #: the body cannot be a job call
    LOST = "lost"  #: its last attempt never reported: a timeout, a crash or running out of memory
    KEY_CONFLICT = "key_conflict"  #: its key belongs to another job, or to other arguments
    CRASHED = "crashed"  #: ``on_crash="dead_letter"``: the previous run died mid-way
    RESULT_TOO_LARGE = "result_too_large"  #: ``store_result``: the return value is over 4 KiB as JSON
    RESULT_NOT_JSON = "result_not_json"  #: ``store_result``: the return value is not JSON


#: SQS refuses more than 10 attributes on a message, and one over the DLQ's MaximumMessageSize (the worker's
#: ``Settings.max_message_bytes``: the template gives the queues and the functions the same parameter).
MAX_ATTRIBUTES = 10
MAX_MESSAGE_BYTES = DEFAULT_MESSAGE_BYTES
MAX_ERROR_MESSAGE = 1000
#: registered job names are short, but a body may name anything
MAX_JOB_ATTRIBUTE = 256
#: the largest redrive count carried over; anything else is a forgery or garbage
MAX_REDRIVE_COUNT = 1_000_000
#: what SQS refuses in a string attribute value: control characters, lone surrogates, U+FFFE and U+FFFF
#: (written as what it refuses, not as the complement of what it takes: 10x cheaper to compile at a cold start)
_NOT_SQS_TEXT = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
#: attributes the worker writes on every dead-lettering
REASON_ATTRIBUTES = (
    ATTR_REASON,
    ATTR_ERROR_TYPE,
    ATTR_ERROR_MESSAGE,
    ATTR_ATTEMPTS,
    ATTR_ORIGINAL_MESSAGE_ID,
    ATTR_FIRST_RECEIVE_TIME,
    ATTR_SOURCE_QUEUE,
)


@dataclass(frozen=True, kw_only=True)
class DeadLetter:
    """Why one message is being dead-lettered.

    Example:
        >>> d = DeadLetter(message_id="m-1", body="{}", reason=Reason.PERMANENT, error_type="PermanentError",
        ...                error_message="invoice 42 deleted", job="invoice-email", attempts=1,
        ...                first_receive_time=0, source_queue="https://sqs/q",
        ...                source_attributes={"sqsjobs.source_queue": {"stringValue": "https://evil",
        ...                                                            "dataType": "String"}})
        >>> d.attributes()[ATTR_REASON]["StringValue"], d.attributes()[ATTR_SOURCE_QUEUE]["StringValue"]
        ('permanent', 'https://sqs/q')
    """

    message_id: str
    body: str
    reason: Reason
    error_type: str
    error_message: str
    job: str
    attempts: int
    first_receive_time: int
    source_queue: str
    #: the record's ``messageAttributes`` in the Lambda event's shape
    source_attributes: dict[str, Any]
    group_id: str | None = None
    #: the job key (None when the body could not be read as a job call)
    key: str | None = None

    def attributes(self, *, error_message_limit: int = MAX_ERROR_MESSAGE,
                   carry: bool = True) -> dict[str, dict[str, str]]:
        """The DLQ message's attributes: the worker's own first, then what the source may carry (10 at most)."""
        attrs: dict[str, dict[str, str]] = {
            ATTR_JOB: _string(self.job[:MAX_JOB_ATTRIBUTE]),
            ATTR_REASON: _string(self.reason.value),
            ATTR_ERROR_TYPE: _string(self.error_type),
            ATTR_ERROR_MESSAGE: _string(self.error_message[:error_message_limit] or "-"),
            ATTR_ATTEMPTS: {"DataType": "Number", "StringValue": str(self.attempts)},
            ATTR_ORIGINAL_MESSAGE_ID: _string(self.message_id),
            ATTR_FIRST_RECEIVE_TIME: {"DataType": "Number", "StringValue": str(self.first_receive_time)},
            ATTR_SOURCE_QUEUE: _string(self.source_queue),
        }
        if not carry:
            return attrs
        for name in sorted(self.source_attributes, key=lambda n: (n not in (ATTR_TRACE_ID, ATTR_REDRIVE_COUNT), n)):
            if len(attrs) >= MAX_ATTRIBUTES:
                break
            if name in attrs or (name.startswith(NAMESPACE) and name not in (ATTR_TRACE_ID, ATTR_REDRIVE_COUNT)):
                continue  # the worker's own names are never taken from the producer
            converted = sqs_attribute(self.source_attributes[name])
            if converted is not None and (name != ATTR_REDRIVE_COUNT or _redrive_count(converted) is not None):
                attrs[name] = converted
        return attrs

    def entry(self, entry_id: str, fifo: bool, *, max_bytes: int = MAX_MESSAGE_BYTES) -> dict[str, Any]:
        """A ``SendMessageBatch`` entry for the DLQ, shrunk (error text, carried attributes, then all) to ``max_bytes``.

        Example:
            >>> d = DeadLetter(message_id="m-1", body="x" * 261_500, reason=Reason.EXHAUSTED, error_type="E",
            ...                error_message="e" * 900, job="j", attempts=5, first_receive_time=0,
            ...                source_queue="https://sqs/q", source_attributes={})
            >>> len(d.entry("0", False)["MessageAttributes"][ATTR_ERROR_MESSAGE]["StringValue"])
            100
            >>> len(d.entry("0", False, max_bytes=1_048_576)["MessageAttributes"][ATTR_ERROR_MESSAGE]["StringValue"])
            900
        """
        entry: dict[str, Any] = {"Id": entry_id, "MessageBody": self.body or "(empty body)",
                                 "MessageAttributes": self.attributes()}
        for shrink in ({"error_message_limit": 100}, {"error_message_limit": 100, "carry": False}):
            if entry_size(entry) <= max_bytes:
                break
            entry["MessageAttributes"] = self.attributes(**shrink)  # type: ignore[arg-type]
        if entry_size(entry) > max_bytes:
            # A body at its queue's limit (a producer that left no room, enqueue/_sizes.py): the letter goes
            # without attributes; its evidence (dlq#<copy id>) still says the reason, as for every letter.
            entry["MessageAttributes"] = {}
        if fifo:
            entry["MessageGroupId"] = self.group_id or self.message_id
            # Deterministic: dead-lettering the same delivery twice stores it once.
            entry["MessageDeduplicationId"] = hashlib.sha256(f"dlq:{self.message_id}".encode()).hexdigest()
        return entry


@dataclass(frozen=True, kw_only=True)
class Evidence:
    """What the worker wrote when it dead-lettered a message: the truth behind a letter's reason attributes.

    Stored under ``dlq#<the DLQ copy's message id>``; :meth:`data` and
    :meth:`from_item` are the one place its fields are named.

    Example:
        >>> from sqsjobs.store._lease import LeaseItem, LeaseState
        >>> evidence = Evidence(original_message_id="m-1", job="a", key="a:1", reason=Reason.EXHAUSTED,
        ...                     error_type="TimeoutError", error_message="slow", attempts=3,
        ...                     source_queue="https://sqs/q", first_receive_time=1000)
        >>> Evidence.from_item(LeaseItem(key="dlq#d", state=LeaseState.DONE, data=evidence.data())) == evidence
        True
        >>> Evidence.from_item(LeaseItem(key="dlq#d", state=LeaseState.DONE, data={"reason": "forged"})) is None
        True
    """

    original_message_id: str
    job: str
    key: str | None
    reason: Reason
    error_type: str
    error_message: str
    attempts: int
    source_queue: str
    first_receive_time: int

    def data(self) -> dict[str, FieldValue]:
        """The item's fields (``sqsjobs.store._table.TableItem`` names them)."""
        return {"original_message_id": self.original_message_id, "job": self.job, "job_key": self.key,
                "reason": self.reason.value, "error_type": self.error_type, "error_message": self.error_message,
                "attempts_made": self.attempts, "source_queue": self.source_queue,
                "first_receive_time": self.first_receive_time}

    @classmethod
    def from_item(cls, item: LeaseItem) -> Evidence | None:
        """The evidence an item holds; None when it holds none that can be read (it proves nothing then)."""
        original, reason = item.get("original_message_id"), item.get("reason")
        if not isinstance(original, str) or not original or reason not in Reason.__members__.values():
            return None
        key = item.get("job_key")
        return cls(original_message_id=original, job=_text(item.get("job")) or "?",
                   key=key if isinstance(key, str) and key else None, reason=Reason(reason),
                   error_type=_text(item.get("error_type")), error_message=_text(item.get("error_message")),
                   attempts=_whole(item.get("attempts_made")), source_queue=_text(item.get("source_queue")),
                   first_receive_time=_whole(item.get("first_receive_time")))


def evidence_key(dlq_message_id: str) -> str:
    """The key of the evidence for the DLQ copy SQS gave ``dlq_message_id``.

    Example:
        >>> evidence_key("4f0c")
        'dlq#4f0c'
    """
    return f"{EVIDENCE_PREFIX}{dlq_message_id}"


def redrive_key(message_id: str) -> str:
    """The key of the redrive count of the message SQS gave ``message_id``.

    Example:
        >>> redrive_key("4f0c")
        'redrive#4f0c'
    """
    return f"{REDRIVE_PREFIX}{message_id}"


def evidence_of(letter: DeadLetter, dlq_message_id: str, *, now: float, expires_at: float) -> Close:
    """The write that proves the worker dead-lettered ``letter`` as the DLQ copy ``dlq_message_id``.

    A ``Close`` on a key nobody else writes (SQS made the id up a moment ago):
    it lives as long as job records do (``record_ttl``, longer than the DLQ's
    retention), so every letter in the DLQ can be checked.
    """
    evidence = Evidence(
        original_message_id=letter.message_id, job=_clean(letter.job[:MAX_JOB_ATTRIBUTE]), key=letter.key or None,
        reason=letter.reason, error_type=_clean(letter.error_type), error_message=_clean(
            letter.error_message[:MAX_ERROR_MESSAGE]), attempts=letter.attempts, source_queue=letter.source_queue,
        first_receive_time=letter.first_receive_time)
    return Close(key=evidence_key(dlq_message_id), now=now, expires_at=expires_at, data=evidence.data())


def redrive_record(message_id: str, *, count: int, redriven_from: str, job: str, now: float,
                   expires_at: float) -> Close:
    """The write that says the message SQS gave ``message_id`` was redriven ``count`` times.

    Example:
        >>> op = redrive_record("n-1", count=2, redriven_from="m-1", job="a", now=0.0, expires_at=9.0)
        >>> op.key, op.data["redrive_count"]
        ('redrive#n-1', 2)
    """
    return Close(key=redrive_key(message_id), now=now, expires_at=expires_at,
                 data={"redrive_count": count, "redriven_from": redriven_from, "job": _clean(job[:MAX_JOB_ATTRIBUTE])})


def redrive_count_of(item: LeaseItem | None) -> int | None:
    """The count a ``redrive#`` item holds: 0 without one, None when it holds garbage (poison-suspect).

    Example:
        >>> from sqsjobs.store._lease import LeaseItem, LeaseState
        >>> redrive_count_of(None), redrive_count_of(LeaseItem(key="redrive#n", state=LeaseState.DONE,
        ...                                                    data={"redrive_count": 2}))
        (0, 2)
    """
    if item is None:
        return 0
    count = item.get("redrive_count")
    whole = isinstance(count, int | float) and not isinstance(count, bool) and count == int(count)
    return int(count) if whole and 0 <= count <= MAX_REDRIVE_COUNT else None


def carry_redrive_counts(store: LeaseStore, resent: Mapping[str, str], *, now: float,
                         expires_at: float) -> list[str]:
    """Give each re-sent message its predecessor's redrive count (``resent``: old id -> the new id SQS gave it).

    The worker's re-send at the backstop makes a new message; without this
    a redriven message would start counting afresh and slip past the poison
    guard. One read for all (most have no count), one write per counted one.
    Returns what failed, as lines to log (never raises).
    """
    if not resent:
        return []
    try:
        found = store.get_many([redrive_key(old) for old in resent])
    except StoreError as error:
        return [f"could not read the redrive counts of re-sent messages: {error}"]
    writes = []
    for old, new in resent.items():
        item = found.get(redrive_key(old))
        count = redrive_count_of(item)
        if item is not None and count:
            writes.append(redrive_record(new, count=count, redriven_from=_text(item.get("redriven_from")) or old,
                                         job=_text(item.get("job")), now=now, expires_at=expires_at))
    return [f"could not carry the redrive count to {w.key}: {w.error or 'refused'}"
            for w in store.write_many(writes) if not w.ok]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _whole(value: Any) -> int:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else 0


def _clean(value: str) -> str:
    # Text decoded from a body may hold lone surrogates; DynamoDB takes only UTF-8.
    return _NOT_SQS_TEXT.sub("\ufffd", value)


def _string(value: str) -> dict[str, str]:
    # Values can carry text decoded from the body (an unknown job's name, an error quoting it). SQS
    # refuses the whole entry over one bad character, and a refused entry never reaches the DLQ.
    return {"DataType": "String", "StringValue": _NOT_SQS_TEXT.sub("\ufffd", value) or "-"}


def sqs_attribute(attr: Any) -> dict[str, str] | None:
    """Lambda's ``{"stringValue", "dataType"}`` shape → SQS's ``{"StringValue", "DataType"}`` (None: not sendable).

    Example:
        >>> sqs_attribute({"stringValue": "acme", "dataType": "String"}), sqs_attribute({"dataType": None})
        ({'DataType': 'String', 'StringValue': 'acme'}, None)
    """
    if not isinstance(attr, dict):
        return None
    data_type = attr.get("dataType") or attr.get("DataType")
    value = attr.get("stringValue", attr.get("StringValue"))
    if not isinstance(data_type, str) or not isinstance(value, str) or data_type.startswith("Binary"):
        return None
    return {"DataType": data_type, "StringValue": value}


def _redrive_count(attr: dict[str, str]) -> int | None:
    """A redrive count worth carrying: a whole number in 0..MAX_REDRIVE_COUNT, else None."""
    text = attr["StringValue"].strip()
    if not text.isdigit() or len(text) > 7:
        return None
    count = int(text)
    return count if count <= MAX_REDRIVE_COUNT else None
