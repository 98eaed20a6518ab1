"""The lease's own operations (``sqsjobs.store._lease`` draws their states): each a rule, stated once.

``Acquire``, ``Complete``, ``Release``, ``HandOver``, ``Renew``, ``Close``,
``Annotate`` and ``Amend`` are immutable values (``sqsjobs._frozen``: the three a batch makes per message
are ``per_message`` dataclasses, the rest ``Value`` classes); ``rule()`` says what must
hold and what changes (``sqsjobs.store._rules``), ``values()`` what its
parameters take. A rule depends on an operation's *shape* only (which fields
it writes or removes, which checks it makes), never on its values, so the
operations a batch carries build theirs once per shape (``functools.lru_cache``
below): the same rule object comes back for every claim of a job, and the
stores' request shapes are cached by it (store/_statements.py). ``Transact`` holds several of them on distinct keys. The
parts every rule shares (the states as constants, the fence, data fields) are
here too; the enqueue side's operations (``sqsjobs.store._enqueue_ops``) use
them. This module must not import boto3 or pynamodb.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from sqsjobs._frozen import Value, per_message
from sqsjobs.store._item import LeaseState
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
    Update,
    all_of,
)

#: a field value as stored; ``None`` removes the field; a frozenset is a number set
FieldValue = str | int | float | bool | frozenset[int] | None
#: what a rule reads of an operation's ``data``: each field's name, and whether it is removed (``None``)
DataShape = tuple[tuple[str, bool], ...]
#: rules kept per shape builder (a deployment has a handful of shapes: a job's claim, its endings)
RULES_KEPT = 256
#: the number set of the messages a key's record dead-lettered (``letter_number`` of each): a copy of a letter
#: (one held back, or re-sent at its backstop, by a follow-up that failed) never claims the key again, even
#: after a redrive dead-lettered it once more as another message
LETTERS = "letters"


# ---------------------------------------------------------------- the parts rules share
HELD, RELEASED, DONE = (Const(s.value) for s in (LeaseState.HELD, LeaseState.RELEASED, LeaseState.DONE))


def fence() -> Condition:
    """The caller still holds the lease (whatever its ``lease_until``)."""
    return all_of(Eq("owner", Param("owner")), Eq("status", HELD))


def free() -> Condition:
    """Nobody holds it: RELEASED, or HELD by a lease that ran out."""
    return Or(Eq("status", RELEASED), all_of(Eq("status", HELD), Lt("lease_until", Param("now"))))


def data_shape(data: Mapping[str, FieldValue]) -> DataShape:
    """What ``data_updates`` reads of ``data``: the names, and which are removed (in ``data``'s order: cheaper).

    Example:
        >>> data_shape({"result": None, "outcome": "succeeded"})
        (('result', True), ('outcome', False))
    """
    return tuple([(name, value is None) for name, value in data.items()])


def data_updates(data: Mapping[str, FieldValue]) -> tuple[Update, ...]:
    """Set each field of ``data`` (``None``: remove it), in a fixed order; a lease field is not data."""
    return shaped_data_updates(data_shape(data))


def shaped_data_updates(shape: DataShape) -> tuple[Update, ...]:
    """``data_updates`` of any data of ``shape``: by name, so the order the data was given in does not matter."""
    for name, _ in shape:
        if name in LEASE_FIELDS or name == KEY:
            raise ValueError(f"{name!r} is not a data field of the idempotency table (store/_table.py): "
                             "the lease owns it")
    return tuple(Remove(name) if removed else Set(name, Param(f"data_{name}")) for name, removed in sorted(shape))


def data_values(data: Mapping[str, FieldValue]) -> dict[str, Any]:
    """``data``'s parameters (``data_<name>``), the removed fields left out."""
    names = _DATA_PARAMS
    return {names.get(name) or _data_param(name): value for name, value in data.items() if value is not None}


#: ``data_<name>`` by field name: a few dozen fields, named once each instead of once a message
_DATA_PARAMS: dict[str, str] = {}


def _data_param(name: str) -> str:
    param = _DATA_PARAMS[name] = f"data_{name}"
    return param


def expecting(expect: Mapping[str, FieldValue]) -> tuple[Condition, ...]:
    """Each field of ``expect`` has its value (``None``: the field is missing; ``"status"``: the lease state)."""
    return tuple(Missing(name) if expect[name] is None else Eq(name, Param(f"expect_{name}"))
                 for name in sorted(expect))


def expect_values(expect: Mapping[str, FieldValue]) -> dict[str, Any]:
    return {f"expect_{name}": value for name, value in expect.items() if value is not None}



# ---------------------------------------------------------------- operations
@per_message
class Acquire:
    """Take the lease when the item is absent, RELEASED, HELD past its lease, or past its TTL.

    ``job`` says whose record this is: a record of another job refuses it.
    ``fingerprint`` (with ``fp_version``) says what the lease is taken for: a
    stored fingerprint of the same version that differs refuses the acquire
    (the key belongs to other work). ``not_for_message`` refuses an item that
    dead-lettered that message, last or ever (``LETTERS``): a redelivery after a
    lost acknowledgement, a letter's copy held back for a follow-up.
    ``count_attempt`` adds one to ``attempts``. ``not_equal`` and
    ``not_in_set`` refuse an item whose field has that value, or whose number
    set holds that number (a debounced key that completed this very request:
    worker/_request.py). The result's ``item`` is what
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
    not_equal: Mapping[str, str] = field(default_factory=dict)
    not_in_set: Mapping[str, int] = field(default_factory=dict)

    def rule(self) -> Rule:
        """Absent, or free and for the same work; then HELD by ``owner``."""
        # Positional arguments: a cache key of keywords costs more to build than the rest of the lookup.
        return _acquire_rule(data_shape(self.data), self.lease_until is None, self.fingerprint is not None,
                             self.job is not None, self.not_for_message is not None, bool(self.count_attempt),
                             tuple(sorted(self.not_equal)) if self.not_equal else (),
                             tuple(sorted(self.not_in_set)) if self.not_in_set else ())

    def values(self) -> dict[str, Any]:
        """The values the rule's parameters take."""
        values = data_values(self.data)
        values.update(owner=self.owner, now=self.now, lease_until=self.lease_until, expires_at=self.expires_at,
                      fingerprint=self.fingerprint, fp_version=self.fp_version,
                      not_for_message=self.not_for_message, expect_job=self.job,
                      not_letter=letter_number(self.not_for_message) if self.not_for_message else None)
        if self.not_equal or self.not_in_set:
            values.update({f"not_{name}": v for name, v in self.not_equal.items()})
            values.update({f"not_in_{name}": v for name, v in self.not_in_set.items()})
        return values


@functools.lru_cache(maxsize=RULES_KEPT)
def _acquire_rule(data: DataShape, endless: bool, fingerprinted: bool, for_job: bool, not_for_message: bool,
                  count_attempt: bool, not_equal: tuple[str, ...] = (), not_in_set: tuple[str, ...] = ()) -> Rule:
    """``Acquire.rule`` of every acquire of this shape."""
    fits = None
    if fingerprinted:
        fits = Or(Missing("fingerprint"), Eq("fingerprint", Param("fingerprint")),
                  Not(Eq("fp_version", Param("fp_version"))))
    same_job = Or(Missing("job"), Eq("job", Param("expect_job"))) if for_job else None
    not_dead_lettered_as = all_of(Not(Eq("dead_letter_of", Param("not_for_message"))),
                                  Not(Contains(LETTERS, Param("not_letter")))) if not_for_message else None
    updates: list[Update] = [*shaped_data_updates(data), Set("status", HELD), Set("owner", Param("owner")),
                             Set("expires_at", Param("expires_at")),
                             Remove("lease_until") if endless else Set("lease_until", Param("lease_until"))]
    if fingerprinted:
        updates += [Set("fingerprint", Param("fingerprint")), Set("fp_version", Param("fp_version"))]
    if count_attempt:
        updates.append(Add("attempts", Const(1)))
    not_done = (*(Not(Eq(name, Param(f"not_{name}"))) for name in not_equal),
                *(Not(Contains(name, Param(f"not_in_{name}"))) for name in not_in_set))
    return Rule(condition=Or(ItemMissing(), all_of(free(), same_job, fits, not_dead_lettered_as, *not_done)),
                updates=tuple(updates), replaces_expired=True, returns="old")


@functools.lru_cache(maxsize=RULES_KEPT)
def _fenced_rule(data: DataShape, ending: str, added: tuple[str, ...] = ()) -> Rule:
    """The rule of a fenced write of this shape: ``data``'s updates, a number put in each ``added`` set, then
    the operation's own (``_ENDINGS[ending]``).

    The cache key is names only: hashing the updates themselves (dataclasses, hashed in Python) cost more
    than building the rule's key did.
    """
    added_updates = tuple(AddToSet(name, Param(f"add_{name}")) for name in added)
    return Rule(condition=fence(), updates=(*shaped_data_updates(data), *added_updates, *_ENDINGS[ending]))


_RELEASES = (Set("expires_at", Param("expires_at")), Set("status", RELEASED))
#: what each fenced operation writes after its data (``_fenced_rule``)
_ENDINGS: dict[str, tuple[Update, ...]] = {
    "complete": (Set("expires_at", Param("expires_at")), Set("status", DONE)),
    "release": _RELEASES,
    "release_counted": (*_RELEASES, Add("attempts", Param("attempts_delta"))),
    "hand_over": (Set("expires_at", Param("expires_at")), Set("owner", Param("to_owner"))),
    "renew": (Set("expires_at", Param("expires_at")), Set("lease_until", Param("lease_until"))),
}


@per_message
class Complete:
    """HELD → DONE, fenced on ``owner``; ``add`` puts one number in each named number set."""

    key: str
    owner: str
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)
    add: Mapping[str, int] = field(default_factory=dict)

    def rule(self) -> Rule:
        return _fenced_rule(data_shape(self.data), "complete", tuple(sorted(self.add)) if self.add else ())

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), **{f"add_{name}": n for name, n in self.add.items()},
                "owner": self.owner, "expires_at": self.expires_at}


@per_message
class Release:
    """HELD → RELEASED, fenced on ``owner``; ``attempts_delta`` corrects the attempt count; ``add`` puts one
    number in each named number set (a dead letter's in ``letters``)."""

    key: str
    owner: str
    expires_at: float
    attempts_delta: int = 0
    data: Mapping[str, FieldValue] = field(default_factory=dict)
    add: Mapping[str, int] = field(default_factory=dict)

    def rule(self) -> Rule:
        return _fenced_rule(data_shape(self.data), "release_counted" if self.attempts_delta else "release",
                            tuple(sorted(self.add)) if self.add else ())

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), **{f"add_{name}": n for name, n in self.add.items()},
                "owner": self.owner, "expires_at": self.expires_at, "attempts_delta": self.attempts_delta}


class HandOver(Value, kw_only=True):
    """The holder passes the lease to ``to_owner`` (stays HELD), fenced on ``owner``."""

    key: str
    owner: str
    to_owner: str
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        return _fenced_rule(data_shape(self.data), "hand_over")

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "owner": self.owner, "to_owner": self.to_owner,
                "expires_at": self.expires_at}


class Renew(Value, kw_only=True):
    """The holder moves the end of its lease to ``lease_until`` (it stays HELD), fenced on ``owner``."""

    key: str
    owner: str
    lease_until: float
    expires_at: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        return _fenced_rule(data_shape(self.data), "renew")

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "owner": self.owner, "lease_until": self.lease_until,
                "expires_at": self.expires_at}


class Close(Value, kw_only=True):
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


class Annotate(Value, kw_only=True):
    """Set fields on a lease somebody holds under a live lease (a cancel request)."""

    key: str
    now: float
    data: Mapping[str, FieldValue] = field(default_factory=dict)

    def rule(self) -> Rule:
        live = all_of(Eq("status", HELD), Or(Missing("lease_until"), Ge("lease_until", Param("now"))))
        return Rule(condition=live, updates=data_updates(self.data))

    def values(self) -> dict[str, Any]:
        return {**data_values(self.data), "now": self.now}


class Amend(Value, kw_only=True):
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



#: what a transaction may hold (``Acquire`` replaces an item past its TTL with a second request: not in one)
TransactedOperation = Complete | Release | HandOver | Renew | Close | Annotate | Amend
#: DynamoDB's limit on the items of one TransactWriteItems
MAX_TRANSACTION_OPS = 100


class Transact(Value, kw_only=True):
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


def letter_number(message_id: str) -> int:
    """The number that stands for a dead-lettered message in its record's ``LETTERS`` (48 bits of its hash).

    Example:
        >>> letter_number("m-1") == letter_number("m-1") != letter_number("m-2")
        True
        >>> letter_number("m-1") < 2 ** 48
        True
    """
    return int(hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()[:12], 16)
