"""Period locks of scheduled jobs (``lock#<job>:<period>``): a lease per job and period.

The seed's ``SET lock:nightly-report:2026-08-05 <worker> NX EX 3600`` becomes a
lease acquire (``sqsjobs.store._lease``): it succeeds when no lock exists, or when
its holder's lease ran out (the holder died: *takeover after expiry*).
``complete`` turns the lease into DONE, which keeps the period from firing
again until the item's TTL; ``release`` gives the period back (RELEASED) so
a retry of the tick can take it after a failed run. Both are fenced on the
owner: a holder whose lease ran out can neither complete nor release the
lease of the one who took over.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqsjobs.store._lease import Acquire, Complete, LeaseItem, LeaseState, LeaseStore, Release, Written

LOCK_PREFIX = "lock#"


def lock_key(name: str) -> str:
    """The lock item's key in the idempotency table.

    Example:
        >>> lock_key("nightly-report:2026-08-05")
        'lock#nightly-report:2026-08-05'
    """
    return f"{LOCK_PREFIX}{name}"


@dataclass(frozen=True, kw_only=True)
class Taken:
    """The answer to ``PeriodLocks.acquire``: ``ok`` when this owner now holds the period.

    Example:
        >>> done = LeaseItem(key="lock#x", state=LeaseState.DONE, owner="a", lease_until=1.0)
        >>> Taken(key="lock#x", ok=False, current=done).reason
        'already done by a'
    """

    key: str
    ok: bool
    current: LeaseItem | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        """The period already fired (DONE): nothing to do, and nothing to retry."""
        return self.current is not None and self.current.state is LeaseState.DONE

    @property
    def reason(self) -> str:
        """Why the lease was or was not taken, in words for the log."""
        if self.ok:
            return "acquired"
        if self.error is not None:
            return f"the lock store failed: {self.error}"
        c = self.current
        if c is None:
            return "held by another owner"
        if c.state is LeaseState.DONE:
            return f"already done by {c.owner}"
        return f"held by {c.owner} until {c.lease_until}"


class PeriodLocks:
    """The period locks of scheduled jobs, in the idempotency table's store.

    Example:
        >>> from sqsjobs import InMemoryStore
        >>> locks = PeriodLocks(InMemoryStore())
        >>> key = lock_key("nightly-report:2026-08-05")
        >>> locks.acquire(key, owner="a", now=0.0, lease_until=300.0, expires_at=9e9, job="nightly-report").ok
        True
        >>> locks.acquire(key, owner="b", now=10.0, lease_until=310.0, expires_at=9e9, job="nightly-report").reason
        'held by a until 300.0'
        >>> locks.complete(key, owner="a", expires_at=9e9), locks.get(key).state.value
        (True, 'DONE')
    """

    def __init__(self, store: LeaseStore) -> None:
        self.store = store

    def acquire(self, key: str, *, owner: str, now: float, lease_until: float, expires_at: float,
                job: str | None = None) -> Taken:
        """Take the period if it is free or its holder's lease ran out; never waits."""
        written = self.store.write(Acquire(key=key, owner=owner, now=now, lease_until=lease_until,
                                           expires_at=expires_at, data={"job": job, "started_at": now}))
        return Taken(key=key, ok=written.ok, current=None if written.ok else written.item, error=written.error)

    def complete(self, key: str, *, owner: str, expires_at: float) -> bool:
        """The period's work is done; False if ``owner`` lost the lease first."""
        return _fenced(self.store.write(Complete(key=key, owner=owner, expires_at=expires_at)))

    def release(self, key: str, *, owner: str, expires_at: float) -> bool:
        """Give the period back (the work failed); False if ``owner`` no longer holds it."""
        return _fenced(self.store.write(Release(key=key, owner=owner, expires_at=expires_at)))

    def get(self, key: str) -> LeaseItem | None:
        """The lock item, or None."""
        return self.store.get(key)


def _fenced(written: Written) -> bool:
    if written.error is not None:
        from sqsjobs._errors import StoreError

        raise StoreError(written.error)
    return written.ok
