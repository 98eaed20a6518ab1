"""Dead-lettering with a reason: what the worker writes to the DLQ.

A message goes to the DLQ with its original body and, as message attributes,
why it is there (see docs/architecture.md). Only after that send succeeded
does the worker acknowledge the source message; a failed send leaves the
message on the queue, where the queue's own redrive policy still catches it.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from sqsjobs.message import ATTR_JOB, ATTR_TRACE_ID

ATTR_REASON = "sqsjobs.reason"
ATTR_ERROR_TYPE = "sqsjobs.error_type"
ATTR_ERROR_MESSAGE = "sqsjobs.error_message"
ATTR_ATTEMPTS = "sqsjobs.attempts"
ATTR_ORIGINAL_MESSAGE_ID = "sqsjobs.original_message_id"
ATTR_FIRST_RECEIVE_TIME = "sqsjobs.first_receive_time"
ATTR_SOURCE_QUEUE = "sqsjobs.source_queue"
ATTR_REDRIVE_COUNT = "sqsjobs.redrive_count"

REASON_PERMANENT = "permanent"
REASON_EXHAUSTED = "exhausted"
REASON_MALFORMED = "malformed"

#: SQS refuses more than 10 attributes on a message.
MAX_ATTRIBUTES = 10
MAX_ERROR_MESSAGE = 1000
#: registered job names are at most 128 characters, but a body may name anything
MAX_JOB_ATTRIBUTE = 256
#: what SQS refuses in a string attribute value: control characters and lone surrogates
_NOT_SQS_TEXT = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: attributes the worker rewrites on every dead-lettering (stale ones are dropped)
REASON_ATTRIBUTES = (
    ATTR_REASON,
    ATTR_ERROR_TYPE,
    ATTR_ERROR_MESSAGE,
    ATTR_ATTEMPTS,
    ATTR_ORIGINAL_MESSAGE_ID,
    ATTR_FIRST_RECEIVE_TIME,
    ATTR_SOURCE_QUEUE,
)
#: carried over from the source message first, before any user attribute
_KEEP_FIRST = (ATTR_JOB, ATTR_TRACE_ID, ATTR_REDRIVE_COUNT)


@dataclass(frozen=True, kw_only=True)
class DeadLetter:
    """Why one message is being dead-lettered.

    Example:
        >>> d = DeadLetter(message_id="m-1", body="{}", reason=REASON_PERMANENT, error_type="PermanentError",
        ...                error_message="invoice 42 deleted", job="invoice-email", attempts=1,
        ...                first_receive_time=0, source_queue="https://sqs/q", source_attributes={})
        >>> d.attributes()[ATTR_REASON]["StringValue"]
        'permanent'
    """

    message_id: str
    body: str
    reason: str
    error_type: str
    error_message: str
    job: str
    attempts: int
    first_receive_time: int
    source_queue: str
    #: the record's ``messageAttributes`` in the Lambda event's shape
    source_attributes: dict[str, Any]
    group_id: str | None = None

    def attributes(self) -> dict[str, dict[str, str]]:
        """The DLQ message's attributes: reason first, then what the source carried (max 10)."""
        attrs: dict[str, dict[str, str]] = {
            ATTR_JOB: _string(self.job[:MAX_JOB_ATTRIBUTE]),
            ATTR_REASON: _string(self.reason),
            ATTR_ERROR_TYPE: _string(self.error_type),
            ATTR_ERROR_MESSAGE: _string(self.error_message[:MAX_ERROR_MESSAGE] or "-"),
            ATTR_ATTEMPTS: {"DataType": "Number", "StringValue": str(self.attempts)},
            ATTR_ORIGINAL_MESSAGE_ID: _string(self.message_id),
            ATTR_FIRST_RECEIVE_TIME: {"DataType": "Number", "StringValue": str(self.first_receive_time)},
            ATTR_SOURCE_QUEUE: _string(self.source_queue),
        }
        carried = sorted(self.source_attributes, key=lambda n: (n not in _KEEP_FIRST, n))
        for name in carried:
            if len(attrs) >= MAX_ATTRIBUTES:
                break
            if name in attrs or name in REASON_ATTRIBUTES:
                continue
            converted = _from_event_attribute(self.source_attributes[name])
            if converted is not None:
                attrs[name] = converted
        return attrs

    def entry(self, entry_id: str, fifo: bool) -> dict[str, Any]:
        """A ``SendMessageBatch`` entry for the DLQ."""
        entry: dict[str, Any] = {"Id": entry_id, "MessageBody": self.body or "(empty body)",
                                 "MessageAttributes": self.attributes()}
        if fifo:
            entry["MessageGroupId"] = self.group_id or self.message_id
            # Deterministic: dead-lettering the same delivery twice stores it once.
            entry["MessageDeduplicationId"] = hashlib.sha256(f"dlq:{self.message_id}".encode()).hexdigest()
        return entry


def _string(value: str) -> dict[str, str]:
    # Values can carry text decoded from the body (an unknown job's name, an error quoting it). SQS
    # refuses the whole entry over one bad character, and a refused entry never reaches the DLQ.
    return {"DataType": "String", "StringValue": _NOT_SQS_TEXT.sub("\ufffd", value) or "-"}


def _from_event_attribute(attr: Any) -> dict[str, str] | None:
    """Lambda's ``{"stringValue", "dataType"}`` shape → SQS's ``{"StringValue", "DataType"}``."""
    if not isinstance(attr, dict):
        return None
    data_type = attr.get("dataType") or attr.get("DataType")
    value = attr.get("stringValue", attr.get("StringValue"))
    if not isinstance(data_type, str) or not isinstance(value, str) or data_type.startswith("Binary"):
        return None
    return {"DataType": data_type, "StringValue": value}
