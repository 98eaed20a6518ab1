"""worker/_decision.py as a table: a delivery's facts in, the decision out (``decide``, then ``settle``).

Each row is one case of the table in worker/_decision.py's module docstring. The backoff has no jitter, so
every delay is exact; one test checks that the jitter is drawn from the injected random source. The last tests
fail when an Ending or an Action is added without a row here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS, BackoffPolicy
from sqsjobs._errors import PermanentError, RetryableError
from sqsjobs.enqueue._message import MAX_DELAY_SECONDS
from sqsjobs.worker._dead_letters import Reason
from sqsjobs.worker._decision import (
    ANOTHER_REQUEST_DELAY,
    MAX_RESENDS,
    WITHHELD_DELAY,
    Action,
    Aftermath,
    Decision,
    Ending,
    Facts,
    ack,
    dead_letter,
    decide,
    settle,
)
from sqsjobs.worker._delivery import Outcome

#: base 30 s, cap 600 s, no jitter: attempt n waits min(600, 30 * 2 ** (n - 1))
BACKOFF = BackoffPolicy(base=30, cap=600, jitter=False)
BOOM = ConnectionError("dependency down")
#: the queue's max_attempts is 3 in every row: SQS's redrive may move a message after receive 4
BACKSTOP = 4


def facts(ending: Ending, **overrides: Any) -> Facts:
    options: dict[str, Any] = dict(ending=ending, max_attempts=3, backstop=BACKSTOP, backoff=BACKOFF)
    if ending is Ending.FAILED:
        options.update(error=BOOM, attempt=1)
    options.update(overrides)
    return Facts(**options)


@dataclass(frozen=True)
class Want:
    """The fields of a Decision a row pins (``reason`` None means: no reason; ``note`` a substring of one note)."""

    action: Action
    outcome: Outcome
    delay: float = 0.0
    reason: Reason | None = None
    ran: bool = False
    limiter: str | None = None
    note: str | None = None

    def check(self, got: Decision) -> None:
        assert (got.action, got.outcome, got.delay, got.reason, got.ran, got.limiter) == (
            self.action, self.outcome, self.delay, self.reason, self.ran, self.limiter)
        if self.note is None:
            assert got.notes == ()
        else:
            assert any(self.note in note for note in got.notes), got.notes
        assert got.leaves == (self.action is not Action.RETURN)
        if self.reason is not None:
            assert got.error is not None  # the DLQ letter carries an error type and message


RETRY_FIRST = Decision(action=Action.RETURN, outcome=Outcome.RETRY, delay=42.0, error=BOOM, ran=True)
DEAD_FIRST = dead_letter(Reason.PERMANENT, PermanentError("bad invoice"), ran=True)

DECIDE_ROWS: list[tuple[str, Facts, Want]] = [
    # It ran.
    ("ran ok", facts(Ending.SUCCEEDED, attempt=1), Want(Action.ACK, Outcome.SUCCEEDED, ran=True)),
    ("retryable, attempts left: 1st", facts(Ending.FAILED, attempt=1),
     Want(Action.RETURN, Outcome.RETRY, delay=30.0, ran=True)),
    ("retryable, attempts left: 2nd", facts(Ending.FAILED, attempt=2),
     Want(Action.RETURN, Outcome.RETRY, delay=60.0, ran=True)),
    ("retryable, the backoff's cap", facts(Ending.FAILED, attempt=9, max_attempts=10),
     Want(Action.RETURN, Outcome.RETRY, delay=600.0, ran=True)),
    ("retryable, the job asked for its delay", facts(Ending.FAILED, attempt=1, requested_delay=7.0),
     Want(Action.RETURN, Outcome.RETRY, delay=7.0, ran=True)),
    ("retryable, exhausted", facts(Ending.FAILED, attempt=3),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.EXHAUSTED, ran=True)),
    ("retryable, past max_attempts", facts(Ending.FAILED, attempt=5),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.EXHAUSTED, ran=True)),
    ("permanent, attempts left", facts(Ending.FAILED, attempt=1, permanent=True, error=PermanentError("no")),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.PERMANENT, ran=True)),
    ("result not JSON", facts(Ending.RESULT_NOT_JSON, attempt=1),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.RESULT_NOT_JSON, ran=True)),
    ("result too large", facts(Ending.RESULT_TOO_LARGE, attempt=1),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.RESULT_TOO_LARGE, ran=True)),
    # It did not run, and leaves.
    ("duplicate of a completed key", facts(Ending.DUPLICATE), Want(Action.ACK, Outcome.DUPLICATE)),
    ("already dead-lettered", facts(Ending.ALREADY_DEAD_LETTERED), Want(Action.ACK, Outcome.DUPLICATE)),
    ("cancelled", facts(Ending.CANCELLED), Want(Action.ACK, Outcome.CANCELLED)),
    ("a debounced burst's stale token", facts(Ending.SUPERSEDED), Want(Action.ACK, Outcome.SUPERSEDED)),
    ("expired", facts(Ending.EXPIRED), Want(Action.ACK, Outcome.EXPIRED)),
    ("malformed body or unknown job", facts(Ending.MALFORMED),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.MALFORMED)),
    ("key_conflict", facts(Ending.KEY_CONFLICT),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.KEY_CONFLICT)),
    ("the previous run died, on_crash=dead_letter", facts(Ending.PREVIOUS_RUN_DIED),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.CRASHED)),
    ("attempts used, the last run died", facts(Ending.ATTEMPTS_USED, took_over=True),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.LOST)),
    ("attempts used, none left", facts(Ending.ATTEMPTS_USED),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.EXHAUSTED)),
    # It did not run, and goes back without using an attempt.
    ("a newer job version", facts(Ending.TOO_NEW, receive_count=2),
     Want(Action.RETURN, Outcome.RETRY, delay=60.0)),
    ("store error on claim", facts(Ending.STORE_FAILED, receive_count=1),
     Want(Action.RETURN, Outcome.RETRY, delay=30.0)),
    # A stage's hook raised (worker/_stages.py): what it concerns goes back unclaimed or unstarted.
    ("a stage raised", facts(Ending.STAGE_FAILED, receive_count=2, error=RetryableError("stage X failed")),
     Want(Action.RETURN, Outcome.RETRY, delay=60.0)),
    ("a stage raised, at the backstop", facts(Ending.STAGE_FAILED, receive_count=BACKSTOP),
     Want(Action.RESEND, Outcome.RETRY, delay=240.0)),
    ("a stage raised at the backstop, re-sent MAX_RESENDS times",
     facts(Ending.STAGE_FAILED, receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.EXHAUSTED)),
    ("held by another delivery", facts(Ending.BUSY, wait=20.0),
     Want(Action.RETURN, Outcome.UNSTARTED, delay=21.0, note="lease held elsewhere")),
    ("held, the lease just ended", facts(Ending.BUSY, wait=-3.0),
     Want(Action.RETURN, Outcome.UNSTARTED, delay=1.0, note="lease held elsewhere")),
    ("held, longer than SQS's visibility", facts(Ending.BUSY, wait=10 * MAX_VISIBILITY_SECONDS),
     Want(Action.RETURN, Outcome.UNSTARTED, delay=float(MAX_VISIBILITY_SECONDS), note="lease held elsewhere")),
    ("limiter deferral", facts(Ending.DEFERRED, wait=12.0, limiter="mail-api"),
     Want(Action.RETURN, Outcome.DEFERRED, delay=12.0, limiter="mail-api")),
    ("FIFO blocked", facts(Ending.ORDER_BLOCKED), Want(Action.RETURN, Outcome.GROUP_BLOCKED)),
    # Another request of a debounced key (worker/_request.py): back, to be claimed on its own after the first.
    ("another request of its key first", facts(Ending.ANOTHER_REQUEST),
     Want(Action.RETURN, Outcome.UNSTARTED, delay=ANOTHER_REQUEST_DELAY, note="another request of its key")),
    ("another request, at the backstop", facts(Ending.ANOTHER_REQUEST, receive_count=BACKSTOP),
     Want(Action.RESEND, Outcome.UNSTARTED, delay=ANOTHER_REQUEST_DELAY, note="another request of its key")),
    ("time left too short", facts(Ending.NO_TIME), Want(Action.RETURN, Outcome.UNSTARTED)),
    # A later copy of a key in the batch shares its first copy's fate.
    ("copy, the first was not decided", facts(Ending.FOLLOWS), Want(Action.RETURN, Outcome.UNSTARTED)),
    ("copy of a success", facts(Ending.FOLLOWS, first=ack(Outcome.SUCCEEDED, ran=True)),
     Want(Action.ACK, Outcome.DUPLICATE)),
    ("copy of a duplicate", facts(Ending.FOLLOWS, first=ack(Outcome.DUPLICATE)), Want(Action.ACK, Outcome.DUPLICATE)),
    ("copy of a cancelled key", facts(Ending.FOLLOWS, first=ack(Outcome.CANCELLED)),
     Want(Action.ACK, Outcome.CANCELLED)),
    ("copy of a dead letter", facts(Ending.FOLLOWS, first=DEAD_FIRST),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.PERMANENT)),
    ("copy of a retry", facts(Ending.FOLLOWS, first=RETRY_FIRST), Want(Action.RETURN, Outcome.RETRY, delay=42.0)),
    ("copy of a held key", facts(Ending.FOLLOWS, first=decide(facts(Ending.BUSY, wait=8.0))),
     Want(Action.RETURN, Outcome.UNSTARTED, delay=9.0)),
    # Going back at the backstop receive: re-sent (SQS's redrive would move it without a reason).
    ("retry one receive before the backstop", facts(Ending.FAILED, attempt=1, receive_count=BACKSTOP - 1),
     Want(Action.RETURN, Outcome.RETRY, delay=30.0, ran=True)),
    ("retry at the backstop", facts(Ending.FAILED, attempt=1, receive_count=BACKSTOP),
     Want(Action.RESEND, Outcome.RETRY, delay=30.0, ran=True)),
    ("retry past the backstop", facts(Ending.FAILED, attempt=2, receive_count=BACKSTOP + 3),
     Want(Action.RESEND, Outcome.RETRY, delay=60.0, ran=True)),
    ("held at the backstop", facts(Ending.BUSY, wait=4.0, receive_count=BACKSTOP),
     Want(Action.RESEND, Outcome.UNSTARTED, delay=5.0, note="lease held elsewhere")),
    ("held at the backstop, re-sent MAX_RESENDS - 1 times",
     facts(Ending.BUSY, wait=4.0, receive_count=BACKSTOP, resends=MAX_RESENDS - 1),
     Want(Action.RESEND, Outcome.UNSTARTED, delay=5.0, note="lease held elsewhere")),
    ("held at the backstop, re-sent MAX_RESENDS times",
     facts(Ending.BUSY, wait=4.0, receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.EXHAUSTED)),
    ("no time at the backstop, re-sent MAX_RESENDS times",
     facts(Ending.NO_TIME, receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.EXHAUSTED)),
    ("store error at the backstop, re-sent MAX_RESENDS times",
     facts(Ending.STORE_FAILED, receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.DEAD_LETTER, Outcome.DEAD_LETTERED, reason=Reason.EXHAUSTED)),
    ("no time one receive before the backstop, re-sent MAX_RESENDS times",
     facts(Ending.NO_TIME, receive_count=BACKSTOP - 1, resends=MAX_RESENDS),
     Want(Action.RETURN, Outcome.UNSTARTED)),
    # A deferral is the limiter's doing and a retry used an attempt: neither is "never started".
    ("deferred at the backstop, re-sent MAX_RESENDS times",
     facts(Ending.DEFERRED, wait=12.0, limiter="mail-api", receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.RESEND, Outcome.DEFERRED, delay=12.0, limiter="mail-api")),
    ("retry at the backstop, re-sent MAX_RESENDS times",
     facts(Ending.FAILED, attempt=1, receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.RESEND, Outcome.RETRY, delay=30.0, ran=True)),
    # Longer than SQS can hold back: a one-time schedule when there is a schedule group.
    ("longer than SQS's visibility, a schedule group",
     facts(Ending.FAILED, attempt=1, requested_delay=MAX_VISIBILITY_SECONDS + 1.0, can_schedule=True),
     Want(Action.SCHEDULE, Outcome.RETRY, delay=MAX_VISIBILITY_SECONDS + 1.0, ran=True)),
    ("longer than SQS's visibility, no schedule group",
     facts(Ending.FAILED, attempt=1, requested_delay=MAX_VISIBILITY_SECONDS + 1.0),
     Want(Action.RETURN, Outcome.RETRY, delay=float(MAX_VISIBILITY_SECONDS), ran=True, note="no schedule group")),
    ("exactly SQS's longest visibility", facts(Ending.FAILED, attempt=1, requested_delay=float(MAX_VISIBILITY_SECONDS)),
     Want(Action.RETURN, Outcome.RETRY, delay=float(MAX_VISIBILITY_SECONDS), ran=True)),
    ("at the backstop, longer than a re-send's delay, a schedule group",
     facts(Ending.FAILED, attempt=1, requested_delay=MAX_DELAY_SECONDS + 1.0, receive_count=BACKSTOP,
           can_schedule=True),
     Want(Action.SCHEDULE, Outcome.RETRY, delay=MAX_DELAY_SECONDS + 1.0, ran=True)),
    ("at the backstop, longer than a re-send's delay, no schedule group",
     facts(Ending.FAILED, attempt=1, requested_delay=MAX_DELAY_SECONDS + 1.0, receive_count=BACKSTOP),
     Want(Action.RESEND, Outcome.RETRY, delay=float(MAX_DELAY_SECONDS), ran=True, note="no schedule group")),
    ("at the backstop, exactly a re-send's longest delay",
     facts(Ending.FAILED, attempt=1, requested_delay=float(MAX_DELAY_SECONDS), receive_count=BACKSTOP,
           can_schedule=True),
     Want(Action.RESEND, Outcome.RETRY, delay=float(MAX_DELAY_SECONDS), ran=True)),
]


@pytest.mark.parametrize(("case", "given", "want"), DECIDE_ROWS, ids=[row[0] for row in DECIDE_ROWS])
def test_decide(case: str, given: Facts, want: Want) -> None:
    want.check(decide(given))


def test_a_failure_keeps_its_error_and_a_dead_letter_always_has_one() -> None:
    assert decide(facts(Ending.FAILED, attempt=1)).error is BOOM
    assert decide(facts(Ending.FAILED, attempt=3)).error is BOOM
    for ending in (Ending.MALFORMED, Ending.KEY_CONFLICT, Ending.PREVIOUS_RUN_DIED, Ending.RESULT_TOO_LARGE):
        letter = decide(facts(ending))
        assert isinstance(letter.error, PermanentError), ending
    exhausted = decide(facts(Ending.BUSY, receive_count=BACKSTOP, resends=MAX_RESENDS))
    assert isinstance(exhausted.error, RetryableError) and str(MAX_RESENDS) in str(exhausted.error)


class Draws:
    """A random source that answers a fixed fraction of each range and records what it was asked."""

    def __init__(self, fraction: float) -> None:
        self.fraction = fraction
        self.asked: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.asked.append((a, b))
        return a + (b - a) * self.fraction


@pytest.mark.parametrize(("ending", "attempt", "receive_count", "bound"), [
    (Ending.FAILED, 1, 1, 30.0),  # a retry: jitter over the attempt that ran
    (Ending.FAILED, 3, 1, 120.0),
    (Ending.STORE_FAILED, 0, 2, 60.0),  # no attempt ran: jitter over the receive count
])
def test_the_delay_is_full_jitter_from_the_injected_random(ending: Ending, attempt: int, receive_count: int,
                                                           bound: float) -> None:
    draws = Draws(0.25)
    given = facts(ending, attempt=attempt, max_attempts=5, receive_count=receive_count,
                  backoff=BackoffPolicy(base=30, cap=600))
    assert decide(given, draws).delay == bound * 0.25
    assert draws.asked == [(0, bound)]


SUCCESS = ack(Outcome.SUCCEEDED, ran=True)
LETTER = dead_letter(Reason.EXHAUSTED, BOOM, ran=True)
NEVER_RAN_LETTER = dead_letter(Reason.MALFORMED, PermanentError("not JSON"))
RETRY = Decision(action=Action.RETURN, outcome=Outcome.RETRY, delay=30.0, error=BOOM, ran=True)

SETTLE_ROWS: list[tuple[str, Decision, Aftermath, Facts, Want]] = [
    ("all writes answered: unchanged", SUCCESS, Aftermath(), facts(Ending.SUCCEEDED),
     Want(Action.ACK, Outcome.SUCCEEDED, ran=True)),
    ("store error on completion: a finish copy", SUCCESS, Aftermath(record_failed="throttled"),
     facts(Ending.SUCCEEDED), Want(Action.RESEND, Outcome.SUCCEEDED, ran=True, note="finish copy")),
    ("a duplicate's record write failed: still a duplicate", ack(Outcome.DUPLICATE),
     Aftermath(record_failed="throttled"), facts(Ending.DUPLICATE), Want(Action.ACK, Outcome.DUPLICATE)),
    ("DLQ refused: back after the attempt's backoff", LETTER, Aftermath(dead_letter_refused="KMS"),
     facts(Ending.FAILED, attempt=2), Want(Action.RETURN, Outcome.RETRY, delay=60.0, ran=True, note="DLQ send failed")),
    ("DLQ refused, nothing ran: back after the first backoff", NEVER_RAN_LETTER,
     Aftermath(dead_letter_refused="KMS"), facts(Ending.MALFORMED),
     Want(Action.RETURN, Outcome.RETRY, delay=30.0, note="DLQ send failed")),
    ("DLQ refused at the backstop: re-sent", LETTER, Aftermath(dead_letter_refused="KMS"),
     facts(Ending.FAILED, attempt=3, receive_count=BACKSTOP),
     Want(Action.RESEND, Outcome.RETRY, delay=120.0, ran=True, note="DLQ send failed")),
    # Found by the model (tests/model): settle comes after the batch's DLQ step, so giving up (a dead letter) would
    # acknowledge a letter nobody sent; a delivery that never started is re-sent even past MAX_RESENDS.
    ("DLQ refused at the backstop, nothing ran, MAX_RESENDS re-sent: re-sent, not given up", NEVER_RAN_LETTER,
     Aftermath(dead_letter_refused="KMS"), facts(Ending.MALFORMED, receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.RESEND, Outcome.RETRY, delay=30.0, note="DLQ send failed")),
    ("follow-up failed at the backstop, nothing ran, MAX_RESENDS re-sent: re-sent", ack(Outcome.DUPLICATE),
     Aftermath(followup_failed="count"), facts(Ending.DUPLICATE, receive_count=BACKSTOP, resends=MAX_RESENDS),
     Want(Action.RESEND, Outcome.DUPLICATE, delay=WITHHELD_DELAY, note="acknowledgement withheld")),
    ("DLQ refused wins over a failed follow-up", LETTER,
     Aftermath(dead_letter_refused="KMS", followup_failed="count failed"), facts(Ending.FAILED, attempt=1),
     Want(Action.RETURN, Outcome.RETRY, delay=30.0, ran=True, note="DLQ send failed")),
    ("follow-up failed after a success: acknowledgement withheld", SUCCESS, Aftermath(followup_failed="count"),
     facts(Ending.SUCCEEDED), Want(Action.RETURN, Outcome.SUCCEEDED, delay=WITHHELD_DELAY, ran=True,
                                   note="acknowledgement withheld")),
    ("follow-up failed after a dead letter", LETTER, Aftermath(followup_failed="callback"),
     facts(Ending.FAILED, attempt=3), Want(Action.RETURN, Outcome.DEAD_LETTERED, delay=WITHHELD_DELAY,
                                            reason=Reason.EXHAUSTED, ran=True, note="acknowledgement withheld")),
    ("follow-up failed at the backstop: re-sent", SUCCESS, Aftermath(followup_failed="count"),
     facts(Ending.SUCCEEDED, receive_count=BACKSTOP),
     Want(Action.RESEND, Outcome.SUCCEEDED, delay=WITHHELD_DELAY, ran=True, note="acknowledgement withheld")),
    ("a stage's after-hook failed after a success: acknowledgement withheld", SUCCESS,
     Aftermath(followup_failed="stage Broken failed in after_run: KeyError"), facts(Ending.SUCCEEDED),
     Want(Action.RETURN, Outcome.SUCCEEDED, delay=WITHHELD_DELAY, ran=True, note="stage Broken failed")),
    ("follow-up failed on a retry: it goes back anyway", RETRY, Aftermath(followup_failed="count"),
     facts(Ending.FAILED, attempt=1), Want(Action.RETURN, Outcome.RETRY, delay=30.0, ran=True)),
]


@pytest.mark.parametrize(("case", "decision", "after", "given", "want"), SETTLE_ROWS,
                         ids=[row[0] for row in SETTLE_ROWS])
def test_settle(case: str, decision: Decision, after: Aftermath, given: Facts, want: Want) -> None:
    want.check(settle(decision, after, given))


def test_every_ending_has_a_row() -> None:
    assert {row[1].ending for row in DECIDE_ROWS} == set(Ending)


def test_every_action_and_outcome_is_reached() -> None:
    decided = [decide(row[1]) for row in DECIDE_ROWS]
    settled = [settle(row[1], row[2], row[3]) for row in SETTLE_ROWS]
    assert {d.action for d in decided + settled} == set(Action)
    assert {d.outcome for d in decided} == set(Outcome)
    assert {d.reason for d in decided if d.reason is not None} == set(Reason)
