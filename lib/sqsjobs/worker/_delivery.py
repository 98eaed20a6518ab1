"""One SQS record of a batch, and the states it moves through.

::

    RECEIVED ──decoded──▶ DECODED ──claimed──▶ CLAIMED
       │                    │  │                 │ │ │
       │ malformed          │  │ duplicate,      │ │ └── succeeded ──────────────▶ TO_ACK ──▶ ACKED
       │                    │  │ cancelled,      │ │                                 ▲
       │                    │  │ expired ────────┼─┼─────────────────────────────────┘
       │                    │  │                 │ └──── retry, not started, deferred,
       │                    │  └─ busy, blocked, ┼────── FIFO-blocked ───────────▶ TO_RETURN ──▶ RETURNED
       │                    │     deferred       │
       │                    │                    │                                 │     ▲
       ▼                    ▼                    ▼                                 │     │
    TO_DEAD_LETTER ◀── key_conflict ◀── permanent, exhausted, lost ...             │  (send failed)
       │    └── DLQ send failed ──▶ TO_RETURN              at the backstop receive ▼     │
       └── DLQ send succeeded ──▶ ACKED                            TO_RESEND ──sent──▶ ACKED
                                                                                   │     │
                    a retry longer than SQS can hold back (12 h; 900 s at the      ▼     │
                    backstop) ─────────────────────────────────────────▶ TO_SCHEDULE ─(failed)
                                                                       └─ schedule created ──▶ ACKED

A delivery about to be acknowledged may be *withheld* (``TO_ACK → TO_RETURN``,
its outcome kept) when what must follow it was not written: its group's count
or callback, its chain's next step (``sqsjobs.workflows._stage``).

A delivery changes state only through the transition methods below; each
checks where the delivery is and raises ``IllegalTransition`` otherwise, so
an outcome can never be overwritten by a later pass of the consumer.

Parsing never raises for a bad *body* (that is the record's own permanent
failure); it raises ``InvalidEventError`` only when the *event* is not an SQS
batch, since then no record can even be reported back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import InvalidEventError
from sqsjobs.enqueue._message import ATTR_TRACE_ID

if TYPE_CHECKING:
    from sqsjobs._job import Job
    from sqsjobs.enqueue._envelope import Envelope
    from sqsjobs.store._lease import LeaseItem
    from sqsjobs.worker._dead_letters import Reason


class State(StrEnum):
    """Where a delivery is in its batch."""

    RECEIVED = "received"  #: parsed from the event
    DECODED = "decoded"  #: its job, arguments and key are known
    CLAIMED = "claimed"  #: this invocation holds the key's lease: the job may run
    TO_ACK = "to_ack"  #: will leave the queue
    TO_DEAD_LETTER = "to_dead_letter"  #: goes to the DLQ with its reason, then leaves the queue
    TO_RETURN = "to_return"  #: goes back to the queue, visible again after ``delay``
    TO_RESEND = "to_resend"  #: re-sent as a fresh message (SQS's redrive would move it), then leaves
    #: re-sent later by a one-time schedule (its retry delay is longer than SQS can hold it back), then leaves
    TO_SCHEDULE = "to_schedule"
    ACKED = "acked"  #: left the queue (final)
    RETURNED = "returned"  #: reported in ``batchItemFailures`` (final)


#: the legal moves; anything else is a bug in the consumer
TRANSITIONS: dict[State, frozenset[State]] = {
    State.RECEIVED: frozenset({State.DECODED, State.TO_DEAD_LETTER, State.TO_RETURN}),
    State.DECODED: frozenset({State.CLAIMED, State.TO_ACK, State.TO_RETURN, State.TO_DEAD_LETTER}),
    State.CLAIMED: frozenset({State.TO_ACK, State.TO_RETURN, State.TO_DEAD_LETTER}),
    State.TO_ACK: frozenset({State.ACKED, State.TO_RETURN}),
    State.TO_DEAD_LETTER: frozenset({State.ACKED, State.TO_RETURN}),
    State.TO_RETURN: frozenset({State.TO_RESEND, State.TO_SCHEDULE, State.RETURNED}),
    State.TO_RESEND: frozenset({State.ACKED, State.RETURNED}),
    State.TO_SCHEDULE: frozenset({State.ACKED, State.RETURNED}),
    State.ACKED: frozenset(),
    State.RETURNED: frozenset(),
}


class Outcome(StrEnum):
    """What the worker did with a record.

    Example:
        >>> Outcome.RETRY.value
        'retry'
    """

    SUCCEEDED = "succeeded"  #: ran and completed: acknowledged
    DUPLICATE = "duplicate"  #: completed before (or earlier in this batch): acknowledged without running
    CANCELLED = "cancelled"  #: its key was cancelled: acknowledged without running
    EXPIRED = "expired"  #: older than its ``expires_in``: acknowledged without running
    RETRY = "retry"  #: reported failed, visible again after ``delay``
    DEAD_LETTERED = "dead_lettered"  #: sent to the DLQ with its reason, then acknowledged
    UNSTARTED = "unstarted"  #: not started (the deadline, a lease held elsewhere): back at once, no attempt used
    GROUP_BLOCKED = "group_blocked"  #: FIFO: an earlier record of its group failed
    DEFERRED = "deferred"  #: over a limiter (docs/flow-control.md): back at its next window, no attempt used


#: outcomes that leave the queue at once
ACKNOWLEDGED_OUTCOMES = frozenset({Outcome.SUCCEEDED, Outcome.DUPLICATE, Outcome.CANCELLED, Outcome.EXPIRED})
#: outcomes that go back to the queue
RETURNED_OUTCOMES = frozenset({Outcome.RETRY, Outcome.UNSTARTED, Outcome.GROUP_BLOCKED, Outcome.DEFERRED})


#: a receive count beyond any queue's maxReceiveCount (1000) is garbage: it is read as this
MAX_RECEIVE_COUNT = 1_000_000


class IllegalTransition(RuntimeError):
    """Raised when the consumer moves a delivery where it cannot go (a bug, never a record's fault)."""


@dataclass(kw_only=True)
class Delivery:
    """A record of the batch and its fate; only the transition methods change its state.

    Example:
        >>> d = Delivery.parse({"messageId": "m-1", "receiptHandle": "r", "body": "{}",
        ...                     "attributes": {"ApproximateReceiveCount": "2"}}, 0)
        >>> d.receive_count, d.state.value
        (2, 'received')
        >>> d.to_ack(Outcome.SUCCEEDED)
        Traceback (most recent call last):
        ...
        sqsjobs.worker._delivery.IllegalTransition: m-1: received -> to_ack is not a legal move
    """

    # -- the record as received (never changed)
    index: int
    message_id: str
    receipt_handle: str
    body: str | None
    #: SQS's ApproximateReceiveCount: how often this message was received (not how often it ran)
    receive_count: int
    first_receive_ms: int
    sent_ms: int
    #: a FIFO queue's MessageGroupId (order within the group holds)
    group_id: str | None
    trace_id: str | None
    event_source_arn: str | None
    message_attributes: dict[str, Any]
    raw: dict[str, Any]
    #: a standard queue's MessageGroupId: the tenant the message was enqueued for (SQS fair queues)
    tenant: str | None = None
    # -- decoded
    envelope: Envelope | None = None
    job: Job[Any, Any] | None = None
    args: dict[str, Any] | None = None
    key: str = ""
    # -- claimed
    #: the attempt this delivery runs (1 = first): attempts that *started*, from the job's record
    attempt: int = 0
    #: the previous holder's lease ran out without a word: that run died (timeout, crash, out of memory)
    took_over: bool = False
    #: the key's record as the claim found it (None: no record)
    previous: LeaseItem | None = None
    #: this invocation claimed the key: its record must be written before the batch ends
    holds_lease: bool = False
    # -- what became of it
    state: State = State.RECEIVED
    outcome: Outcome | None = None
    reason: Reason | None = None
    delay: float = 0.0
    error: BaseException | None = None
    duration_ms: float | None = None
    result: Any = None
    #: the one-time schedule that re-sends it at ``delay`` (a retry longer than SQS can hold back)
    schedule_name: str | None = None
    #: the limiter that deferred it (``Outcome.DEFERRED``)
    deferred_by: str | None = None
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
        group = attributes.get("MessageGroupId")
        arn = record.get("eventSourceARN")
        group = group if isinstance(group, str) else None
        # A standard queue's group id is a tenant (fair queues), not an order to keep.
        fifo = arn.endswith(".fifo") if isinstance(arn, str) else group is not None
        return cls(
            index=index,
            message_id=message_id,
            receipt_handle=receipt,
            body=body if isinstance(body, str) else None,
            receive_count=min(max(_int(attributes.get("ApproximateReceiveCount"), 1), 1), MAX_RECEIVE_COUNT),
            first_receive_ms=_int(attributes.get("ApproximateFirstReceiveTimestamp"), 0),
            sent_ms=_int(attributes.get("SentTimestamp"), 0),
            group_id=group if fifo else None,
            trace_id=trace.get("stringValue") if isinstance(trace, dict) else None,
            event_source_arn=arn if isinstance(arn, str) else None,
            message_attributes=message_attributes,
            raw=record,
            tenant=None if fifo else group,
        )

    # ------------------------------------------------------------ transitions
    def decoded(self, *, envelope: Envelope, job: Job[Any, Any], args: dict[str, Any], key: str) -> None:
        """The body is a call of a registered job."""
        self._move(State.DECODED)
        self.envelope, self.job, self.args, self.key = envelope, job, args, key

    def claimed(self, *, attempt: int, took_over: bool, previous: LeaseItem | None) -> None:
        """This invocation holds the key's lease; the job may run as attempt ``attempt``."""
        self._move(State.CLAIMED)
        self.attempt, self.took_over, self.previous, self.holds_lease = attempt, took_over, previous, True

    def to_ack(self, outcome: Outcome, *, result: Any = None) -> None:
        """It leaves the queue: succeeded, a duplicate, cancelled or expired."""
        if outcome not in ACKNOWLEDGED_OUTCOMES:
            raise IllegalTransition(f"{self.message_id}: {outcome.value} is not an outcome that is acknowledged")
        self._move(State.TO_ACK)
        self.outcome, self.result = outcome, result

    def to_return(self, outcome: Outcome, *, delay: float, error: BaseException | None = None) -> None:
        """It goes back to the queue for ``delay`` seconds."""
        if outcome not in RETURNED_OUTCOMES:
            raise IllegalTransition(f"{self.message_id}: {outcome.value} is not an outcome that is returned")
        self._move(State.TO_RETURN)
        self.outcome, self.delay = outcome, delay
        if error is not None:
            self.error = error

    def deferred(self, limiter: str, *, delay: float) -> None:
        """Over ``limiter``: back to the queue for ``delay`` seconds (its next window), no attempt used.

        Only before the job runs: a delivery already decided (``to_ack`` may go back to the queue when
        its group's count fails, but never as a deferral) cannot be deferred.
        """
        if self.state not in (State.DECODED, State.CLAIMED):
            raise IllegalTransition(f"{self.message_id}: {self.state.value} -> {State.TO_RETURN.value} is not a "
                                    "legal move (a deferral comes before the job runs)")
        self._move(State.TO_RETURN)
        self.outcome, self.delay, self.deferred_by = Outcome.DEFERRED, delay, limiter

    def to_dead_letter(self, reason: Reason, error: BaseException) -> None:
        """It goes to the DLQ with ``reason`` (acknowledged once the DLQ has it)."""
        self._move(State.TO_DEAD_LETTER)
        self.reason, self.error = reason, error

    def dead_letter_failed(self, why: str, *, delay: float) -> None:
        """The DLQ did not take it: back to the queue, to be dead-lettered on a later receive."""
        self._move(State.TO_RETURN)
        self.outcome, self.delay = Outcome.RETRY, delay
        self.notes.append(f"DLQ send failed: {why}")

    def withhold(self, why: str, *, delay: float) -> None:
        """It is done, but what must follow it (its group's count or callback, its chain's next step) was not
        written: back to the queue with its outcome kept, so its redelivery, a duplicate, does it."""
        self._move(State.TO_RETURN)
        self.delay = delay
        self.notes.append(f"acknowledgement withheld: {why}")

    def to_resend(self) -> None:
        """Returning it would let SQS's redrive move it without a reason: send a fresh copy instead."""
        self._move(State.TO_RESEND)

    def to_schedule(self, name: str) -> None:
        """SQS cannot hold it back for its ``delay``: schedule ``name`` re-sends it then (the attempt is not used)."""
        self._move(State.TO_SCHEDULE)
        self.schedule_name = name

    def finished(self, *, sent: bool = True, why: str = "") -> None:
        """The batch is over for it: acknowledged, dead-lettered, re-sent, scheduled, or returned."""
        if self.state is State.TO_RETURN:
            self._move(State.RETURNED)
        elif self.state in (State.TO_RESEND, State.TO_SCHEDULE):
            what = "re-send" if self.state is State.TO_RESEND else "schedule"
            self._move(State.ACKED if sent else State.RETURNED)
            if not sent:
                self.notes.append(f"{what} failed: {why}")
        elif self.state is State.TO_DEAD_LETTER:
            self._move(State.ACKED)
            self.outcome = Outcome.DEAD_LETTERED
        else:
            self._move(State.ACKED)

    def _move(self, to: State) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"{self.message_id}: {self.state.value} -> {to.value} is not a legal move")
        self.state = to

    # ------------------------------------------------------------ reading
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
        """Whether the record leaves the queue (is not reported in ``batchItemFailures``)."""
        return self.state is State.ACKED


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _int(value: Any, default: int) -> int:
    try:
        return int(value)
    except (TypeError, ValueError, OverflowError):
        return default


@dataclass(frozen=True, kw_only=True)
class BatchResult:
    """What one batch did, record by record (tests and the demo read this).

    Example:
        >>> BatchResult(deliveries=(), failures=("m-1",), fence_lost=0, store_errors=0).response()
        {'batchItemFailures': [{'itemIdentifier': 'm-1'}]}
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
