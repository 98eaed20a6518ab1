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

Each operation states its condition and its updates once, as a ``Rule``
(``sqsjobs.store._rules``): the in-memory store (``sqsjobs.store._memory``)
evaluates it, the DynamoDB store renders it as expressions; one contract suite
runs against both. A store failure is returned as a value (``Written.error``),
never raised, so one bad call cannot break a batch. This module must not import
boto3 or pynamodb.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqsjobs._errors import StoreError
from sqsjobs.store._item import LeaseItem as LeaseItem  # re-exported: the stores and their users import it here
from sqsjobs.store._item import LeaseState as LeaseState
from sqsjobs.store._rules import (
    KEY,
    LEASE_FIELDS,
    Add,
    AddToSet,
    Condition,
    Const,
    Contains,
    DeleteFromSet,
    Eq,
    Ge,
    Gt,
    ItemMissing,
    Lt,
    Missing,
    Not,
    Or,
    Param,
    Present,
    Remove,
    Rule,
    Set,
    SetIfMissing,
    Update,
    all_of,
)

T = TypeVar("T")


#: Keys of items that are not job records; no message or enqueue may claim one.
RESERVED_PREFIXES = ("lock#", "run#", "group#", "chain#", "limit#", "sched#", "sqsjobs#", "dlq#", "redrive#")

#: a field value as stored; ``None`` removes the field; a frozenset is a number set
FieldValue = str | int | float | bool | frozenset[int] | None


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


# ---------------------------------------------------------------- the parts rules share
HELD, RELEASED, DONE = (Const(s.value) for s in (LeaseState.HELD, LeaseState.RELEASED, LeaseState.DONE))


def fence() -> Condition:
    """The caller still holds the lease (whatever its ``lease_until``)."""
    return all_of(Eq("owner", Param("owner")), Eq("status", HELD))


def free() -> Condition:
    """Nobody holds it: RELEASED, or HELD by a lease that ran out."""
    return Or(Eq("status", RELEASED), all_of(Eq("status", HELD), Lt("lease_until", Param("now"))))


def data_updates(data: Mapping[str, FieldValue]) -> tuple[Update, ...]:
    """Set each field of ``data`` (``None``: remove it), in a fixed order; a lease field is not data."""
    for name in data:
        if name in LEASE_FIELDS or name == KEY:
            raise ValueError(f"{name!r} is not a data field of the idempotency table (store/_table.py): "
                             "the lease owns it")
    return tuple(Remove(name) if data[name] is None else Set(name, Param(f"data_{name}")) for name in sorted(data))


def data_values(data: Mapping[str, FieldValue]) -> dict[str, Any]:
    return {f"data_{name}": value for name, value in data.items() if value is not None}


def expecting(expect: Mapping[str, FieldValue]) -> tuple[Condition, ...]:
    """Each field of ``expect`` has its value (``None``: the field is missing; ``"status"``: the lease state)."""
    return tuple(Missing(name) if expect[name] is None else Eq(name, Param(f"expect_{name}"))
                 for name in sorted(expect))


def expect_values(expect: Mapping[str, FieldValue]) -> dict[str, Any]:
    return {f"expect_{name}": value for name, value in expect.items() if value is not None}


# ---------------------------------------------------------------- operations
@dataclass(frozen=True, kw_only=True)
class Acquire:
    """Take the lease when the item is absent, RELEASED, HELD past its lease, or past its TTL.

    ``job`` says whose record this is: a record of another job refuses it.
    ``fingerprint`` (with ``fp_version``) says what the lease is taken for: a
    stored fingerprint of the same version that differs refuses the acquire
    (the key belongs to other work). ``not_for_message`` refuses an item that
    was dead-lettered as that message (a redelivery after a lost acknowledgement).
    ``count_attempt`` adds one to ``attempts``. The result's ``item`` is what
    was there before (absent or past its TTL: ``None``) or what refused it.
    ``fresh`` is a hint, not part of the rule: the caller expects no item (a
    first delivery), so ``write_batch`` may try an insert first
    (``sqsjobs.store._statements``); the answer is the same either way.
    """

    key: str
    owner: str
    now: float
    lease_until: float | None
    expires_at: float
    job: str | None = None
    fingerprint: str | None = None
    fp_version: int | None = None
    not_for_message: str | None = None
    count_attempt: bool = False
    data: Mapping[str, FieldValue] = field(default_factory=dict)
    fresh: bool = False

    def rule(self) -> Rule:
        """Absent, or free and for the same work; then HELD by ``owner``."""
        fits = None
        if self.fingerprint is not None:
            fits = Or(Missing("fingerprint"), Eq("fingerprint", Param("fingerprint")),
                      Not(Eq("fp_version", Param("fp_version"))))
        same_job = Or(Missing("job"), Eq("job", Param("expect_job"))) if self.job is not None else None
        not_dead_lettered_as = (Not(Eq("dead_letter_of", Param("not_for_message")))
                                if self.not_for_message is not None else None)
        updates: list[Update] = [*data_updates(self.data), Set("status", HELD), Set("owner", Param("owner")),
                                 Set("expires_at", Param("expires_at")),
                                 Remove("lease_until") if self.lease_until is None
                                 else Set("lease_until", Param("lease_until"))]
        if self.fingerprint is not None:
            updates += [Set("fingerprint", Param("fingerprint")), Set("fp_version", Param("fp_version"))]
        if self.count_attempt:
            updates.append(Add("attempts", Const(1)))
        return Rule(condition=Or(ItemMissing(), all_of(free(), same_job, fits, not_dead_lettered_as)),
                    updates=tuple(updates), replaces_expired=True, returns="old")

    def values(self) -> dict[str, Any]:
        """The values the rule's parameters take."""
        return {**data_values(self.data), "owner": self.owner, "now": self.now, "lease_until": self.lease_until,
                "expires_at": self.expires_at, "fingerprint": self.fingerprint, "fp_version": self.fp_version,
                "not_for_message": self.not_for_message, "expect_job": self.job}


@dataclass(frozen=True, kw_only=True)
class Complete:
    """HELD → DONE, fenced on ``owner``."""

    key: str
    owner: str
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        return Rule(condition=fence(), updates=(*data_updates(self.data), Set("expires_at", Param("expires_at")),
                                                Set("status", DONE)))

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "owner": self.owner, "expires_at": self.expires_at}


@dataclass(frozen=True, kw_only=True)
class Release:
    """HELD → RELEASED, fenced on ``owner``; ``attempts_delta`` corrects the attempt count."""

    key: str
    owner: str
    expires_at: float
    attempts_delta: int = 0
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        updates: tuple[Update, ...] = (*data_updates(self.data), Set("expires_at", Param("expires_at")),
                                       Set("status", RELEASED))
        if self.attempts_delta:
            updates += (Add("attempts", Param("attempts_delta")),)
        return Rule(condition=fence(), updates=updates)

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "owner": self.owner, "expires_at": self.expires_at,
                "attempts_delta": self.attempts_delta}


@dataclass(frozen=True, kw_only=True)
class HandOver:
    """The holder passes the lease to ``to_owner`` (stays HELD), fenced on ``owner``."""

    key: str
    owner: str
    to_owner: str
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        return Rule(condition=fence(), updates=(*data_updates(self.data), Set("expires_at", Param("expires_at")),
                                                Set("owner", Param("to_owner"))))

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "owner": self.owner, "to_owner": self.to_owner,
                "expires_at": self.expires_at}


@dataclass(frozen=True, kw_only=True)
class Renew:
    """The holder moves the end of its lease to ``lease_until`` (it stays HELD), fenced on ``owner``."""

    key: str
    owner: str
    lease_until: float
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        return Rule(condition=fence(), updates=(*data_updates(self.data), Set("expires_at", Param("expires_at")),
                                                Set("lease_until", Param("lease_until"))))

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "owner": self.owner, "lease_until": self.lease_until,
                "expires_at": self.expires_at}


@dataclass(frozen=True, kw_only=True)
class Close:
    """Settle an item nobody holds: when absent, RELEASED, HELD past its lease, or past its TTL.

    It becomes DONE (a cancel marker: nothing acquires it any more) or
    RELEASED (a record of something that did not run: it may be acquired).
    The result's ``item`` is what was there before, or what refused it (HELD
    under a live lease, or DONE). ``expect`` adds conditions on data fields
    (see ``Amend``).
    """

    key: str
    now: float
    expires_at: float
    state: LeaseState = LeaseState.DONE
    data: Mapping[str, FieldValue] = field(default_factory=dict)
    expect: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        return Rule(condition=all_of(Or(ItemMissing(), free()), *expecting(self.expect)),
                    updates=(*data_updates(self.data), Set("status", Const(self.state.value)),
                             Set("expires_at", Param("expires_at")), Remove("owner")),
                    replaces_expired=True, returns="old")

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), **expect_values(self.expect), "now": self.now,
                "expires_at": self.expires_at}


@dataclass(frozen=True, kw_only=True)
class Annotate:
    """Set fields on a lease somebody holds under a live lease (a cancel request)."""

    key: str
    now: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        live = all_of(Eq("status", HELD), Or(Missing("lease_until"), Ge("lease_until", Param("now"))))
        return Rule(condition=live, updates=data_updates(self.data))

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "now": self.now}


@dataclass(frozen=True, kw_only=True)
class Amend:
    """Change an item that exists, held or not, when ``expect`` holds; the answer carries the item as it became.

    ``expect`` maps a field to the value it must have (``None``: the field
    must be absent; ``"status"`` names the lease state); ``above`` maps a
    counter to a value it must exceed (an absent counter exceeds nothing);
    ``in_set``/``not_in_set`` map a number set to a number it must (not) hold.
    ``add`` adds to counters (an absent counter counts from 0);
    ``add_to_set``/``delete_from_set`` add a number to (remove one from) a
    set. An absent item refuses it: counters are created whole, with ``Close``.
    """

    key: str
    add: Mapping[str, int] = field(default_factory=dict)
    data: Mapping[str, FieldValue] = field(default_factory=dict)
    expect: Mapping[str, FieldValue] = field(default_factory=dict)
    above: Mapping[str, int] = field(default_factory=dict)
    in_set: Mapping[str, int] = field(default_factory=dict)
    not_in_set: Mapping[str, int] = field(default_factory=dict)
    add_to_set: Mapping[str, int] = field(default_factory=dict)
    delete_from_set: Mapping[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (self.add or self.data or self.add_to_set or self.delete_from_set):
            raise ValueError("an amend adds to a counter or a set, or sets a field")

    def rule(self) -> Rule:
        condition = all_of(
            Present("pk"), *expecting(self.expect),
            *(Gt(name, Param(f"above_{name}")) for name in sorted(self.above)),
            *(Contains(name, Param(f"in_{name}")) for name in sorted(self.in_set)),
            *(Not(Contains(name, Param(f"not_in_{name}"))) for name in sorted(self.not_in_set)))
        updates: tuple[Update, ...] = (
            *data_updates(self.data),
            *(Add(name, Param(f"add_{name}")) for name in sorted(self.add)),
            *(AddToSet(name, Param(f"set_add_{name}")) for name in sorted(self.add_to_set)),
            *(DeleteFromSet(name, Param(f"set_delete_{name}")) for name in sorted(self.delete_from_set)))
        return Rule(condition=condition, updates=updates, returns="new")

    def values(self) -> dict[str, Any]:
        named = (("above", self.above), ("in", self.in_set), ("not_in", self.not_in_set), ("add", self.add),
                 ("set_add", self.add_to_set), ("set_delete", self.delete_from_set))
        return {**data_values(self.data), **expect_values(self.expect),
                **{f"{prefix}_{n}": v for prefix, values in named for n, v in values.items()}}


@dataclass(frozen=True, kw_only=True)
class Debounce:
    """A debounced enqueue: the key's latest burst token, due time and one more coalesced request (1 write).

    Written whoever holds the lease (a run of the previous burst may be going
    on); an absent item is created RELEASED, an existing one keeps its state.
    Refused only when the record belongs to another job. ``debounce_base``
    is the running count when a burst starts (``starts_burst``), so the
    burst's size is ``debounce_count - debounce_base``.
    """

    key: str
    job: str
    token: str
    now: float
    due: float
    expires_at: float

    def rule(self) -> Rule:
        mine = Or(ItemMissing(), Missing("job"), Eq("job", Param("job")))
        return Rule(condition=mine, updates=(
            Set("job", Param("job")), Set("debounce_token", Param("token")), Set("debounce_due", Param("due")),
            Set("updated_at", Param("now")), Set("expires_at", Param("expires_at")),
            SetIfMissing("status", RELEASED), SetIfMissing("outcome", Const("waiting")),
            SetIfMissing("debounce_base", Const(0)),
            Add("debounce_count", Const(1))), returns="new")

    def values(self) -> dict[str, Any]:
        return {"job": self.job, "token": self.token, "due": self.due, "now": self.now,
                "expires_at": self.expires_at}


@dataclass(frozen=True, kw_only=True)
class Rearm:
    """A debounced key whose last burst succeeded, and a later burst waits (``token``): DONE → RELEASED.

    Only when ``token`` is the latest and the key's last claim was not for it
    (a burst that completed stays DONE: its copies are duplicates) and the
    key was not cancelled.
    """

    key: str
    token: str
    now: float

    def rule(self) -> Rule:
        return Rule(condition=all_of(Eq("status", DONE), Eq("outcome", Const("succeeded")),
                                     Eq("debounce_token", Param("token")), Not(Eq("ran_token", Param("token")))),
                    updates=(Set("status", RELEASED), Set("outcome", Const("waiting")),
                             Set("updated_at", Param("now"))), returns="new")

    def values(self) -> dict[str, Any]:
        return {"token": self.token, "now": self.now}


@dataclass(frozen=True, kw_only=True)
class Reserve:
    """A deduplicated enqueue takes its key (1 write), unless a request of it is queued or running.

    Refused while another request's reservation is live (``queued_until``
    not passed: a lost message blocks the key until then, no longer), and,
    with ``until_done``, while a run holds the key under a live lease. A
    finished record (DONE, or dead-lettered) frees it; for ``until_started``
    the claim does too (``Stage.claim_data``, worker/_stages.py). An absent item is created RELEASED; an existing one
    keeps its state. The refusal returns the item, naming the request that holds it.
    """

    key: str
    job: str
    request: str
    now: float
    until: float
    expires_at: float
    until_done: bool = False

    def rule(self) -> Rule:
        mine = Or(Missing("job"), Eq("job", Param("job")))
        # A finished key (DONE, dead-lettered) is free: a delivery of it would be a duplicate or a redrive. An
        # until_started key is also freed by its claim; a delivery that never claims (a duplicate) leaves it so.
        unreserved = Or(Missing("queued_until"), Lt("queued_until", Param("now")), Eq("status", DONE),
                        Eq("outcome", Const("dead_lettered")))
        running = all_of(Eq("status", HELD), Ge("lease_until", Param("now")))
        condition = Or(ItemMissing(), all_of(mine, unreserved, Not(running) if self.until_done else None))
        return Rule(condition=condition, updates=(
            Set("job", Param("job")), Set("queued_id", Param("request")), Set("queued_until", Param("until")),
            Set("queued_mode", Const("until_done" if self.until_done else "until_started")),
            Set("updated_at", Param("now")), Set("expires_at", Param("expires_at")),
            SetIfMissing("status", RELEASED), SetIfMissing("outcome", Const("queued"))))

    def values(self) -> dict[str, Any]:
        return {"job": self.job, "request": self.request, "now": self.now, "until": self.until,
                "expires_at": self.expires_at}


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
SingleOperation = Acquire | Debounce | Rearm | Reserve | TransactedOperation
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

    Example:
        >>> from sqsjobs.store._memory import InMemoryStore
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

    def write_batch(self, ops: Sequence[Operation]) -> list[Written]:
        """Run ``ops`` (on distinct keys) in as few requests as the store can; each answered as ``write`` would.

        The DynamoDB store sends the operations a PartiQL statement can carry
        in ``BatchExecuteStatement`` calls of at most 25, the others as single
        requests, all at once (``sqsjobs.store._statements`` says which go
        where); the default is ``write_many``.
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
