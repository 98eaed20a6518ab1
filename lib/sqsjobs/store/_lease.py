"""Leases: the one primitive behind every item of the idempotency table.

A lease is an item that one *owner* (a token per invocation) holds until
``lease_until``. Every user of the table speaks the same three states::

                 acquire                     complete
    (absent) ─────────────▶ HELD ──────────────────────────▶ DONE ──▶ (TTL)
    RELEASED ─────────────▶  │ ▲                              ▲
    HELD, lease run out ───▶ │ │ hand_over (owner → owner')   │ close (not held)
                   release   ▼ │                              │
                          RELEASED ───────────────────────────┘

- ``Acquire`` takes the lease when the item is absent, RELEASED, HELD by an
  owner whose lease ran out (it crashed: *takeover after expiry*), or past its
  TTL, and when it is for the same work (``job``, ``fingerprint``). It never
  waits: a refusal returns the item that blocked it.
- ``Complete``, ``Release``, ``HandOver`` and ``Renew`` are *fenced*: they
  write only while the caller still holds the lease, so an owner whose lease
  ran out can never overwrite the one who took over.
- ``Close`` settles an item nobody holds (a cancel marker: DONE; an expired
  job: RELEASED); ``Annotate`` adds fields to a lease held under a live lease
  (a cancel request).
- ``Amend`` changes an item that exists, whoever holds it, when its fields
  say what the caller expects: counters, fields, and number sets (a group's
  shard: which members it counted); ``Transact`` writes several operations
  on distinct keys together or not at all.

The operations live in ``sqsjobs.store._lease_ops`` (the lease's own, and
``Transact``) and ``sqsjobs.store._enqueue_ops`` (debounce and dedupe at
enqueue); this module holds what a store answers (``Written``), the store
interface (``LeaseStore``) and ``answer``, the rule evaluation the in-memory
store uses. Each operation states its condition and its updates once, as a
``Rule`` (``sqsjobs.store._rules``): the in-memory store (``sqsjobs.store._memory``)
evaluates it, the DynamoDB store renders it as expressions; one contract suite
runs against both. A store failure is returned as a value (``Written.error``),
never raised, so one bad call cannot break a batch. This module must not import
boto3 or pynamodb.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TypeVar

from sqsjobs._errors import StoreError
from sqsjobs.store._enqueue_ops import Debounce, FreshAttempts, Rearm, Reserve
from sqsjobs.store._item import LeaseItem as LeaseItem  # re-exported: the stores and their users import it here
from sqsjobs.store._item import LeaseState as LeaseState
from sqsjobs.store._lease_ops import Acquire, Transact, TransactedOperation
from sqsjobs.store._rate_ops import TakeSlots

T = TypeVar("T")


#: Keys of items that are not job records; no message or enqueue may claim one.
RESERVED_PREFIXES = ("lock#", "run#", "group#", "chain#", "limit#", "sched#", "sqsjobs#", "dlq#", "redrive#")


def is_reserved(key: str) -> bool:
    """True when ``key`` belongs to the framework's own items (locks, runs...), not to a job.

    Example:
        >>> is_reserved("lock#nightly-report:2026-01-02"), is_reserved("invoice-email:42")
        (True, False)
    """
    return key.startswith(RESERVED_PREFIXES)


def expiry(now: float, ttl: float, lease_until: float | None = None) -> float:
    """The TTL an item gets when written: ``ttl`` after the later of now and its lease's end.

    Example:
        >>> expiry(100.0, 1000.0), expiry(100.0, 1000.0, lease_until=400.0)
        (1100.0, 1400.0)
    """
    return max(now, lease_until or now) + ttl


#: an operation on one item
SingleOperation = Acquire | Debounce | FreshAttempts | Rearm | Reserve | TakeSlots | TransactedOperation
Operation = SingleOperation | Transact


@dataclass(frozen=True, kw_only=True)
class Written:
    """What one operation did: ``ok`` when its condition held and the item was written.

    ``item`` is the item before the write for ``Acquire`` and ``Close``, the
    item after it for ``Amend``, and the item that refused the operation when
    ``ok`` is False (``None``: absent). ``error`` is set when the store itself
    failed (then ``ok`` is False). ``refused_at`` is, for a refused
    ``Transact``, the index of the operation whose condition did not hold.
    """

    key: str
    ok: bool
    item: LeaseItem | None = None
    error: str | None = None
    refused_at: int | None = None

    @property
    def refused(self) -> bool:
        """The condition did not hold (not a store failure)."""
        return not self.ok and self.error is None



# ---------------------------------------------------------------- stores
class LeaseStore(ABC):
    """A table of leases: conditional operations, each one round trip.

    ``write`` runs one operation; ``write_many`` runs several concurrently (one
    round trip for all); ``submit`` starts one and returns at once, so a caller
    can overlap the write with its next piece of work. Failures come back as
    ``Written.error``.

    An app writes its records through one (``JobApp(store=...)``; by default
    the DynamoDB store its settings name, an ``InMemoryStore`` under
    ``app.testing()``). The operations are the framework's own: a user passes
    a store and reads what the app wrote with ``get``.

    Example:
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp()
        >>> @app.job("greet", key="greet:{user_id}")
        ... def greet(user_id: int) -> None: ...
        >>> store = InMemoryStore()
        >>> with app.testing(store=store) as t:  # two deliveries of one key: one runs
        ...     _ = t.run(greet.message(user_id=7), greet.message(user_id=7))
        ...     [o.outcome.value for o in t.outcomes]
        ['succeeded', 'duplicate']
        >>> store.get("greet:7").state.value, store.get("greet:8")
        ('DONE', None)
    """

    def write(self, op: Operation) -> Written:
        """Run one operation; a store failure is returned, not raised."""
        try:
            return self._apply(op)
        except StoreError as error:
            return Written(key=op.key, ok=False, error=str(error))

    def write_many(self, ops: Sequence[Operation]) -> list[Written]:
        """Run ``ops`` concurrently (one round trip for all); results in order."""
        return [self.write(op) for op in ops]

    def write_batch(self, ops: Sequence[Operation]) -> list[Written]:
        """Run ``ops`` (on distinct keys) in as few requests as the store can; each answered as ``write`` would.

        The DynamoDB store sends the operations a PartiQL statement can carry
        in ``BatchExecuteStatement`` calls of at most 25, the others as single
        requests, all at once (``sqsjobs.store._statements`` says which go
        where), once a probe has shown that the endpoint answers statements as
        DynamoDB documents (``sqsjobs.store._statement_trust``; stock moto does
        not, and gets single requests); the default is ``write_many``.
        """
        return self.write_many(ops)

    def submit(self, op: Operation) -> Future[Written]:
        """Start ``op`` and return at once; the future never raises."""
        return self.run(lambda: self.write(op))

    def run(self, work: Callable[[], T]) -> Future[T]:
        """Start ``work`` (writes that depend on each other's answers) like ``submit``; it must not raise."""
        done: Future[T] = Future()
        done.set_result(work())
        return done

    @abstractmethod
    def get(self, key: str) -> LeaseItem | None:
        """The item for ``key`` (a consistent read), or None; raises ``StoreError``."""

    def get_many(self, keys: Sequence[str]) -> dict[str, LeaseItem]:
        """The items of ``keys`` that exist (consistent reads), by key; raises ``StoreError``."""
        found = {key: self.get(key) for key in dict.fromkeys(keys)}
        return {key: item for key, item in found.items() if item is not None}

    @abstractmethod
    def _apply(self, op: Operation) -> Written:
        """Run one operation; raise ``StoreError`` when the store fails."""

    def close(self) -> None:  # noqa: B027 - a no-op by default; stores with threads override it
        """Release what the store holds (threads); it may not be used afterwards."""



def answer(op: SingleOperation, current: LeaseItem | None, *, in_transaction: bool = False
           ) -> tuple[Written, LeaseItem | None]:
    """What ``op`` answers on ``current``, and the item to store (None: nothing changes): its rule, evaluated.

    Example:
        >>> from sqsjobs.store._lease_ops import Close
        >>> written, item = answer(Close(key="k", now=0.0, expires_at=9.0), None)
        >>> written.ok, item.state.value
        (True, 'DONE')
    """
    rule, values = op.rule(), op.values()
    live = current
    if rule.replaces_expired and current is not None and current.past_ttl(values["now"]):
        if in_transaction:  # replacing it whole takes a request of its own (DynamoDB's PutItem)
            return Written(key=op.key, ok=False, item=current), None
        live = None
    if not rule.holds(live, values):
        return Written(key=op.key, ok=False, item=current), None
    item = rule.apply(live, op.key, values)
    shown = live if rule.returns == "old" else item if rule.returns == "new" else None
    return Written(key=op.key, ok=True, item=shown), item
