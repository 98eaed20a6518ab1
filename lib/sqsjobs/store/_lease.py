"""Leases: the one primitive behind the guard, the scheduler's locks and chunked runs.

A lease is an item of the idempotency table that one *owner* (a token per
invocation) holds until ``lease_until``. Every user of the table speaks the
same three states::

                 acquire                     complete
    (absent) ─────────────▶ HELD ──────────────────────────▶ DONE ──▶ (TTL)
    RELEASED ─────────────▶  │ ▲                              ▲
    HELD, lease run out ───▶ │ │ hand_over (owner → owner')   │ close (not held)
                   release   ▼ │                              │
                          RELEASED ───────────────────────────┘

- ``acquire`` takes the lease when the item is absent, RELEASED, HELD by an
  owner whose lease ran out (it crashed: *takeover after expiry*), or past its
  TTL. It never waits: a refusal returns the item that blocked it.
- ``complete``, ``release`` and ``hand_over`` are *fenced*: they write only
  while the caller still holds the lease, so an owner whose lease ran out can
  never overwrite the one who took over.
- ``close`` settles an item nobody holds (a cancel marker: DONE; an expired
  job: RELEASED); ``annotate`` adds fields to a lease someone holds under a
  live lease (a cancel request); ``renew`` moves the end of a lease its
  holder still holds (fenced, like ``release``).
- ``amend`` changes an item that exists whoever holds it, when its fields say
  what the caller expects: counters (``add``) and fields (a group's shard
  counts, a group's state); ``transact`` writes several operations on distinct
  keys together or not at all (a job's completion and its group's count).

Who uses what: a job's record (``sqsjobs.worker._job_records``: HELD while the job runs,
RELEASED between attempts and after the DLQ, DONE once succeeded, cancelled or
expired), a scheduled job's period (``sqsjobs.schedules._period_locks``: HELD while it fires,
DONE once fired), a chunked run (``sqsjobs.workflows._chunked``: HELD by the page at
the run's cursor, handed over page to page, DONE when the last page ran) and
a limiter's tokens and slots (``sqsjobs.flow._permits``: a rate token HELD for its
window after a start, a concurrency slot HELD by an invocation).

Stores (``InMemoryStore``, ``DynamoDBStore``) implement the operations with
the same conditions; one contract suite runs against both. A store failure is
returned as a value (``Written.error``) from ``write``, never raised, so one
bad call cannot break a batch. This module must not import boto3 or pynamodb.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sqsjobs._errors import StoreError


class LeaseState(StrEnum):
    """Where a lease is (the item's ``status``)."""

    HELD = "HELD"  #: an owner holds it until ``lease_until``
    RELEASED = "RELEASED"  #: free to acquire again; the item keeps its history
    DONE = "DONE"  #: finished: nobody acquires it until its TTL ends


#: Keys of items that are not job records; no message or enqueue may claim one.
RESERVED_PREFIXES = ("lock#", "run#", "group#", "chain#", "limit#", "sched#", "sqsjobs#", "dlq#", "redrive#")

#: a field value as stored; ``None`` removes the field
FieldValue = str | int | float | bool | None


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


@dataclass(frozen=True, kw_only=True)
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


# ---------------------------------------------------------------- operations
@dataclass(frozen=True, kw_only=True)
class Acquire:
    """Take the lease when the item is absent, RELEASED, HELD past its lease, or past its TTL.

    ``fingerprint`` (with ``fp_version``) says what the lease is taken for: a
    stored fingerprint of the same version that differs refuses the acquire
    (the key belongs to other work). ``not_for_message`` refuses an item that
    was dead-lettered as that message (a redelivery after a lost acknowledgement).
    ``count_attempt`` adds one to ``attempts``. The result's ``item`` is what
    was there before (absent or past its TTL: ``None``) or what refused it.
    """

    key: str
    owner: str
    now: float
    lease_until: float | None
    expires_at: float
    fingerprint: str | None = None
    fp_version: int | None = None
    not_for_message: str | None = None
    count_attempt: bool = False
    data: Mapping[str, FieldValue] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Complete:
    """HELD → DONE, fenced on ``owner``."""

    key: str
    owner: str
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Release:
    """HELD → RELEASED, fenced on ``owner``; ``attempts_delta`` corrects the attempt count."""

    key: str
    owner: str
    expires_at: float
    attempts_delta: int = 0
    data: Mapping[str, FieldValue] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class HandOver:
    """The holder passes the lease to ``to_owner`` (stays HELD), fenced on ``owner``."""

    key: str
    owner: str
    to_owner: str
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Renew:
    """The holder moves the end of its lease to ``lease_until`` (it stays HELD), fenced on ``owner``."""

    key: str
    owner: str
    lease_until: float
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Close:
    """Settle an item nobody holds: when absent, RELEASED, HELD past its lease, or past its TTL.

    It becomes DONE (a cancel marker: nothing acquires it any more) or
    RELEASED (a record of something that did not run: it may be acquired).
    The result's ``item`` is what was there before, or what refused it (HELD
    under a live lease, or DONE). ``expect`` adds conditions on data fields
    (see ``Amend``): a group member's settled outcome is counted only once.
    """

    key: str
    now: float
    expires_at: float
    state: LeaseState = LeaseState.DONE
    data: Mapping[str, FieldValue] = field(default_factory=dict)
    expect: Mapping[str, FieldValue] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Annotate:
    """Set fields on a lease somebody holds under a live lease (a cancel request)."""

    key: str
    now: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class Amend:
    """Change an item that exists, held or not: add to counters and set fields, when ``expect`` holds.

    ``expect`` maps a field to the value it must have (``None``: the field
    must be absent; ``"status"`` names the lease state); ``above`` maps a
    counter to a value it must exceed (an absent counter exceeds nothing).
    ``add`` adds to counters (an absent counter counts from 0). An absent
    item refuses it: counters are created whole, with ``Close``.
    """

    key: str
    add: Mapping[str, int] = field(default_factory=dict)
    data: Mapping[str, FieldValue] = field(default_factory=dict)
    expect: Mapping[str, FieldValue] = field(default_factory=dict)
    above: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.add and not self.data:
            raise ValueError("an amend adds to a counter or sets a field")


#: what a transaction may hold (``Acquire`` replaces an item past its TTL with a second request: not in one)
TransactedOperation = Complete | Release | HandOver | Renew | Close | Annotate | Amend
#: DynamoDB's limit on the items of one TransactWriteItems
MAX_TRANSACTION_OPS = 100


@dataclass(frozen=True, kw_only=True)
class Transact:
    """Operations on distinct keys, written together or not at all (one ``TransactWriteItems``).

    Each keeps its own condition; when one does not hold nothing is written,
    and ``Written.refused_at`` says which one refused (``Written.item`` is the
    item that refused it). Inside a transaction an item past its TTL refuses
    ``Close`` (replacing it whole would take a second request).

    Example:
        >>> Transact(ops=(Amend(key="a", add={"n": 1}), Amend(key="a", add={"n": 1})))
        Traceback (most recent call last):
        ...
        ValueError: a transaction writes each key once; 'a' is written twice
    """

    ops: tuple[TransactedOperation, ...]

    def __post_init__(self) -> None:
        if not 1 <= len(self.ops) <= MAX_TRANSACTION_OPS:
            raise ValueError(f"a transaction holds 1..{MAX_TRANSACTION_OPS} operations, got {len(self.ops)}")
        seen: set[str] = set()
        for op in self.ops:
            if not isinstance(op, Complete | Release | HandOver | Renew | Close | Annotate | Amend):
                raise ValueError(f"a transaction cannot hold {type(op).__name__}")
            if op.key in seen:
                raise ValueError(f"a transaction writes each key once; {op.key!r} is written twice")
            seen.add(op.key)

    @property
    def key(self) -> str:
        """The first operation's key (what a failure is reported under)."""
        return self.ops[0].key


#: an operation on one item
SingleOperation = Acquire | TransactedOperation
Operation = SingleOperation | Transact


@dataclass(frozen=True, kw_only=True)
class Written:
    """What one operation did: ``ok`` when its condition held and the item was written.

    ``item`` is the item before the write for ``Acquire`` and ``Close``, and the
    item that refused the operation when ``ok`` is False (``None``: absent).
    ``error`` is set when the store itself failed (then ``ok`` is False).
    ``refused_at`` is, for a refused ``Transact``, the index of the operation
    whose condition did not hold.
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


# ---------------------------------------------------------------- conditions (the semantics)
def acquirable(item: LeaseItem | None, op: Acquire) -> bool:
    """Whether ``op`` may take ``item``: the rule both stores encode."""
    if item is None or item.past_ttl(op.now):
        return True
    if not fingerprint_fits(item, op.fingerprint, op.fp_version):
        return False
    if op.not_for_message is not None and item.get("dead_letter_of") == op.not_for_message:
        return False
    return item.state is LeaseState.RELEASED or (item.state is LeaseState.HELD and not item.held_live(op.now))


def fingerprint_fits(item: LeaseItem, fingerprint: str | None, version: int | None) -> bool:
    """A fingerprint differs only when both were taken at the same version."""
    return (fingerprint is None or item.fingerprint is None or item.fingerprint == fingerprint
            or item.fp_version != version)


def held_by(item: LeaseItem | None, owner: str) -> bool:
    """The fence: ``owner`` still holds the lease (whatever its ``lease_until``)."""
    return item is not None and item.state is LeaseState.HELD and item.owner == owner


def closable(item: LeaseItem | None, now: float) -> bool:
    """Whether ``Close`` may mark ``item`` DONE."""
    if item is None or item.past_ttl(now):
        return True
    return item.state is LeaseState.RELEASED or (item.state is LeaseState.HELD and not item.held_live(now))


def field_value(item: LeaseItem | None, name: str) -> Any:
    """A field as a condition reads it: ``"status"`` is the lease state, anything else a data field."""
    if item is None:
        return None
    return item.state.value if name == "status" else item.get(name)


def expected(item: LeaseItem | None, expect: Mapping[str, FieldValue]) -> bool:
    """Every field of ``expect`` has its value (``None``: the field is absent)."""
    return all(field_value(item, name) == want for name, want in expect.items())


def amendable(item: LeaseItem | None, op: Amend) -> bool:
    """Whether ``op`` may change ``item``: it exists, ``expect`` holds, each ``above`` counter exceeds its value."""
    if item is None or not expected(item, op.expect):
        return False
    return all(isinstance(have := item.get(name), int | float) and have > bound for name, bound in op.above.items())


# ---------------------------------------------------------------- stores
class LeaseStore(ABC):
    """A table of leases: conditional operations, each one round trip.

    ``write`` runs one operation; ``write_many`` runs several concurrently (one
    round trip for all); ``submit`` starts one and returns at once, so a caller
    can overlap the write with its next piece of work. Failures come back as
    ``Written.error``.

    Example:
        >>> store = InMemoryStore()
        >>> take = Acquire(key="k", owner="a", now=0.0, lease_until=60.0, expires_at=1000.0)
        >>> [w.ok for w in store.write_many([take, take])]
        [True, False]
        >>> store.write(Complete(key="k", owner="a", expires_at=1000.0)).ok
        True
        >>> store.get("k").state
        <LeaseState.DONE: 'DONE'>
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

    def submit(self, op: Operation) -> Future[Written]:
        """Start ``op`` and return at once; the future never raises."""
        return self.run(lambda: self.write(op))

    def run(self, work: Callable[[], Written]) -> Future[Written]:
        """Start ``work`` (writes that depend on each other's answers) like ``submit``; it must not raise."""
        done: Future[Written] = Future()
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


class ConcurrentStore(LeaseStore):
    """A store whose operations wait on the network: run them on a small thread pool.

    The pool is created on first use and kept for the process (a Lambda
    container): a batch has at most 10 records, so its claims need 10
    threads; its limiter probes (``sqsjobs.flow._permits``: a token per limited job
    and limiter, a few slots per concurrency limiter) may need more, and a
    thread is only started when a wave needs it.
    """

    POOL_SIZE = 32

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def write_many(self, ops: Sequence[Operation]) -> list[Written]:
        if len(ops) <= 1:
            return [self.write(op) for op in ops]
        return list(self.pool.map(self.write, ops))

    def submit(self, op: Operation) -> Future[Written]:
        return self.pool.submit(self.write, op)

    def run(self, work: Callable[[], Written]) -> Future[Written]:
        return self.pool.submit(work)

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The thread pool (built once)."""
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.POOL_SIZE, thread_name_prefix="sqsjobs-store")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class InMemoryStore(LeaseStore):
    """Leases in a dict, with the DynamoDB store's semantics: unit tests, the in-process demo.

    ``calls`` counts operations (each would be one DynamoDB request).

    Example:
        >>> store = InMemoryStore()
        >>> store.write(Close(key="k", now=0.0, expires_at=100.0, data={"outcome": "cancelled"})).ok
        True
        >>> store.get("k").get("outcome"), store.calls
        ('cancelled', 1)
    """

    def __init__(self) -> None:
        self._items: dict[str, LeaseItem] = {}
        self._lock = threading.Lock()
        self.calls = 0

    def get(self, key: str) -> LeaseItem | None:
        return self._items.get(key)

    def items(self) -> list[LeaseItem]:
        """Every item (tests and tooling)."""
        with self._lock:
            return list(self._items.values())

    def _apply(self, op: Operation) -> Written:
        with self._lock:
            self.calls += 1
            if isinstance(op, Transact):
                return self._transact(op)
            written, item = self._outcome(op, self._items.get(op.key))
            if item is not None:
                self._put(item)
            return written

    def _transact(self, op: Transact) -> Written:
        """All of ``op.ops`` or none: every condition is checked before anything is written."""
        changed: list[LeaseItem] = []
        for index, inner in enumerate(op.ops):
            current = self._items.get(inner.key)
            if isinstance(inner, Close) and current is not None and current.past_ttl(inner.now):
                return Written(key=op.key, ok=False, item=current, refused_at=index)
            written, item = self._outcome(inner, current)
            if not written.ok:
                return Written(key=op.key, ok=False, item=written.item, refused_at=index)
            if item is not None:
                changed.append(item)
        for item in changed:
            self._put(item)
        return Written(key=op.key, ok=True)

    def _outcome(self, op: Operation, current: LeaseItem | None) -> tuple[Written, LeaseItem | None]:
        """What ``op`` answers on ``current``, and the item to store (None: nothing changes)."""
        if isinstance(op, Acquire):
            return self._acquire(op, current)
        if isinstance(op, Close):
            if not closable(current, op.now):
                return Written(key=op.key, ok=False, item=current), None
            base = None if current is None or current.past_ttl(op.now) else current
            if not expected(base, op.expect):
                return Written(key=op.key, ok=False, item=current), None
            return Written(key=op.key, ok=True, item=base), _updated(
                base, op.key, state=op.state, owner=None, expires_at=op.expires_at, data=op.data)
        if isinstance(op, Annotate):
            if current is None or not current.held_live(op.now):
                return Written(key=op.key, ok=False, item=current), None
            return Written(key=op.key, ok=True), _updated(current, op.key, data=op.data)
        if isinstance(op, Amend):
            if current is None or not amendable(current, op):
                return Written(key=op.key, ok=False, item=current), None
            counters = {name: (current.get(name) or 0) + delta for name, delta in op.add.items()}
            return Written(key=op.key, ok=True), _updated(current, op.key, data={**op.data, **counters})
        if isinstance(op, Transact):
            raise ValueError("a transaction cannot hold another transaction")
        if not held_by(current, op.owner):
            return Written(key=op.key, ok=False, item=current), None
        if isinstance(op, Complete):
            item = _updated(current, op.key, state=LeaseState.DONE, expires_at=op.expires_at, data=op.data)
        elif isinstance(op, Release):
            item = _updated(current, op.key, state=LeaseState.RELEASED, expires_at=op.expires_at,
                            attempts_delta=op.attempts_delta, data=op.data)
        elif isinstance(op, Renew):
            item = _updated(current, op.key, lease_until=op.lease_until, expires_at=op.expires_at, data=op.data)
        else:
            item = _updated(current, op.key, owner=op.to_owner, expires_at=op.expires_at, data=op.data)
        return Written(key=op.key, ok=True), item

    def _acquire(self, op: Acquire, current: LeaseItem | None) -> tuple[Written, LeaseItem | None]:
        if not acquirable(current, op):
            return Written(key=op.key, ok=False, item=current), None
        before = None if current is None or current.past_ttl(op.now) else current
        fingerprint = {"fingerprint": op.fingerprint, "fp_version": op.fp_version} if op.fingerprint else {}
        item = _updated(before, op.key, state=LeaseState.HELD, owner=op.owner, lease_until=op.lease_until,
                        expires_at=op.expires_at, attempts_delta=1 if op.count_attempt else 0,
                        data=op.data, **fingerprint)
        return Written(key=op.key, ok=True, item=before), item

    def _put(self, item: LeaseItem) -> None:
        self._items[item.key] = item


_UNSET: Any = object()


def _updated(item: LeaseItem | None, key: str, *, state: LeaseState | None = None, owner: Any = _UNSET,
             lease_until: Any = _UNSET, expires_at: Any = _UNSET, fingerprint: Any = _UNSET,
             fp_version: Any = _UNSET, attempts_delta: int = 0, data: Mapping[str, FieldValue]) -> LeaseItem:
    """``item`` with the given fields written, as an UpdateItem would (None removes a data field)."""
    base = item or LeaseItem(key=key, state=state or LeaseState.HELD)
    merged = {**base.data, **data}
    return LeaseItem(
        key=key,
        state=state or base.state,
        owner=base.owner if owner is _UNSET else owner,
        lease_until=base.lease_until if lease_until is _UNSET else lease_until,
        expires_at=base.expires_at if expires_at is _UNSET else expires_at,
        fingerprint=base.fingerprint if fingerprint is _UNSET else fingerprint,
        fp_version=base.fp_version if fp_version is _UNSET else fp_version,
        attempts=base.attempts + attempts_delta,
        data={k: v for k, v in merged.items() if v is not None},
    )
