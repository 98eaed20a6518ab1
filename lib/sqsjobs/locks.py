"""Lease locks in the idempotency table (``lock#...``): one holder at a time, fenced on an owner token.

The seed's ``SET lock:nightly-report:2026-08-05 <worker> NX EX 3600`` becomes a
conditional ``PutItem``: it succeeds when no lock item exists, or when the
item is a lease whose holder let it run out (it crashed). Finishing is fenced
on the owner token: ``complete`` turns the lease into a DONE marker, which
keeps the period from firing again until TTL removes it; ``release`` deletes
the lease so another tick in the same period may take it (the run failed).
An invocation whose lease ran out can neither complete nor release the lease
of the holder that took over.

botocore errors are translated here and nowhere else in this module's callers.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqsjobs.dynamodb_calls import ConditionFailed, call

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

LOCK_PREFIX = "lock#"
HELD = "HELD"
DONE = "DONE"


def lock_key(name: str) -> str:
    """The lock item's key in the idempotency table.

    Example:
        >>> lock_key("nightly-report:2026-08-05")
        'lock#nightly-report:2026-08-05'
    """
    return f"{LOCK_PREFIX}{name}"


@dataclass(frozen=True, kw_only=True)
class LockState:
    """A lock item as stored: who holds it, until when, and whether its work is done."""

    key: str
    status: str
    owner: str | None
    lease_until: float | None
    acquired_at: float | None = None
    expires_at: float | None = None


@dataclass(frozen=True, kw_only=True)
class Acquired:
    """The answer to ``acquire``: ``ok`` when this owner now holds the lease, else who does (``current``).

    Example:
        >>> Acquired(key="lock#x", ok=False, current=LockState(key="lock#x", status="DONE", owner="a",
        ...                                                     lease_until=1.0)).reason
        'already done by a'
    """

    key: str
    ok: bool
    current: LockState | None = None

    @property
    def reason(self) -> str:
        """Why the lease was not taken, in words for the log."""
        if self.ok:
            return "acquired"
        c = self.current
        if c is None:
            return "held by another owner"
        if c.status == DONE:
            return f"already done by {c.owner}"
        return f"held by {c.owner} until {c.lease_until}"


class LeaseLock:
    """Lease locks on a DynamoDB table keyed by ``pk`` (the idempotency table).

    Example:
        >>> locks = LeaseLock(boto3.client("dynamodb"), "idempotency")  # doctest: +SKIP
        >>> locks.acquire("lock#nightly-report:2026-08-05", owner="a", now=0, lease_until=3600).ok  # doctest: +SKIP
        True
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = client
        self.table_name = table_name
        self.model = lock_model(table_name)

    def acquire(self, key: str, *, owner: str, now: float, lease_until: float, expires_at: float,
                job: str | None = None) -> Acquired:
        """Take the lease if the key is free or its lease ran out; never waits."""
        m = self.model
        item = m(key, status=HELD, owner=owner, lease_until=lease_until, acquired_at=now, job=job,
                 expires_at=expires_at)
        free = m.pk.does_not_exist() | ((m.status == HELD) & (m.lease_until < now))
        kwargs = item.get_save_kwargs_from_instance(condition=free, return_values_on_condition_failure="ALL_OLD")
        try:
            self._call("put_item", **kwargs)
        except ConditionFailed as failed:
            return Acquired(key=key, ok=False, current=self._state(failed.item) if failed.item else None)
        return Acquired(key=key, ok=True)

    def complete(self, key: str, *, owner: str, expires_at: float) -> bool:
        """Mark the work done (the key stays taken until ``expires_at``); False if ``owner`` lost the lease."""
        m = self.model
        kwargs = m(key).get_update_kwargs_from_instance(
            actions=[m.status.set(DONE), m.expires_at.set(expires_at)],
            condition=(m.owner == owner) & (m.status == HELD),
        )
        return self._fenced("update_item", kwargs)

    def release(self, key: str, *, owner: str) -> bool:
        """Give the lease up early (the work failed); False if ``owner`` no longer holds it."""
        m = self.model
        kwargs = m(key).get_delete_kwargs_from_instance(condition=(m.owner == owner) & (m.status == HELD))
        return self._fenced("delete_item", kwargs)

    def get(self, key: str) -> LockState | None:
        """The lock item, or None."""
        response = self._call("get_item", TableName=self.table_name, Key={"pk": {"S": key}}, ConsistentRead=True)
        item = response.get("Item")
        return None if item is None else self._state(item)

    def _fenced(self, operation: str, kwargs: dict[str, Any]) -> bool:
        try:
            self._call(operation, **kwargs)
        except ConditionFailed:
            return False
        return True

    def _state(self, item: dict[str, Any]) -> LockState:
        r = self.model.from_raw_data(item)
        return LockState(key=r.pk, status=r.status, owner=r.owner, lease_until=r.lease_until,
                         acquired_at=r.acquired_at, expires_at=r.expires_at)

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call(self.client, operation, what="lock", **kwargs)



@lru_cache(maxsize=16)
def lock_model(table_name: str) -> Any:
    """The pynamodb ``Model`` of a lock item in ``table_name``.

    Example:
        >>> Lock = lock_model("idempotency")
        >>> Lock("lock#nightly-report:2026-08-05", status="HELD").status
        'HELD'
    """
    from pynamodb.attributes import NumberAttribute, UnicodeAttribute
    from pynamodb.models import Model

    class LockItem(Model):
        class Meta:
            region = "us-east-1"  # request kwargs only; I/O goes through the injected client

        pk = UnicodeAttribute(hash_key=True)
        status = UnicodeAttribute()
        owner = UnicodeAttribute(null=True)
        lease_until = NumberAttribute(null=True)
        acquired_at = NumberAttribute(null=True)
        job = UnicodeAttribute(null=True)
        expires_at = NumberAttribute(null=True)

    LockItem.Meta.table_name = table_name  # type: ignore[attr-defined]
    return LockItem
