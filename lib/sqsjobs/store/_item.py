"""A stored lease as the stores read it: ``LeaseState`` and ``LeaseItem``.

Its own module so that the rules (``sqsjobs.store._rules``), which build
items, and the operations (``sqsjobs.store._lease_ops``,
``sqsjobs.store._enqueue_ops``), which state rules, all import it without
importing each other. It must not import boto3 or pynamodb.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import field
from enum import StrEnum
from typing import Any

from sqsjobs._frozen import per_message


class LeaseState(StrEnum):
    """Where a lease is (the item's ``status``)."""

    HELD = "HELD"  #: an owner holds it until ``lease_until``
    RELEASED = "RELEASED"  #: free to acquire again; the item keeps its history
    DONE = "DONE"  #: finished: nobody acquires it until its TTL ends


@per_message
class LeaseItem:
    """A stored lease: the lease fields, and the user's fields in ``data``.

    Example:
        >>> item = LeaseItem(key="k", state=LeaseState.HELD, owner="a", lease_until=60.0)
        >>> item.held_live(now=59.0), item.held_live(now=61.0)
        (True, False)
    """

    key: str
    state: LeaseState
    owner: str | None = None
    lease_until: float | None = None
    expires_at: float | None = None
    fingerprint: str | None = None
    fp_version: int | None = None
    attempts: int = 0
    data: Mapping[str, Any] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        """A user field (``None`` when the item does not have it)."""
        return self.data.get(name)

    def past_ttl(self, now: float) -> bool:
        """Past its TTL: logically gone (DynamoDB deletes such items up to days late)."""
        return self.expires_at is not None and self.expires_at < now

    def held_live(self, now: float) -> bool:
        """HELD, and its lease has not run out (a lease without an end never runs out)."""
        return self.state is LeaseState.HELD and (self.lease_until is None or self.lease_until >= now)
