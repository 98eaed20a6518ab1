"""Each lease operation's rule, stated once: a condition and the updates it makes, as data.

An operation (``sqsjobs.store._lease_ops``, ``sqsjobs.store._enqueue_ops``) says what it means as a ``Rule``: a
condition on the item as it is, and the updates that make the item it
becomes. Everything that carries operations out reads that one statement:

- the in-memory store evaluates it (``Rule.holds``, ``Rule.apply``);
- the DynamoDB store renders it as pynamodb condition and update expressions
  (``sqsjobs.store._dynamodb``), so DynamoDB checks the same condition
  atomically on its side;
- the contract suite (tests/integration/test_lease_contract.py) runs every
  operation against both, so the two readings cannot drift apart.

Conditions read like DynamoDB's: a comparison with a missing field is false
(so ``Not(Eq(...))`` holds when the field is missing), ``Contains`` reads a
number set, and the item itself is missing when its key is (``ItemMissing``).
Values are named ``Param``s bound per call (the shape of an operation never
changes, only its values), or ``Const``s.

Example:
    >>> from sqsjobs.store._item import LeaseItem, LeaseState
    >>> free = Or(ItemMissing(), Eq("status", Const("RELEASED")))
    >>> rule = Rule(condition=free, updates=(Set("status", Const("HELD")), Set("owner", Param("owner"))))
    >>> rule.holds(None, {"owner": "a"}), rule.apply(None, "k", {"owner": "a"}).owner
    (True, 'a')
    >>> held = LeaseItem(key="k", state=LeaseState.HELD, owner="b")
    >>> rule.holds(held, {"owner": "a"})
    False
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from sqsjobs._frozen import Value
from sqsjobs.store._item import LeaseItem, LeaseState

#: the fields the lease itself owns (``LeaseItem`` attributes); every other field is the user's ``data``
LEASE_FIELDS = frozenset({"status", "owner", "lease_until", "expires_at", "fingerprint", "fp_version", "attempts"})
#: the item's key
KEY = "pk"


# ---------------------------------------------------------------- values
class Param(Value):
    """A value bound per call, by name."""

    name: str


class Const(Value):
    """A value fixed in the rule (a lease state, the number 1).

    Two constants are equal only when their values are of the same type: a
    rule is the key of the request shapes rendered from it (its constants
    serialized into them: store/_statements.py, store/_dynamodb.py), and
    ``0 == 0.0 == False`` would hand one rule's shape to another.

    Example:
        >>> Const(1) == Const(1), Const(1) == Const(1.0), Const(1) == Const(True)
        (True, False, False)
    """

    value: Any

    def __eq__(self, other: object) -> bool:
        return (type(other) is Const and type(other.value) is type(self.value)
                and bool(other.value == self.value))

    def __hash__(self) -> int:
        return hash((type(self.value), self.value))


Operand = Param | Const


def _value(operand: Operand, values: Mapping[str, Any]) -> Any:
    return operand.value if isinstance(operand, Const) else values[operand.name]


# ---------------------------------------------------------------- conditions
class ItemMissing(Value):
    """No item has the key."""


class Missing(Value):
    """The item has no ``field`` (or there is no item)."""

    field: str


class Present(Value):
    """The item has ``field``."""

    field: str


class Eq(Value):
    """``field`` equals the operand."""

    field: str
    operand: Operand


class Lt(Value):
    """``field`` is below the operand (a number)."""

    field: str
    operand: Operand


class Gt(Value):
    """``field`` is above the operand (a number)."""

    field: str
    operand: Operand


class Ge(Value):
    """``field`` is at least the operand (a number)."""

    field: str
    operand: Operand


class Contains(Value):
    """The number set ``field`` holds the operand."""

    field: str
    operand: Operand


class Not(Value):
    """``part`` does not hold."""

    part: Condition


class And(Value):
    """Every part holds."""

    parts: tuple[Condition, ...]

    def __init__(self, *parts: Condition) -> None:
        object.__setattr__(self, "parts", tuple(parts))


class Or(Value):
    """Some part holds."""

    parts: tuple[Condition, ...]

    def __init__(self, *parts: Condition) -> None:
        object.__setattr__(self, "parts", tuple(parts))


def all_of(*parts: Condition | None) -> Condition:
    """The conjunction of the parts given (``None`` parts are left out; none at all: always true).

    Example:
        >>> all_of(Present("a"), None)
        Present(field='a')
    """
    kept = tuple(p for p in parts if p is not None)
    if not kept:
        return Always()
    return kept[0] if len(kept) == 1 else And(*kept)


class Always(Value):
    """No condition."""


Condition = ItemMissing | Missing | Present | Eq | Lt | Gt | Ge | Contains | Not | And | Or | Always


def field_of(item: Any, name: str) -> Any:
    """A field as a condition reads it (``None``: missing); ``status`` is the lease state's value."""
    if item is None:
        return None
    if name == KEY:
        return item.key
    if name == "status":
        return item.state.value
    if name in LEASE_FIELDS:
        return getattr(item, name)
    return item.data.get(name)


def holds(condition: Condition, item: Any, values: Mapping[str, Any]) -> bool:
    """Whether ``condition`` holds on ``item`` (a ``LeaseItem`` or None) with ``values`` bound."""
    if isinstance(condition, Always):
        return True
    if isinstance(condition, ItemMissing):
        return item is None
    if isinstance(condition, And):
        return all(holds(p, item, values) for p in condition.parts)
    if isinstance(condition, Or):
        return any(holds(p, item, values) for p in condition.parts)
    if isinstance(condition, Not):
        return not holds(condition.part, item, values)
    have = field_of(item, condition.field)
    if isinstance(condition, Missing):
        return have is None
    if isinstance(condition, Present):
        return have is not None
    want = _value(condition.operand, values)
    if have is None:
        return False
    if isinstance(condition, Eq):
        return bool(have == want)
    if isinstance(condition, Contains):
        return isinstance(have, frozenset | set) and want in have
    if not isinstance(have, int | float) or isinstance(have, bool):
        return False
    if isinstance(condition, Lt):
        return bool(have < want)
    if isinstance(condition, Gt):
        return bool(have > want)
    return bool(have >= want)


# ---------------------------------------------------------------- updates
class Set(Value):
    """``field`` takes the operand's value."""

    field: str
    operand: Operand


class Remove(Value):
    """``field`` is removed."""

    field: str


class Add(Value):
    """The number ``field`` grows by the operand (a missing field counts from 0)."""

    field: str
    operand: Operand


class AddToSet(Value):
    """The number set ``field`` gains the operand (a number)."""

    field: str
    operand: Operand


class DeleteFromSet(Value):
    """The number set ``field`` loses the operand (a number); an emptied set is removed."""

    field: str
    operand: Operand


class SetIfMissing(Value):
    """``field`` takes the operand's value only when the item has no ``field`` (DynamoDB's ``if_not_exists``).

    One write can then create an item whole or touch an existing one without
    changing its state (a debounce's or a dedupe's enqueue: enqueue/_debounce.py).
    """

    field: str
    operand: Operand


Update = Set | SetIfMissing | Remove | Add | AddToSet | DeleteFromSet


class Rule(Value, kw_only=True):
    """What an operation means: when it may write (``condition``) and what it writes (``updates``).

    ``replaces_expired``: an item past its TTL counts as missing (DynamoDB
    deletes such items days late; their old fields must not leak into what
    replaces them). ``returns``: what the answer carries on success, the item
    as it was (``"old"``), as it became (``"new"``), or nothing.
    """

    condition: Condition = Always()
    updates: tuple[Update, ...] = ()
    replaces_expired: bool = False
    returns: str = "none"

    def holds(self, item: Any, values: Mapping[str, Any]) -> bool:
        """Whether the condition holds on ``item``."""
        return holds(self.condition, item, values)

    def apply(self, item: Any, key: str, values: Mapping[str, Any]) -> Any:
        """The ``LeaseItem`` that ``item`` (None: a new item under ``key``) becomes."""
        lease: dict[str, Any] = {name: field_of(item, name) for name in LEASE_FIELDS if name != "status"}
        lease["attempts"] = item.attempts if item is not None else 0
        status = item.state.value if item is not None else None
        data: dict[str, Any] = dict(item.data) if item is not None else {}
        for update in self.updates:
            if update.field == "status":
                status = status_after(update, status, values)
                continue
            target = lease if update.field in LEASE_FIELDS else data
            target[update.field] = updated(update, target.get(update.field), values)
        return LeaseItem(key=key, state=LeaseState(status or LeaseState.HELD.value), owner=lease["owner"],
                         lease_until=lease["lease_until"], expires_at=lease["expires_at"],
                         fingerprint=lease["fingerprint"], fp_version=lease["fp_version"],
                         attempts=int(lease["attempts"] or 0),
                         data={name: value for name, value in data.items() if value is not None})

    def __hash__(self) -> int:
        # Rules are cache keys (the stores' request shapes, store/_statements.py): hash the nested tree once.
        cached: int | None = self.__dict__.get("_hash")
        if cached is None:
            cached = hash((self.condition, self.updates, self.replaces_expired, self.returns))
            object.__setattr__(self, "_hash", cached)
        return cached


def updated(update: Update, current: Any, values: Mapping[str, Any]) -> Any:
    """The value ``update`` leaves in a field (not ``status``) that held ``current`` (``None``: missing).

    ``Rule.apply`` applies each update with it, and an ``INSERT``'s columns
    (store/_statements.py) are computed with it, so the two cannot differ.

    Example:
        >>> updated(Add("attempts", Const(1)), None, {}), updated(SetIfMissing("job", Param("j")), "a", {"j": "b"})
        (1, 'a')
    """
    if isinstance(update, Remove):
        return None
    value = _value(update.operand, values)
    if isinstance(update, Set):
        return value
    if isinstance(update, SetIfMissing):
        return value if current is None else current
    if isinstance(update, Add):
        return (current or 0) + value
    if isinstance(update, AddToSet):
        return frozenset(current or ()) | {value}
    return frozenset(current or ()) - {value} or None


def status_after(update: Update, status: str | None, values: Mapping[str, Any]) -> str | None:
    """The lease state's value after ``update`` on ``status``: it is set (if missing), never removed."""
    if isinstance(update, Remove):
        raise ValueError("a lease's status is never removed")
    value = _value(update.operand, values)
    if isinstance(update, SetIfMissing):
        return status or value
    return cast(str | None, value)
