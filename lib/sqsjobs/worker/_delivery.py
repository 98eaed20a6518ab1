"""One SQS record of a batch, and the states it moves through.

::

    RECEIVED ──decoded──▶ DECODED ──claimed──▶ CLAIMED
       │                     │                    │
       └──────────┬──────────┴────────────────────┘
                  │ decided (worker/_decision.py: decide): the decision's Action
                  ▼
               DECIDED   ack | return | resend | schedule | dead_letter
                  │      settled (decision.settle) may turn the action by SETTLES_TO: ack → return (a
                  │      follow-up failed) or resend (a finish copy); dead_letter → return / resend /
                  │      schedule (the DLQ refused it); resend, schedule → return
                  ▼
           ACKED | RETURNED   (a resend or schedule that failed is RETURNED)

One vocabulary from claim to acknowledgement: what a claim found, or how a
run ended, is an ``Ending`` (``worker/_decision.py``); ``decide`` turns it into
a ``Decision`` (an ``Action``, an ``Outcome``, a ``Reason``), and the state
only says how far the batch got.

A delivery changes state only through the transition methods below; each
checks where the delivery is and raises ``IllegalTransition`` otherwise, so a
decision can never be overwritten by a later pass of the consumer. What a
decision means (acknowledge, retry, dead-letter...) is decided in one place,
``worker/_decision.py``; a delivery only remembers it.

Parsing never raises for a bad *body* (that is the record's own permanent
failure) and bounds every attribute it reads (a 400-digit timestamp is read as
the largest time there is); it raises ``InvalidEventError`` only when the
*event* is not an SQS batch, since then no record can even be reported back.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import InvalidEventError
from sqsjobs.enqueue._message import ATTR_TRACE_ID
from sqsjobs.worker._decision import SETTLES_TO, Action, Decision
from sqsjobs.worker._decision import Outcome as Outcome  # decided there; re-exported where the states are

if TYPE_CHECKING:
    from sqsjobs._job import Job
    from sqsjobs.enqueue._envelope import Envelope
    from sqsjobs.store._lease import LeaseItem
    from sqsjobs.worker._dead_letters import Reason


class State(StrEnum):
    """Where a delivery is in its batch; once ``DECIDED``, its decision's ``Action`` says what carries it out."""

    RECEIVED = "received"  #: parsed from the event
    DECODED = "decoded"  #: its job, arguments and key are known
    CLAIMED = "claimed"  #: this invocation holds the key's lease: the job may run
    #: its fate is decided (``worker/_decision.py``): ``Delivery.action`` is what the batch still does with it
    DECIDED = "decided"
    ACKED = "acked"  #: left the queue (final)
    RETURNED = "returned"  #: reported in ``batchItemFailures`` (final)


#: the legal moves; anything else is a bug in the consumer (a decided delivery's action moves by ``SETTLES_TO``)
TRANSITIONS: dict[State, frozenset[State]] = {
    State.RECEIVED: frozenset({State.DECODED, State.DECIDED}),
    State.DECODED: frozenset({State.CLAIMED, State.DECIDED}),
    State.CLAIMED: frozenset({State.DECIDED}),
    State.DECIDED: frozenset({State.ACKED, State.RETURNED}),
    State.ACKED: frozenset(),
    State.RETURNED: frozenset(),
}


#: a receive count beyond any queue's maxReceiveCount (1000) is garbage: it is read as this
MAX_RECEIVE_COUNT = 1_000_000
#: epoch milliseconds up to the year 5138: any larger time is garbage, read as this
MAX_EPOCH_MS = 10**14
#: an attribute longer than this is not a number SQS wrote (it is read as missing)
MAX_NUMBER_DIGITS = 20


class IllegalTransition(RuntimeError):
    """Raised when the consumer moves a delivery where it cannot go (a bug, never a record's fault)."""


@dataclass(kw_only=True)
class Delivery:
    """A record of the batch and its fate; only the transition methods change its state.

    Example:
        >>> d = Delivery.parse({"messageId": "m-1", "receiptHandle": "r", "body": "{}",
        ...                     "attributes": {"ApproximateReceiveCount": "2", "SentTimestamp": "9" * 400}}, 0)
        >>> d.receive_count, d.sent_ms, d.state.value
        (2, 100000000000000, 'received')
        >>> d.finished()
        Traceback (most recent call last):
        ...
        sqsjobs.worker._delivery.IllegalTransition: m-1: received -> acked is not a legal move
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
    #: what its key's record remembers of the call (``Job.fingerprint``: a hash of the job and its arguments)
    fingerprint: str = ""
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
    decision: Decision | None = None
    duration_ms: float | None = None
    result: Any = None
    #: the one-time schedule that re-sends it at ``delay`` (a retry longer than SQS can hold back)
    schedule_name: str | None = None
    #: what its group counts it as (a terminal outcome: succeeded, dead_lettered, cancelled, expired)
    counts_as: str | None = None
    #: the dead-lettered message it is: its own id once the DLQ has it, the letter it is a copy of (a re-send
    #: keeps it: worker/_job_records.py ``letter_of``)
    letter_of: str | None = None
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
        # A standard queue's group id is a tenant (a fair queue), not an order to keep.
        fifo = arn.endswith(".fifo") if isinstance(arn, str) else group is not None
        return cls(
            index=index,
            message_id=message_id,
            receipt_handle=receipt,
            body=body if isinstance(body, str) else None,
            receive_count=bounded(attributes.get("ApproximateReceiveCount"), 1, low=1, high=MAX_RECEIVE_COUNT),
            first_receive_ms=bounded(attributes.get("ApproximateFirstReceiveTimestamp"), 0, high=MAX_EPOCH_MS),
            sent_ms=bounded(attributes.get("SentTimestamp"), 0, high=MAX_EPOCH_MS),
            group_id=group if fifo else None,
            trace_id=trace.get("stringValue") if isinstance(trace, dict) else None,
            event_source_arn=arn if isinstance(arn, str) else None,
            message_attributes=message_attributes,
            raw=record,
            tenant=None if fifo else group,
        )

    # ------------------------------------------------------------ transitions
    def decoded(self, *, envelope: Envelope, job: Job[Any, Any], args: dict[str, Any], key: str,
                fingerprint: str) -> None:
        """The body is a call of a registered job."""
        self._move(State.DECODED)
        self.envelope, self.job, self.args, self.key, self.fingerprint = envelope, job, args, key, fingerprint

    def claimed(self, *, attempt: int, took_over: bool, previous: LeaseItem | None) -> None:
        """This invocation holds the key's lease; the job may run as attempt ``attempt``."""
        self._move(State.CLAIMED)
        self.attempt, self.took_over, self.previous, self.holds_lease = attempt, took_over, previous, True

    def decided(self, decision: Decision) -> None:
        """``worker/_decision.py`` decided its fate: its ``action`` is what the batch does with it."""
        if self.state not in (State.RECEIVED, State.DECODED, State.CLAIMED):
            raise IllegalTransition(f"{self.message_id}: decided twice ({self.state.value})")
        self._move(State.DECIDED)
        self.decision = decision
        self.notes.extend(decision.notes)

    def settled(self, decision: Decision) -> None:
        """Its decision, once the writes answered (``decision.settle``): the same action, or one ``SETTLES_TO``."""
        assert self.decision is not None
        was = self.decision.action
        if self.state is not State.DECIDED or (decision.action is not was and decision.action not in SETTLES_TO[was]):
            raise IllegalTransition(f"{self.message_id}: {self.state.value} {was.value} -> {decision.action.value} "
                                    "is not a legal move")
        self.notes.extend(n for n in decision.notes if n not in self.notes)
        self.decision = decision

    def to_schedule(self, name: str) -> None:
        """The one-time schedule ``name`` re-sends it at its delay."""
        if self.action is not Action.SCHEDULE:
            raise IllegalTransition(f"{self.message_id}: {self.state.value} is not a delivery to schedule")
        self.schedule_name = name

    def finished(self, *, sent: bool = True, why: str = "") -> None:
        """The batch is over for it: acknowledged, dead-lettered, re-sent, scheduled, or returned."""
        action = self.action
        if action is Action.RETURN:
            self._move(State.RETURNED)
        elif action in (Action.RESEND, Action.SCHEDULE):
            what = "re-send" if action is Action.RESEND else "schedule"
            self._move(State.ACKED if sent else State.RETURNED)
            if not sent:
                self.notes.append(f"{what} failed: {why}")
        else:
            self._move(State.ACKED)

    def _move(self, to: State) -> None:
        if to not in TRANSITIONS[self.state]:
            raise IllegalTransition(f"{self.message_id}: {self.state.value} -> {to.value} is not a legal move")
        self.state = to

    # ------------------------------------------------------------ reading
    @property
    def action(self) -> Action | None:
        """What the batch still does with it once decided (None before, and once it is acknowledged or returned)."""
        return self.decision.action if self.state is State.DECIDED and self.decision is not None else None

    @property
    def outcome(self) -> Outcome | None:
        """What the worker did with it (None until it is decided)."""
        return self.decision.outcome if self.decision is not None else None

    @property
    def reason(self) -> Reason | None:
        """Why it is dead-lettered (None unless it is)."""
        return self.decision.reason if self.decision is not None else None

    @property
    def error(self) -> BaseException | None:
        """The error its run (or its decoding, or its claim) ended with."""
        return self.decision.error if self.decision is not None else None

    @property
    def delay(self) -> float:
        """Seconds until it is visible again (when it goes back)."""
        return self.decision.delay if self.decision is not None else 0.0

    @property
    def deferred_by(self) -> str | None:
        """The limiter that deferred it (``Outcome.DEFERRED``)."""
        return self.decision.limiter if self.decision is not None else None

    @property
    def job_name(self) -> str:
        """The job this record names, or ``?`` when its body names none."""
        if self.job is not None:
            return self.job.name
        if self.envelope is not None:
            return self.envelope.job
        return "?"

    @property
    def log_fields(self) -> dict[str, Any]:
        """What its log lines carry: its job, key, message id, attempt and trace id.

        A message sent without a trace id starts a trace named by its message id (what the run step makes
        current). Job names and keys come from message bodies: a lone surrogate there would make the JSON log
        line unwritable (logging drops it), so it is logged escaped.
        """
        return {"job": loggable(self.job_name), "key": loggable(self.key), "message_id": self.message_id,
                "attempt": self.attempt or None, "trace_id": self.trace_id or self.message_id}

    @property
    def acknowledged(self) -> bool:
        """Whether the record leaves the queue (is not reported in ``batchItemFailures``)."""
        return self.state is State.ACKED


def loggable(text: str) -> str:
    """``text`` with lone surrogates escaped (they come from message bodies and cannot be written as JSON)."""
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def bounded(value: Any, default: int, *, low: int = 0, high: int) -> int:
    """An attribute as a whole number within ``low..high`` (garbage reads as ``default``, huge as ``high``).

    Example:
        >>> bounded("12", 0, high=100), bounded("9" * 400, 0, high=100), bounded("-3", 1, low=1, high=9)
        (12, 100, 1)
    """
    if isinstance(value, str):
        text = value.strip()
        if not text.isdigit():
            return default if not (text.startswith("-") and text[1:].isdigit()) else low
        return high if len(text) > MAX_NUMBER_DIGITS else max(low, min(high, int(text)))
    if isinstance(value, int) and not isinstance(value, bool):
        return max(low, min(high, value))
    return default


@dataclass(frozen=True, kw_only=True)
class BatchResult:
    """What one batch did, record by record (tests and the demo read this).

    ``unrecorded`` lists the keys whose completion could not be written even
    after the worker's retries (each was re-sent as a finish copy, so its job
    does not run again; the count is what the chaos ledger allows for).

    Example:
        >>> BatchResult(deliveries=(), failures=("m-1",), fence_lost=0, store_errors=0).response()
        {'batchItemFailures': [{'itemIdentifier': 'm-1'}]}
    """

    deliveries: tuple[Delivery, ...]
    failures: tuple[str, ...]
    fence_lost: int
    store_errors: int
    unrecorded: tuple[str, ...] = ()

    def response(self) -> dict[str, list[dict[str, str]]]:
        """The partial batch response Lambda expects."""
        return {"batchItemFailures": [{"itemIdentifier": mid} for mid in self.failures]}

    def count(self, outcome: Outcome) -> int:
        """How many records ended with ``outcome``."""
        return sum(1 for d in self.deliveries if d.outcome is outcome)
