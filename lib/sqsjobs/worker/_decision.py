"""The one place a delivery's fate is decided: ``decide(facts) -> Decision``, then ``settle`` once the writes answered.

The consumer (``worker/_consumer.py``) gathers a delivery's facts (how its run
ended, or why it did not run; the attempt, the receive count, the job's
options) and carries out what this module decides; it decides nothing itself.
Both functions are pure: the same facts give the same decision (``random``
draws the jitter), and tests/unit/test_decision.py checks them as a table.

::

    how it ended                          what happens
    ------------------------------------  -----------------------------------------------------
    succeeded                             acknowledge
    a duplicate / already dead-lettered   acknowledge, without running
    cancelled, expired, superseded        acknowledge, without running (each with its metric)
    failed, retryable, attempts left      back after full jitter: min(cap, base * 2**(attempt-1))
    failed, permanent or last attempt     dead-letter: permanent / exhausted
    attempts used up before it ran        dead-letter: lost (the last run died) / exhausted
    the previous run died, on_crash=dl    dead-letter: crashed
    a result that cannot be stored        dead-letter: result_not_json / result_too_large
    unreadable body, unknown job          dead-letter: malformed
    another job's key, other arguments    dead-letter: key_conflict
    a newer job version, store failed     back after the backoff, no attempt used
    a stage raised (a bug)                back after the backoff, no attempt used
    held elsewhere                        back when the holder's lease ends, no attempt used
    another request of its key first      back in a second, no attempt used (then claimed on its own)
    no time left, FIFO order, a limiter   back (a limiter: at its next window), no attempt used

Going back is itself decided by where the message is: at or past its
backstop receive (SQS's redrive would move it without a reason) it is
*re-sent* as a fresh copy; a delay longer than SQS can hold back (12 hours;
900 s for a re-send) waits in a one-time *schedule* when there is a schedule
group; a message re-sent ``MAX_RESENDS`` times without ever starting is
dead-lettered ``exhausted``.

``settle`` then looks at what carrying it out did: a dead letter the DLQ
refused goes back to be dead-lettered later; a success whose completion could
not be recorded is re-sent as a *finish copy* (its next delivery only writes
the completion, fenced on this invocation's lease, so the job never runs again
for a write that failed); anything whose follow-up (a group's count, a
callback, a chain's next step) could not be written goes back so that its
redelivery, a duplicate, writes it.

One vocabulary, four words, each a different question (none maps one to one
onto another, so none is derived from another):

- ``Ending``: what happened to the delivery, the one input. Each step of the
  flow names it where it knows it (``Batch.conclude`` is handed ``Facts``):
  decoding, a stage before the claim, the claim itself (what a claim finds
  *is* an ending: ``worker/_job_records.py``'s ``ClaimResult``), a check
  before the start, the run's end, a later copy of a key;
- ``Action``: what the batch does with it (the only word ``settle`` may
  turn, by ``SETTLES_TO``): one ending leads to several (a failure returns,
  is re-sent at its backstop, waits in a schedule, or is dead-lettered);
- ``Outcome``: what is reported (the metrics, ``BatchResult``, the outcome
  log): it stays when ``settle`` turns the action (a success re-sent as a
  finish copy still succeeded), and several endings share one (a duplicate,
  a copy that follows one, a letter already in the DLQ);
- ``Reason``: why a letter is in the DLQ, on the wire (``sqsjobs.reason``,
  read by ``ops/``): one ending gives several (a failure is ``permanent`` or
  ``exhausted``) and several endings one.

``worker/_delivery.py``'s ``State`` says only how far the batch got with it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS, BackoffPolicy, RandomSource
from sqsjobs._errors import PermanentError, RetryableError
from sqsjobs.enqueue._message import MAX_DELAY_SECONDS
from sqsjobs.worker._dead_letters import Reason

#: a message the worker cannot start is re-sent at most this often before it is dead-lettered
MAX_RESENDS = 10
#: a delivery whose follow-up could not be written comes back after this long (its redelivery writes it)
WITHHELD_DELAY = 5.0
#: a request that met another request of its key comes back after this long, to be claimed on its own
ANOTHER_REQUEST_DELAY = 1.0


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
    SUPERSEDED = "superseded"  #: a debounced burst a later enqueue replaced: acknowledged without running
    RETRY = "retry"  #: reported failed, visible again after ``delay``
    DEAD_LETTERED = "dead_lettered"  #: sent to the DLQ with its reason, then acknowledged
    UNSTARTED = "unstarted"  #: not started (the deadline, a lease held elsewhere): back at once, no attempt used
    GROUP_BLOCKED = "group_blocked"  #: FIFO: an earlier record of its group failed
    DEFERRED = "deferred"  #: over a limiter (docs/flow-control.md): back at its next window, no attempt used


class Ending(StrEnum):
    """How a delivery's run ended, or why it did not run."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    RESULT_NOT_JSON = "result_not_json"
    RESULT_TOO_LARGE = "result_too_large"
    MALFORMED = "malformed"
    TOO_NEW = "too_new"
    EXPIRED = "expired"
    SUPERSEDED = "superseded"
    CANCELLED = "cancelled"
    DUPLICATE = "duplicate"
    ALREADY_DEAD_LETTERED = "already_dead_lettered"
    KEY_CONFLICT = "key_conflict"
    BUSY = "busy"
    STORE_FAILED = "store_failed"
    #: a stage's hook raised (worker/_stages.py): what it concerns goes back, no attempt used
    STAGE_FAILED = "stage_failed"
    NO_TIME = "no_time"
    ORDER_BLOCKED = "order_blocked"
    DEFERRED = "deferred"
    PREVIOUS_RUN_DIED = "previous_run_died"
    ATTEMPTS_USED = "attempts_used"
    #: a later copy of a key in the same batch: it shares the first copy's fate
    FOLLOWS = "follows"
    #: another request of a debounced key runs first, or completed it (worker/_request.py): claimed on its own later
    ANOTHER_REQUEST = "another_request"


class Action(StrEnum):
    """What the consumer does with a delivery."""

    ACK = "ack"  #: it leaves the queue
    RETURN = "return"  #: back to its queue, visible again after ``delay``
    RESEND = "resend"  #: a fresh copy goes to its queue (then the original leaves)
    SCHEDULE = "schedule"  #: a one-time schedule re-sends it after ``delay`` (then the original leaves)
    DEAD_LETTER = "dead_letter"  #: to the DLQ with ``reason`` (then it leaves)


#: what ``settle`` may turn each action into once the writes answered (anything else is a bug)
SETTLES_TO: dict[Action, frozenset[Action]] = {
    Action.ACK: frozenset({Action.RETURN, Action.RESEND}),  # a follow-up failed; a completion not recorded
    Action.DEAD_LETTER: frozenset({Action.RETURN, Action.RESEND, Action.SCHEDULE}),  # the DLQ refused it
    Action.RESEND: frozenset({Action.RETURN}),
    Action.SCHEDULE: frozenset({Action.RETURN}),
    Action.RETURN: frozenset(),
}


@dataclass(frozen=True, kw_only=True)
class Facts:
    """What the consumer knows of one delivery when its fate is decided."""

    ending: Ending
    error: BaseException | None = None
    #: the job's options classify ``error`` as permanent
    permanent: bool = False
    #: the attempt this run was (1 = first), from the job's record; 0 when it did not start
    attempt: int = 0
    max_attempts: int = 1
    #: the previous holder's lease ran out without a word (that run died)
    took_over: bool = False
    receive_count: int = 1
    #: the receive after which SQS's own redrive may move the message (the queue's max_attempts + 1)
    backstop: int = 2
    resends: int = 0
    #: BUSY: seconds until the holder's lease ends; DEFERRED: the limiter's delay; RETRY of a follower: its delay
    wait: float = 0.0
    #: a delay the job asked for (``RetryableError(delay=...)``)
    requested_delay: float | None = None
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    #: a one-time schedule can hold a retry back longer than SQS can
    can_schedule: bool = False
    #: the limiter that deferred it
    limiter: str | None = None
    #: DEFERRED to a reserved slot: the slots its copy carries (flow/_schedule.py)
    reservation: str | None = None
    #: FOLLOWS: the decision of the key's first copy in the batch
    first: Decision | None = None


@dataclass(frozen=True, kw_only=True)
class Decision:
    """What happens to a delivery: the action, the outcome it reports, and its delay or reason."""

    action: Action
    outcome: Outcome
    delay: float = 0.0
    reason: Reason | None = None
    error: BaseException | None = None
    #: the job ran (an attempt was used)
    ran: bool = False
    #: the limiter that deferred it
    limiter: str | None = None
    #: the slots a deferred job's copy carries back (flow/_schedule.py)
    reservation: str | None = None
    notes: tuple[str, ...] = ()

    @property
    def leaves(self) -> bool:
        """It leaves its queue once carried out (acknowledged, re-sent, scheduled or dead-lettered)."""
        return self.action is not Action.RETURN


def ack(outcome: Outcome, *, ran: bool = False) -> Decision:
    return Decision(action=Action.ACK, outcome=outcome, ran=ran)


def dead_letter(reason: Reason, error: BaseException, *, ran: bool = False) -> Decision:
    return Decision(action=Action.DEAD_LETTER, outcome=Outcome.DEAD_LETTERED, reason=reason, error=error, ran=ran)


def decide(facts: Facts, random: RandomSource | None = None) -> Decision:
    """What happens to a delivery with these facts (the table in the module docstring).

    Example:
        >>> from sqsjobs._backoff import BackoffPolicy
        >>> failed = Facts(ending=Ending.FAILED, error=ConnectionError("reset"), attempt=1, max_attempts=3,
        ...                backoff=BackoffPolicy(base=30, cap=600, jitter=False))
        >>> decide(failed).action.value, decide(failed).delay
        ('return', 30.0)
        >>> decide(Facts(ending=Ending.FAILED, error=ConnectionError("reset"), attempt=3, max_attempts=3)).reason.value
        'exhausted'
    """
    decision = _first(facts, random)
    if decision.action is Action.RETURN:
        return _going_back(decision, facts)
    return decision


def _first(f: Facts, random: RandomSource | None) -> Decision:
    e = f.ending
    if e is Ending.SUCCEEDED:
        return ack(Outcome.SUCCEEDED, ran=True)
    if e in (Ending.DUPLICATE, Ending.ALREADY_DEAD_LETTERED):
        return ack(Outcome.DUPLICATE)
    if e is Ending.CANCELLED:
        return ack(Outcome.CANCELLED)
    if e is Ending.EXPIRED:
        return ack(Outcome.EXPIRED)
    if e is Ending.SUPERSEDED:
        return ack(Outcome.SUPERSEDED)
    if e is Ending.FAILED:
        assert f.error is not None
        if f.permanent:
            return dead_letter(Reason.PERMANENT, f.error, ran=True)
        if f.attempt >= f.max_attempts:
            return dead_letter(Reason.EXHAUSTED, f.error, ran=True)
        delay = f.requested_delay if f.requested_delay is not None else f.backoff.next_delay(f.attempt, random)
        return Decision(action=Action.RETURN, outcome=Outcome.RETRY, delay=delay, error=f.error, ran=True)
    if e in (Ending.RESULT_NOT_JSON, Ending.RESULT_TOO_LARGE):
        reason = Reason.RESULT_NOT_JSON if e is Ending.RESULT_NOT_JSON else Reason.RESULT_TOO_LARGE
        return dead_letter(reason, f.error or PermanentError(e.value), ran=True)
    if e is Ending.MALFORMED:
        return dead_letter(Reason.MALFORMED, f.error or PermanentError("malformed"))
    if e is Ending.KEY_CONFLICT:
        return dead_letter(Reason.KEY_CONFLICT, f.error or PermanentError("key conflict"))
    if e is Ending.PREVIOUS_RUN_DIED:
        return dead_letter(Reason.CRASHED, f.error or PermanentError("the previous run died"))
    if e is Ending.ATTEMPTS_USED:
        return dead_letter(Reason.LOST if f.took_over else Reason.EXHAUSTED,
                           f.error or RetryableError("attempts used up"))
    if e in (Ending.TOO_NEW, Ending.STORE_FAILED, Ending.STAGE_FAILED):
        delay = f.backoff.next_delay(f.receive_count, random)
        return Decision(action=Action.RETURN, outcome=Outcome.RETRY, delay=delay, error=f.error)
    if e is Ending.BUSY:
        delay = min(max(f.wait + 1.0, 1.0), float(MAX_VISIBILITY_SECONDS))
        return Decision(action=Action.RETURN, outcome=Outcome.UNSTARTED, delay=delay, notes=("lease held elsewhere",))
    if e is Ending.DEFERRED and f.reservation is not None:
        # Its slot is reserved: a copy carries it back, timed to come just before it (a returned message
        # could not carry it). A deferral is not a re-send (worker/_send_back.py).
        return Decision(action=Action.RESEND, outcome=Outcome.DEFERRED, delay=f.wait, limiter=f.limiter,
                        reservation=f.reservation)
    if e is Ending.DEFERRED:
        return Decision(action=Action.RETURN, outcome=Outcome.DEFERRED, delay=f.wait, limiter=f.limiter)
    if e is Ending.FOLLOWS:
        return _follows(f.first)
    if e is Ending.ANOTHER_REQUEST:
        return Decision(action=Action.RETURN, outcome=Outcome.UNSTARTED, delay=max(f.wait, ANOTHER_REQUEST_DELAY),
                        notes=("another request of its key runs first, or completed it: claimed on its own",))
    if e is Ending.ORDER_BLOCKED:
        return Decision(action=Action.RETURN, outcome=Outcome.GROUP_BLOCKED)
    return Decision(action=Action.RETURN, outcome=Outcome.UNSTARTED, delay=f.wait)  # NO_TIME


def _follows(first: Decision | None) -> Decision:
    """A later copy of a key: a duplicate of what completed, the same letter of what was dead-lettered, or back."""
    if first is None:
        return Decision(action=Action.RETURN, outcome=Outcome.UNSTARTED)
    if first.action is Action.DEAD_LETTER and first.reason is not None and first.error is not None:
        # The job never completed: this copy is no duplicate of a success. It goes to the DLQ with the same
        # reason (a replay of either copy passes the guard, so one run at most).
        return dead_letter(first.reason, first.error)
    if first.action is Action.ACK:
        return ack(Outcome.CANCELLED if first.outcome is Outcome.CANCELLED else Outcome.DUPLICATE)
    if first.outcome is Outcome.RETRY:
        return Decision(action=Action.RETURN, outcome=Outcome.RETRY, delay=first.delay, error=first.error)
    return Decision(action=Action.RETURN, outcome=Outcome.UNSTARTED, delay=first.delay)


def _going_back(d: Decision, f: Facts, *, may_give_up: bool = True) -> Decision:
    """A delivery going back: returned, re-sent at its backstop, held in a schedule, or given up on.

    ``may_give_up=False`` once the batch's DLQ step is over (``settle``): giving up
    is a dead letter, and nothing would send it, so the delivery is re-sent instead.
    """
    at_backstop = f.receive_count >= f.backstop
    never_started = not d.ran and d.outcome is not Outcome.DEFERRED
    if may_give_up and at_backstop and never_started and f.resends >= MAX_RESENDS:
        return dead_letter(Reason.EXHAUSTED, d.error or RetryableError(
            f"not started after {MAX_RESENDS} re-sends of {f.backstop} receives each"))
    too_long = d.delay > MAX_VISIBILITY_SECONDS or (at_backstop and d.delay > MAX_DELAY_SECONDS)
    if too_long and f.can_schedule:
        return replace(d, action=Action.SCHEDULE)
    if too_long:
        d = replace(d, delay=float(MAX_VISIBILITY_SECONDS if not at_backstop else MAX_DELAY_SECONDS),
                    notes=(*d.notes, "no schedule group (SQSJOBS_SCHEDULE_GROUP): it waits as long as SQS can"))
    if at_backstop:
        return replace(d, action=Action.RESEND)
    return d


@dataclass(frozen=True, kw_only=True)
class Aftermath:
    """What carrying a decision out did: the DLQ send, the record's write, the follow-ups."""

    #: the DLQ refused the letter (why), for a DEAD_LETTER decision
    dead_letter_refused: str | None = None
    #: the record write that goes with the decision failed after its retries (why)
    record_failed: str | None = None
    #: a follow-up (a group's count, a callback, a chain's next step) could not be written (why)
    followup_failed: str | None = None


def settle(decision: Decision, after: Aftermath, facts: Facts, random: RandomSource | None = None) -> Decision:
    """The decision once its writes answered: what finally happens to the delivery.

    Example:
        >>> done = ack(Outcome.SUCCEEDED, ran=True)
        >>> settle(done, Aftermath(record_failed="throttled"), Facts(ending=Ending.SUCCEEDED)).action.value
        'resend'
        >>> settle(done, Aftermath(followup_failed="count failed"), Facts(ending=Ending.SUCCEEDED)).delay
        5.0
    """
    if decision.action is Action.DEAD_LETTER and after.dead_letter_refused is not None:
        delay = facts.backoff.next_delay(max(facts.attempt, 1), random)
        back = Decision(action=Action.RETURN, outcome=Outcome.RETRY, delay=delay, error=decision.error,
                        ran=decision.ran, notes=(*decision.notes, f"DLQ send failed: {after.dead_letter_refused}"))
        return _going_back(back, facts, may_give_up=False)
    if decision.outcome is Outcome.SUCCEEDED and decision.action is Action.ACK and after.record_failed is not None:
        # The job ran; only its completion is missing. A finish copy writes it (fenced on this lease).
        return replace(decision, action=Action.RESEND,
                       notes=(*decision.notes, f"completion not recorded ({after.record_failed}): finish copy sent"))
    if decision.leaves and after.followup_failed is not None:
        withheld = replace(decision, action=Action.RETURN, delay=WITHHELD_DELAY,
                           notes=(*decision.notes, f"acknowledgement withheld: {after.followup_failed}"))
        return _going_back(withheld, facts, may_give_up=False)  # at its backstop receive it is re-sent
    return decision
