"""One SQS record of a batch, parsed, and what became of it.

Parsing never raises for a bad *body* (that is the record's own permanent
failure); it raises ``InvalidEventError`` only when the *event* itself is not
an SQS batch, since then no record can even be reported back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs.errors import InvalidEventError, MalformedMessageError
from sqsjobs.message import ATTR_TRACE_ID

if TYPE_CHECKING:
    from sqsjobs.dead_letter import DeadLetter
    from sqsjobs.envelope import Envelope
    from sqsjobs.job import Job


class Outcome(StrEnum):
    """What the worker did with a record.

    Example:
        >>> result.count(Outcome.DUPLICATE)  # doctest: +SKIP
        1
        >>> Outcome.RETRY.value
        'retry'
    """

    SUCCEEDED = "succeeded"  #: ran and completed: acknowledged
    DUPLICATE = "duplicate"  #: completed before (or earlier in this batch): acknowledged without running
    RETRY = "retry"  #: reported failed, visible again after ``delay``
    DEAD_LETTERED = "dead_lettered"  #: sent to the DLQ with its reason, then acknowledged
    UNSTARTED = "unstarted"  #: not started before the deadline: reported failed, visible at once
    GROUP_BLOCKED = "group_blocked"  #: FIFO: an earlier record of its group failed


ACKNOWLEDGED = frozenset({Outcome.SUCCEEDED, Outcome.DUPLICATE, Outcome.DEAD_LETTERED})


@dataclass(kw_only=True)
class Delivery:
    """A record of the batch and its fate.

    Example:
        >>> d = Delivery.parse({"messageId": "m-1", "receiptHandle": "r", "body": "{}",
        ...                     "attributes": {"ApproximateReceiveCount": "2"}}, 0)
        >>> d.attempt
        2
    """

    index: int
    message_id: str
    receipt_handle: str
    body: str | None
    attempt: int
    first_receive_ms: int
    group_id: str | None
    trace_id: str | None
    event_source_arn: str | None
    message_attributes: dict[str, Any]
    raw: dict[str, Any]
    envelope: Envelope | None = None
    job: Job[Any, Any] | None = None
    args: dict[str, Any] | None = None
    key: str = ""
    malformed: MalformedMessageError | None = None
    claimed: bool = False
    outcome: Outcome | None = None
    delay: float = 0.0
    error: BaseException | None = None
    duration_ms: float | None = None
    dead_letter: DeadLetter | None = None
    result: Any = None
    notes: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, record: Any, index: int) -> Delivery:
        """Read one Lambda SQS record; raises ``InvalidEventError`` if it is not one."""
        if not isinstance(record, dict):
            raise InvalidEventError(f"event record {index} is a {type(record).__name__}, not an SQS record")
        message_id = record.get("messageId")
        receipt = record.get("receiptHandle")
        if not isinstance(message_id, str) or not isinstance(receipt, str):
            raise InvalidEventError(
                f"event record {index} has no messageId/receiptHandle: is this an SQS event? "
                "(handle_batch takes the event Lambda's SQS event source mapping sends)"
            )
        attributes: dict[str, Any] = _dict(record.get("attributes"))
        message_attributes: dict[str, Any] = _dict(record.get("messageAttributes"))
        trace = message_attributes.get(ATTR_TRACE_ID)
        body = record.get("body")
        return cls(
            index=index,
            message_id=message_id,
            receipt_handle=receipt,
            body=body if isinstance(body, str) else None,
            attempt=_int(attributes.get("ApproximateReceiveCount"), 1),
            first_receive_ms=_int(attributes.get("ApproximateFirstReceiveTimestamp"), 0),
            group_id=attributes.get("MessageGroupId") if isinstance(attributes.get("MessageGroupId"), str) else None,
            trace_id=trace.get("stringValue") if isinstance(trace, dict) else None,
            event_source_arn=record.get("eventSourceARN") if isinstance(record.get("eventSourceARN"), str) else None,
            message_attributes=message_attributes,
            raw=record,
        )

    @property
    def job_name(self) -> str:
        """The job this record names, or ``?`` when its body names none."""
        if self.job is not None:
            return self.job.name
        if self.envelope is not None:
            return self.envelope.job
        return "?"

    @property
    def acknowledged(self) -> bool:
        """Whether the record leaves the queue (not reported in ``batchItemFailures``)."""
        return self.outcome in ACKNOWLEDGED


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True, kw_only=True)
class BatchResult:
    """What one batch did, record by record (tests and the demo read this).

    Example:
        >>> result = app.process_batch(event, context)  # doctest: +SKIP
        >>> result.response()  # doctest: +SKIP
        {'batchItemFailures': []}
    """

    deliveries: tuple[Delivery, ...]
    failures: tuple[str, ...]
    fence_lost: int
    store_errors: int

    def response(self) -> dict[str, list[dict[str, str]]]:
        """The partial batch response Lambda expects."""
        return {"batchItemFailures": [{"itemIdentifier": mid} for mid in self.failures]}

    def count(self, outcome: Outcome) -> int:
        """How many records ended with ``outcome``."""
        return sum(1 for d in self.deliveries if d.outcome is outcome)
