"""A scheduled job's period lock is its job's own record: the key ``<job>:<period>``, claimed like any delivery.

The seed's ``SET lock:nightly-report:2026-08-05 <worker> NX EX 3600`` becomes
the claim of the job record ``nightly-report:2026-08-05`` (``worker/_job_records.py``):
it succeeds when no record exists, or when its holder's lease ran out (the
holder died: *takeover after expiry*). Because it is the job's record, a key
names one logical operation on every path (docs/jobs.md "Keys"): a tick, a
second scheduler in the same period, a retry of the tick, and a delivery of
the same key from a queue (``nightly_report.enqueue(period=...)``, a redrive)
all find one record, and the period's work runs once.

``complete`` turns the lease into DONE (``succeeded``), which keeps the period
from firing again until the record's TTL; ``release`` gives the period back
(``retrying``) so a retry of the tick can take it after a failed run. Both are
fenced on the owner: a holder whose lease ran out can neither complete nor
release the lease of the one who took over.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from sqsjobs._errors import StoreError
from sqsjobs.store._lease import LeaseItem, LeaseState, LeaseStore, Operation, Written
from sqsjobs.worker import _job_records as records
from sqsjobs.worker._decision import Ending
from sqsjobs.worker._job_records import Claim, ClaimResult


@dataclass(frozen=True, kw_only=True)
class Taken:
    """The answer to ``PeriodLocks.acquire``: ``ok`` when this owner now holds the period.

    Example:
        >>> done = LeaseItem(key="r:x", state=LeaseState.DONE, owner="a", lease_until=1.0)
        >>> Taken(key="r:x", ok=False, current=done, ending=Ending.DUPLICATE).reason
        'already done by a'
    """

    key: str
    ok: bool
    current: LeaseItem | None = None
    error: str | None = None
    #: why it was not taken (``worker/_decision.py``'s vocabulary: a duplicate, a key conflict...)
    ending: Ending | None = None

    @property
    def done(self) -> bool:
        """The period already fired (DONE: succeeded, or cancelled): nothing to do, and nothing to retry."""
        return self.current is not None and self.current.state is LeaseState.DONE

    @property
    def conflict(self) -> bool:
        """The key's record belongs to another job, or to other arguments (``key_conflict``)."""
        return self.ending is Ending.KEY_CONFLICT

    @property
    def reason(self) -> str:
        """Why the lease was or was not taken, in words for the log."""
        if self.ok:
            return "acquired"
        if self.error is not None:
            return f"the store failed: {self.error}"
        c = self.current
        if c is None:
            return "held by another owner"
        if self.conflict:
            return f"its key belongs to job {c.get('job')!r}"
        if c.state is LeaseState.DONE:
            return f"already {c.get('outcome') or 'done'} by {c.owner}" if c.get("outcome") != "succeeded" \
                else f"already done by {c.owner}"
        return f"held by {c.owner} until {c.lease_until}"


class PeriodLocks:
    """The periods of scheduled jobs, as their job records in the idempotency table's store.

    Example:
        >>> from sqsjobs import InMemoryStore
        >>> locks = PeriodLocks(InMemoryStore())
        >>> take = dict(job="nightly-report", fingerprint="f", fp_version=1, expires_at=9e9)
        >>> locks.acquire("nightly-report:2026-08-05", owner="a", now=0.0, lease_until=300.0, **take).ok
        True
        >>> locks.acquire("nightly-report:2026-08-05", owner="b", now=10.0, lease_until=310.0, **take).reason
        'held by a until 300.0'
        >>> locks.complete("nightly-report:2026-08-05", owner="a", now=20.0, expires_at=9e9)
        True
        >>> locks.get("nightly-report:2026-08-05").get("outcome")
        'succeeded'
    """

    def __init__(self, store: LeaseStore, *, write: Callable[[Operation], Written] | None = None) -> None:
        self.store = store
        #: how a period's completion and release are written (the scheduler's: with retries inside its deadline)
        self.write = write or store.write

    def acquire(self, key: str, *, owner: str, now: float, lease_until: float, expires_at: float, job: str,
                fingerprint: str, fp_version: int, period: str | None = None) -> Taken:
        """Claim the period's record if it is free or its holder's lease ran out; never waits."""
        claim = Claim(key=key, job=job, owner=owner, now=now, lease_until=lease_until, expires_at=expires_at,
                      fingerprint=fingerprint, fp_version=fp_version, message_id=f"schedule:{owner}", period=period)
        result = ClaimResult.of(claim, self.store.write(claim.operation()))
        if result.claimed:
            return Taken(key=key, ok=True)
        return Taken(key=key, ok=False, current=result.previous, error=result.error, ending=result.ending)

    def complete(self, key: str, *, owner: str, now: float, expires_at: float) -> bool:
        """The period's work is done; False if ``owner`` lost the lease first."""
        return _fenced(self.write(records.succeeded(key, owner, now=now, expires_at=expires_at)))

    def release(self, key: str, *, owner: str, now: float, expires_at: float, error: BaseException) -> bool:
        """Give the period back (the work failed); False if ``owner`` no longer holds it."""
        return _fenced(self.write(records.retrying(key, owner, now=now, expires_at=expires_at, error=error)))

    def get(self, key: str) -> LeaseItem | None:
        """The period's record, or None."""
        return self.store.get(key)


def _fenced(written: Written) -> bool:
    if written.error is not None:
        raise StoreError(written.error)
    return written.ok
