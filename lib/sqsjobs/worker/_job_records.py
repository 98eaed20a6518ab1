"""The idempotency guard: one record per job key, a lease (``sqsjobs.store._lease``) held while the job runs.

A job's record walks the lease states, and says in ``outcome`` what that
means for the job::

    claim ──▶ HELD (running) ──complete──▶ DONE (succeeded)
                │   │
                │   └──release──▶ RELEASED (retrying | dead_lettered) ──claim──▶ HELD ...
                └── lease runs out (the run died) ──claim (takeover)──▶ HELD ...
    cancel ──▶ DONE (cancelled)        expire ──▶ RELEASED (expired)

One claim is one conditional write that also returns what it found, so it
tells in one round trip: claimed (and which attempt this is, and whether the
previous run died), a duplicate of a success (of this very request:
``worker/_request.py``; a debounced key that completed another request says
so, and the delivery comes back to claim it once re-armed), a key held by a
live run elsewhere, a cancelled key, a key that belongs to another job or to
other arguments (``key_conflict``), or a redelivery of a message already
dead-lettered.

A key names one logical operation (docs/jobs.md "Keys"): the record of a key
belongs to the job that first wrote it, whatever path the deliveries came by
(standalone, a group's member, a chain's step, a callback, a schedule, a
redrive). A delivery of another job on that key is never its duplicate: the
claim refuses it, at any version, and it is dead-lettered naming both jobs.
Within one job, the arguments are compared (a hash) when both were taken at
the same job version; across versions they cannot be (an upcast changes
them), so a retry that a new deploy picks up is the same operation.

``attempts`` counts the runs that *started*: a claim adds one, and a claim
returned without running gives it back, so a record that waited (the
deadline, a FIFO group) never burns an attempt. A dead letter remembers how
many were spent (``spent_attempts``): a redrive of it starts with fresh
attempts, while ``JobStatus.attempts`` still counts every run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import InvalidArgumentsError, PermanentError, RetryableError
from sqsjobs._frozen import per_message
from sqsjobs.enqueue._envelope import MAX_KEY_BYTES
from sqsjobs.enqueue._message import ATTR_FINISH, ATTR_LETTER, ATTR_RESENDS, ATTR_RESULT
from sqsjobs.store._lease import RESERVED_PREFIXES, LeaseItem, LeaseState, LeaseStore, Written, is_reserved
from sqsjobs.store._lease_ops import LETTERS, Acquire, Annotate, Close, Complete, Release, letter_number
from sqsjobs.worker._dead_letters import ATTR_REASON, ATTR_REDRIVE_COUNT
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._request import Request

if TYPE_CHECKING:
    from sqsjobs.worker._delivery import Delivery

#: the longest last error a record keeps (it stays under 1 KB: 1 WCU a write)
MAX_ERROR_TEXT = 256
#: the largest result a record keeps, as JSON
MAX_RESULT_BYTES = 4096
#: attributes only the worker writes that say a message met its key before (a re-send, a redrive, a letter)
BEEN_HERE = (ATTR_RESENDS, ATTR_REDRIVE_COUNT, ATTR_REASON)


class JobState(StrEnum):
    """What a job's record says about its key (``JobStatus.state``)."""

    RUNNING = "running"
    SUCCEEDED = "succeeded"
    RETRYING = "retrying"
    DEAD_LETTERED = "dead_lettered"
    CANCELLED = "cancelled"
    EXPIRED = "expired"


class CancelResult(StrEnum):
    """What ``app.cancel(key)`` did."""

    CANCELLED = "cancelled"  #: it had not finished: no delivery of it will run
    NOT_FOUND = "not_found_but_cancelled"  #: no delivery yet: a marker waits for the first one
    RUNNING = "running"  #: it runs now: flagged for ``cancel_requested()``, never killed
    ALREADY_FINISHED = "already_finished"  #: it succeeded, or was cancelled, before


@per_message
class Claim:
    """Ask for ``key`` for one delivery of ``job``."""

    key: str
    job: str
    owner: str
    now: float
    lease_until: float
    expires_at: float
    fingerprint: str
    fp_version: int
    message_id: str
    enqueued_at: float | None = None
    #: what a scheduled job's tick claims: the period its record is (the console lists the periods by it)
    period: str | None = None
    #: fields a stage writes with the claim (``Stage.claim_data``: a debounced burst's token)
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: the key may be new (``may_be_new``): the store may try an insert first (``store/_statements.py``)
    fresh: bool = False
    #: the request the delivery carries: a completed key is its duplicate only if it completed this request
    request: Request | None = None

    def operation(self) -> Acquire:
        """The lease acquire that claims the key (refused if the record completed this very request)."""
        completed, numbers = self.request.completion() if self.request is not None else ({}, {})
        return Acquire(not_equal=completed, not_in_set=numbers,
            key=self.key, owner=self.owner, now=self.now, lease_until=self.lease_until, expires_at=self.expires_at,
            job=self.job, fingerprint=self.fingerprint, fp_version=self.fp_version, not_for_message=self.message_id,
            count_attempt=True, fresh=self.fresh,
            data={"job": self.job, "outcome": JobState.RUNNING.value, "started_at": self.now, "updated_at": self.now,
                  "enqueued_at": self.enqueued_at, "finished_at": None, "cancel_requested": None,
                  **({"period": self.period} if self.period is not None else {}), **self.extra},
        )


@dataclass(frozen=True, kw_only=True)
class ClaimResult:
    """What a claim found: the key is this invocation's (``ending`` None), or how the delivery ends unrun.

    A claim speaks the decision's vocabulary (``worker/_decision.py``'s
    ``Ending``): what it found that keeps the job from running *is* the
    delivery's ending (a duplicate, a cancelled key, a key held elsewhere, a
    key conflict, a letter already dead-lettered, another request, the store
    failing), so nothing translates it on the way to ``decide``.

    ``attempt`` is the attempt the claimed run is (1 = first); ``took_over`` is
    True when the previous holder's lease ran out without a word (it died).

    Example:
        >>> busy = LeaseItem(key="k", state=LeaseState.HELD, owner="other", lease_until=130.0)
        >>> asked = Claim(key="k", job="j", owner="me", now=100.0, lease_until=400.0, expires_at=9e9,
        ...               fingerprint="f", fp_version=1, message_id="m-1")
        >>> found = ClaimResult.of(asked, Written(key="k", ok=False, item=busy))
        >>> found.claimed, found.ending.value, found.facts(now=100.0).wait
        (False, 'busy', 30.0)
    """

    key: str
    #: None: claimed, the job may run; else how the delivery ends without running
    ending: Ending | None = None
    attempt: int = 0
    took_over: bool = False
    previous: LeaseItem | None = None
    lease_until: float | None = None
    #: the store's error (``STORE_FAILED``)
    error: str | None = None
    #: whose the key is, in words (``KEY_CONFLICT``)
    conflict: str | None = None

    @property
    def claimed(self) -> bool:
        """This invocation holds the key: the job may run."""
        return self.ending is None

    def facts(self, now: float) -> Facts:
        """What the decision needs to know of a delivery whose claim did not take the key."""
        assert self.ending is not None
        if self.ending is Ending.KEY_CONFLICT:
            return Facts(ending=self.ending, error=PermanentError(self.conflict or "key conflict"))
        if self.ending is Ending.BUSY:
            return Facts(ending=self.ending, wait=(self.lease_until or now) - now)
        if self.ending is Ending.STORE_FAILED:
            return Facts(ending=self.ending, error=RetryableError(f"idempotency store unavailable: {self.error}"))
        return Facts(ending=self.ending)

    @classmethod
    def of(cls, claim: Claim, written: Written) -> ClaimResult:
        """Read a claim's ``Written`` answer."""
        item = written.item
        if written.ok:
            took_over = item is not None and item.state is LeaseState.HELD
            return cls(key=claim.key, attempt=attempts_this_episode(item) + 1, took_over=took_over, previous=item)
        if written.error is not None:
            return cls(key=claim.key, ending=Ending.STORE_FAILED, error=written.error)
        if item is None:  # gone between the condition and the answer: another claim will tell
            return cls(key=claim.key, ending=Ending.BUSY, lease_until=claim.now)
        if item.state is LeaseState.RELEASED and lettered(item, claim.message_id):
            return cls(key=claim.key, ending=Ending.ALREADY_DEAD_LETTERED, previous=item)
        owner = item.get("job")
        if (owner is not None and owner != claim.job) or (
                item.fingerprint is not None and item.fingerprint != claim.fingerprint
                and item.fp_version == claim.fp_version):
            return cls(key=claim.key, ending=Ending.KEY_CONFLICT, previous=item,
                       conflict=conflict_text(claim.key, claim.job, item, claim.fingerprint))
        cancelled = item.state is LeaseState.DONE and item.get("outcome") == JobState.CANCELLED.value
        if cancelled:
            return cls(key=claim.key, ending=Ending.CANCELLED, previous=item)
        request = claim.request
        if request is not None and request.coalesces and request.completed_in(item):
            # A debounced key remembers the requests it completed, whatever it holds now (another request of
            # it may have failed since, or run): this one is their duplicate.
            return cls(key=claim.key, ending=Ending.DUPLICATE, previous=item)
        if item.state is LeaseState.DONE:
            if request is not None and request.coalesces:
                return cls(key=claim.key, ending=Ending.ANOTHER_REQUEST, previous=item)
            return cls(key=claim.key, ending=Ending.DUPLICATE, previous=item)
        return cls(key=claim.key, ending=Ending.BUSY, lease_until=item.lease_until, previous=item)


#: what a group counts a delivery that was not run as, by the outcome of the record its claim found
RECORD_COUNTS = {"succeeded": "succeeded", "cancelled": "cancelled", "dead_lettered": "dead_lettered"}


def answered(d: Delivery, claim: ClaimResult, *, now: float) -> list[tuple[Delivery, Facts]]:
    """What ``claim``'s answer does to ``d``: it holds its key (claimed, nothing ends), or how it ends unrun.

    A duplicate or a cancelled key counts, for its group, as what the record it found says; a letter already
    in the DLQ counts as dead-lettered, and is that letter (``letter_of``: a re-send of it carries it).
    """
    if not claim.claimed:
        if claim.ending in (Ending.DUPLICATE, Ending.CANCELLED) and claim.previous:
            d.counts_as = RECORD_COUNTS.get(str(claim.previous.get("outcome")), "succeeded")
        if claim.ending is Ending.ALREADY_DEAD_LETTERED:  # whatever the record says now (a redrive may retry it)
            d.counts_as, d.letter_of = "dead_lettered", letter_of(d) or d.message_id
            d.notes.append("this message is already in the DLQ (its acknowledgement was lost or withheld)")
        return [(d, claim.facts(now))]
    d.claimed(attempt=claim.attempt, took_over=claim.took_over, previous=claim.previous)
    return []


def may_be_new(d: Delivery) -> bool:
    """Whether ``d``'s key may have no record yet, so its claim is marked ``fresh`` (an ``INSERT`` first).

    A fresh claim of a key that has a record costs a refused ``INSERT`` (1 WCU), a
    read and the ``UpdateItem``; a claim not marked fresh is that one ``UpdateItem``,
    which also creates a record that is not there after all (the same write unit,
    in a call of its own: ``store/_statements.py``). So only a first receive is
    fresh, and not when the record was certainly (or most likely) written before:

    - a debounced enqueue's delivery (the enqueue wrote its burst token);
    - a deduplicated enqueue's (the enqueue reserved the key; a group's member or
      a chain's step of the job is not reserved);
    - the worker's own re-send (``sqsjobs.resends``: the message met its key
      before, most often claimed or held);
    - a redriven letter (``sqsjobs.redrive_count``, or the worker's
      ``sqsjobs.reason`` on a letter an SQS move task brought back: it was
      dead-lettered, so its key has a record).

    Example:
        >>> from sqsjobs.worker._delivery import Delivery
        >>> d = Delivery.parse({"messageId": "m", "receiptHandle": "r", "body": "{}", "messageAttributes": {
        ...     "sqsjobs.redrive_count": {"stringValue": "1", "dataType": "Number"}}}, 0)
        >>> may_be_new(d)
        False
    """
    if d.receive_count != 1 or any(name in d.message_attributes for name in BEEN_HERE):
        return False
    envelope, job = d.envelope, d.job
    if envelope is None or job is None:
        return True
    if envelope.debounce is not None and job.options.sets("debounce"):  # enqueue/_debounce.py's options
        return False
    reserved = job.options.sets("dedupe") and envelope.member_of is None and envelope.step_of is None
    return not reserved


# ---------------------------------------------------------------- the record's writes after a run
def succeeded(key: str, owner: str, *, now: float, expires_at: float, result: str | None = None,
              request: Request | None = None) -> Complete:
    """The job returned: DONE, with its result (JSON) when the job stores results.

    A debounced job's request is remembered as completed (``worker/_request.py``).
    """
    fields, numbers = request.completion() if request is not None else ({}, {})
    return Complete(key=key, owner=owner, expires_at=expires_at,
                    data={"outcome": JobState.SUCCEEDED.value, "finished_at": now, "updated_at": now,
                          "result": result, "last_error": None, **fields}, add=numbers)


def finish_copy(d: Delivery, *, now: float, expires_at: float) -> Complete | None:
    """A finish copy's claim: the completion its run could not write, with the result it carries, fenced on
    that run's lease (``worker/_send_back.py`` re-sent it); None for any other delivery."""
    token = finish_token(d)
    if token is None:
        return None
    return succeeded(d.key, token, now=now, expires_at=expires_at, result=finish_result(d), request=Request.of(d))


def finish_token(d: Delivery) -> str | None:
    """The lease of the run a finish copy completes (``sqsjobs.finish``), or None for any other message."""
    attr = d.message_attributes.get(ATTR_FINISH)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    return text if isinstance(text, str) and len(text) == 32 and text.isalnum() else None


def letter_of(d: Delivery) -> str | None:
    """The dead-lettered message ``d`` is a copy of (``sqsjobs.letter``), or None for any other message.

    Its claim is refused as that message's would be: a sender who sets it on a
    message of its own only makes that message wait for (or follow) a letter
    of the same key with that very id.
    """
    attr = d.message_attributes.get(ATTR_LETTER)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    return text if isinstance(text, str) and 0 < len(text) <= 128 else None


def finish_result(d: Delivery) -> str | None:
    """The stored result a finish copy carries (``sqsjobs.result``)."""
    attr = d.message_attributes.get(ATTR_RESULT)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    return text if isinstance(text, str) and len(text.encode()) <= MAX_RESULT_BYTES else None


def retrying(key: str, owner: str, *, now: float, expires_at: float, error: BaseException) -> Release:
    """The attempt failed and will be retried."""
    return Release(key=key, owner=owner, expires_at=expires_at,
                   data={"outcome": JobState.RETRYING.value, "updated_at": now, "last_error": error_text(error)})


def not_started(key: str, owner: str, *, now: float, expires_at: float, previous: LeaseItem | None) -> Release:
    """Claimed but never run (the deadline, a FIFO group): the attempt is given back."""
    outcome = previous.get("outcome") if previous is not None and previous.state is LeaseState.RELEASED else None
    return Release(key=key, owner=owner, expires_at=expires_at, attempts_delta=-1,
                   data={"outcome": outcome or JobState.RETRYING.value, "updated_at": now})


def dead_lettered(key: str, owner: str, *, now: float, expires_at: float, error: BaseException, reason: str,
                  message_id: str, ran: bool, previous: LeaseItem | None) -> Release:
    """The DLQ has the message: the record says so, and which message it was (a redelivery is not run).

    The attempts spent so far are noted, so a redrive of the letter starts with fresh ones.
    """
    spent = (previous.attempts if previous is not None else 0) + (1 if ran else 0)
    return Release(key=key, owner=owner, expires_at=expires_at, attempts_delta=0 if ran else -1,
                   data={"outcome": JobState.DEAD_LETTERED.value, "updated_at": now, "finished_at": now,
                         "last_error": error_text(error), "reason": reason, "dead_letter_of": message_id,
                         "spent_attempts": spent}, add={LETTERS: letter_number(message_id)})


def lettered(item: LeaseItem, message_id: str) -> bool:
    """Whether the record dead-lettered ``message_id``, last or ever (``LETTERS``)."""
    if item.get("dead_letter_of") == message_id:
        return True
    letters = item.get(LETTERS)
    return bool(letters) and letter_number(message_id) in {int(n) for n in letters}


def conflict_text(key: str, job: str, stored: LeaseItem | None, fingerprint: str | None) -> str:
    """Why a delivery of ``job`` may not use ``key``: the record belongs to another job, or to other arguments.

    Example:
        >>> item = LeaseItem(key="user:1", state=LeaseState.DONE, data={"job": "welcome-email"})
        >>> conflict_text("user:1", "provision-account", item, "ab12")[:79]
        "key 'user:1' belongs to job 'welcome-email'; this message is of job 'provision-"
    """
    owner = stored.get("job") if stored is not None else None
    if owner is not None and owner != job:
        return (f"key {key!r} belongs to job {owner!r}; this message is of job {job!r}: a key names one "
                "operation, so give each job a key template of its own (e.g. prefix it with the job's name)")
    return (f"key {key!r} already belongs to job {job!r} with other arguments (hash "
            f"{stored.fingerprint if stored else None}); this message's hash is {fingerprint}: give each job "
            "call its own key")


def attempts_this_episode(item: LeaseItem | None) -> int:
    """The runs that started since the job was last dead-lettered (all of them, if it never was)."""
    if item is None:
        return 0
    return item.attempts - int(item.get("spent_attempts") or 0)


def expired(key: str, *, job: str, now: float, expires_at: float) -> Close:
    """A delivery too old to run: the record says expired, and a later enqueue of the key may still run."""
    return Close(key=key, now=now, expires_at=expires_at, state=LeaseState.RELEASED,
                 data={"job": job, "outcome": JobState.EXPIRED.value, "finished_at": now, "updated_at": now})


def cancel_marker(key: str, *, now: float, expires_at: float, reason: str | None) -> Close:
    """A cancel: DONE, so no later delivery of the key runs (until the record's TTL)."""
    return Close(key=key, now=now, expires_at=expires_at, state=LeaseState.DONE,
                 data={"outcome": JobState.CANCELLED.value, "finished_at": now, "updated_at": now,
                       "reason": reason})


def cancel_request(key: str, *, now: float) -> Annotate:
    """A cancel of a running job: flag it (the job may poll ``cancel_requested()``); it is never killed."""
    return Annotate(key=key, now=now, data={"cancel_requested": True, "updated_at": now})


def error_text(error: BaseException) -> str:
    """``"Type: message"``, short enough for the record.

    Example:
        >>> error_text(ValueError("bad invoice"))
        'ValueError: bad invoice'
    """
    return f"{type(error).__name__}: {error}"[:MAX_ERROR_TEXT]


# ---------------------------------------------------------------- reading a record
@dataclass(frozen=True, kw_only=True)
class JobStatus:
    """What happened to the job of one key (``app.status(key)``). Times are epoch seconds.

    Example:
        >>> item = LeaseItem(key="invoice-email:42", state=LeaseState.DONE, attempts=2,
        ...                  data={"job": "invoice-email", "outcome": "succeeded", "result": "{\\"sent\\": true}"})
        >>> status = JobStatus.of(item)
        >>> status.state, status.attempts, status.result
        ('succeeded', 2, {'sent': True})
    """

    key: str
    job: str | None
    state: str
    attempts: int
    last_error: str | None
    result: Any
    enqueued_at: float | None
    started_at: float | None
    finished_at: float | None
    updated_at: float | None

    @classmethod
    def of(cls, item: LeaseItem) -> JobStatus:
        """The status a record says."""
        if item.state is LeaseState.HELD:
            state = JobState.RUNNING.value
        else:
            state = str(item.get("outcome") or (JobState.SUCCEEDED.value if item.state is LeaseState.DONE
                                                else JobState.RETRYING.value))
        raw = item.get("result")
        return cls(key=item.key, job=item.get("job"), state=state, attempts=item.attempts,
                   last_error=item.get("last_error"), result=None if raw is None else json.loads(raw),
                   enqueued_at=_float(item.get("enqueued_at")), started_at=_float(item.get("started_at")),
                   finished_at=_float(item.get("finished_at")), updated_at=_float(item.get("updated_at")))


def status(store: LeaseStore, key: str) -> JobStatus | None:
    """The status of ``key``'s job, or None when no delivery (or cancel) ever wrote its record."""
    item = store.get(checked_key(key))
    return None if item is None else JobStatus.of(item)


def checked_key(key: Any) -> str:
    """A key an operator may look up or cancel: non-empty text, within DynamoDB's limit, not reserved.

    Example:
        >>> from sqsjobs._errors import InvalidArgumentsError
        >>> checked_key("invoice-email:42")
        'invoice-email:42'
        >>> try:
        ...     checked_key("lock#nightly-report:2026-01-02")
        ... except InvalidArgumentsError as error:
        ...     print(str(error)[:63])
        the key 'lock#nightly-report:2026-01-02' starts with a reserved
    """
    if not isinstance(key, str) or not key:
        raise InvalidArgumentsError(f"a job key must be non-empty text, got {key!r}")
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidArgumentsError(f"the key {key[:80]!r} is not valid Unicode (a lone surrogate)") from None
    if size > MAX_KEY_BYTES:
        raise InvalidArgumentsError(f"the key is {size} bytes; keys are at most {MAX_KEY_BYTES} bytes")
    if is_reserved(key):
        raise InvalidArgumentsError(
            f"the key {key[:80]!r} starts with a reserved prefix ({', '.join(RESERVED_PREFIXES)}): it is one of "
            "sqsjobs' own records (a scheduler lock, a chunked run...), not a job"
        )
    return key


def _float(value: Any) -> float | None:
    return None if value is None else float(value)
