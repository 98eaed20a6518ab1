"""What a DLQ message says: the worker's reason attributes, read back for operators.

The worker writes them (:mod:`sqsjobs.dead_letter`); ``sqsjobs status`` and
``sqsjobs redrive`` read them through :class:`DlqMessage`, and redrive sends a
message back with :func:`resend_attributes` (the producer's attributes, minus
the stale reasons, plus one more redrive) and, on FIFO queues, a fresh
:func:`dedup_id`. This module never calls AWS.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqsjobs.dead_letter import (
    ATTR_ATTEMPTS,
    ATTR_ERROR_MESSAGE,
    ATTR_ERROR_TYPE,
    ATTR_ORIGINAL_MESSAGE_ID,
    ATTR_REASON,
    ATTR_REDRIVE_COUNT,
    ATTR_SOURCE_QUEUE,
    MAX_ATTRIBUTES,
    REASON_ATTRIBUTES,
    Reason,
)
from sqsjobs.message import ATTR_JOB
from sqsjobs.metrics import UNKNOWN_JOB

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


@dataclass(frozen=True, kw_only=True)
class DlqMessage:
    """One DLQ message as the operator sees it: which job, why, how old.

    Example:
        >>> msg = {"MessageId": "m1", "Body": '{"v": 1, "job": "a"}',
        ...        "Attributes": {"SentTimestamp": "1000"},
        ...        "MessageAttributes": {
        ...            "sqsjobs.reason": {"DataType": "String", "StringValue": "permanent"}}}
        >>> letter = DlqMessage.from_message(msg, now=61.0)
        >>> (letter.job, letter.reason, letter.age_seconds, letter.malformed)
        ('a', 'permanent', 60.0, False)
    """

    message_id: str
    job: str
    reason: str
    error_type: str
    error_message: str
    attempts: int | None
    redrive_count: int
    source_queue: str | None
    sent_at: float | None
    age_seconds: float | None
    malformed: bool
    original_message_id: str | None = None

    @classmethod
    def from_message(cls, message: MessageTypeDef, *, now: float) -> DlqMessage:
        """Read the worker's reason attributes, falling back to the body for the job name."""
        attrs = message.get("MessageAttributes", {})
        body_job = _body_job(message.get("Body", ""))
        reason = attribute_value(attrs, ATTR_REASON) or "unknown"
        job = attribute_value(attrs, ATTR_JOB) or body_job or UNKNOWN_JOB
        sent_ms = _int(message.get("Attributes", {}).get("SentTimestamp"))
        sent_at = sent_ms / 1000 if sent_ms is not None else None
        return cls(
            message_id=message.get("MessageId", ""),
            job=job,
            reason=reason,
            error_type=attribute_value(attrs, ATTR_ERROR_TYPE) or "",
            error_message=attribute_value(attrs, ATTR_ERROR_MESSAGE) or "",
            attempts=_int(attribute_value(attrs, ATTR_ATTEMPTS)),
            redrive_count=_int(attribute_value(attrs, ATTR_REDRIVE_COUNT)) or 0,
            source_queue=attribute_value(attrs, ATTR_SOURCE_QUEUE),
            sent_at=sent_at,
            age_seconds=max(0.0, now - sent_at) if sent_at is not None else None,
            malformed=body_job is None or reason == Reason.MALFORMED,
            original_message_id=attribute_value(attrs, ATTR_ORIGINAL_MESSAGE_ID),
        )


def resend_attributes(message: MessageTypeDef, letter: DlqMessage) -> dict[str, MessageAttributeValueTypeDef]:
    """The attributes a redriven ``message`` carries: the producer's, no stale reasons, one more redrive.

    Example:
        >>> msg = {"MessageId": "m", "Body": "{}", "MessageAttributes": {
        ...     "sqsjobs.job": {"DataType": "String", "StringValue": "a"},
        ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "exhausted"}}}
        >>> sorted(resend_attributes(msg, DlqMessage.from_message(msg, now=0.0)))
        ['sqsjobs.job', 'sqsjobs.redrive_count']
    """
    attrs: dict[str, MessageAttributeValueTypeDef] = {}
    for name, value in message.get("MessageAttributes", {}).items():
        if name in STALE_REASON_ATTRIBUTES or name == ATTR_REDRIVE_COUNT:
            continue
        # Only the value fields: the *ListValues fields come back empty and
        # SQS rejects them on send ("reserved for future use").
        copy: MessageAttributeValueTypeDef = {"DataType": value["DataType"]}
        if "StringValue" in value:
            copy["StringValue"] = value["StringValue"]
        if "BinaryValue" in value:
            copy["BinaryValue"] = value["BinaryValue"]
        attrs[name] = copy
    attrs[ATTR_REDRIVE_COUNT] = {"DataType": "Number", "StringValue": str(letter.redrive_count + 1)}
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
    original = (
        message.get("Attributes", {}).get("MessageDeduplicationId")
        or attribute_value(message.get("MessageAttributes", {}), ATTR_ORIGINAL_MESSAGE_ID)
        or message.get("MessageId", "")
    )
    return hashlib.sha256(f"{original}|redrive|{redrive_count}".encode()).hexdigest()


def attribute_value(attrs: Mapping[str, MessageAttributeValueOutputTypeDef], name: str) -> str | None:
    """The string value of message attribute ``name``, or None.

    Example:
        >>> attribute_value({"sqsjobs.job": {"DataType": "String", "StringValue": "a"}}, "sqsjobs.job")
        'a'
    """
    value = attrs.get(name)
    return value.get("StringValue") if value is not None else None


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(float(value))
    except ValueError:
        return None


def _body_job(body: str) -> str | None:
    """The job named by an envelope body, or None when the body is not one."""
    try:
        data = json.loads(body)
    except ValueError:
        return None
    job = data.get("job") if isinstance(data, dict) else None
    return job if isinstance(job, str) and job else None
