"""Lease operations as PartiQL statements: which ones a ``BatchExecuteStatement`` may carry, and how.

A batch's claims and its completions are each one ``BatchExecuteStatement``
(at most 25 statements a call; more go in further calls, sent at once), so a
batch of 10 first deliveries that succeed costs 2 DynamoDB calls, not 20.
Each statement is rendered here from the operation's ``Rule``
(``sqsjobs.store._rules``), the same statement the in-memory store evaluates
and ``sqsjobs.store._dynamodb`` renders as expressions:

- an ``Acquire`` marked ``fresh`` (a first delivery: SQS's receive count is 1)
  is an ``INSERT`` of the item its rule makes from nothing; a refused
  conditional write costs a write unit too, so the consumer only marks first
  deliveries; the items that ``INSERT`` statements found (``DuplicateItem``) are read
  together (one ``BatchGetItem``): an item that refuses the rule (a
  duplicate, a live holder) is the answer, with no second write; the others
  (free, past their TTL) take the single conditional ``UpdateItem``;
- ``Complete``, ``Release``, ``HandOver``, ``Renew`` and ``Annotate`` (rules
  that return nothing on success) are an ``UPDATE ... WHERE "pk" = ? AND
  <condition>``, with ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` so a
  refusal says what refused it without another read.

A statement refused by its condition is answered from the item DynamoDB
returns, *re-checked against the rule*: when the rule would have written on
that item (the statement's extra guard refused it, see below) the operation
falls back to its single request, so every answer is the one ``write`` gives.
A statement that fails for another reason (``ThrottlingError``,
``InternalServerError``, ``ProvisionedThroughputExceeded``,
``TransactionConflict``...) is returned as ``Written.error``, so the record
writes retry it (``worker/_record_writes.py``).

**Kept as single calls, and why:**

- an ``Acquire`` that is not ``fresh`` (a takeover or a redelivery), and
  ``Close`` and ``Amend``: their answer on success carries the item
  (``ALL_OLD``/``ALL_NEW``), and DynamoDB documents no success item for a
  write statement in a batch (``BatchStatementResponse.Item`` is described for
  reads); the claim needs the old record (its attempts, its last error);
- rules with ``Not``: PartiQL's logic makes ``NOT (x = ?)`` unknown, not true,
  when ``x`` is missing, while a ``ConditionExpression`` (and ``Rule.holds``)
  makes it true;
- ``AddToSet``/``DeleteFromSet`` (a group's shard sets) and every ``Transact``
  (a group's member counts must land together: ``TransactWriteItems``).

**Resting on DynamoDB's documentation, not on a run** (moto's PartiQL is no
proof: a second ``INSERT`` of a key succeeds there, a false ``WHERE`` writes,
a ``?`` inside ``VALUE {...}`` crashes its parser; the local cloud and the
tests use ``sqsjobs.local.moto_partiql`` instead, which follows these points):

1. ``INSERT`` of an existing key fails that statement with ``DuplicateItem``
   and writes nothing (treated like ``ConditionalCheckFailed``: both fall
   back to the single request);
2. ``UPDATE`` never creates an item; a ``WHERE`` that does not hold fails the
   statement with ``ConditionalCheckFailed``, and with
   ``ReturnValuesOnConditionCheckFailure=ALL_OLD`` its ``Error.Item`` is the
   item (none when there is no item); an extra ``"status" IS NOT MISSING``
   guard keeps an absent item from ever being written;
3. ``SET "n" = "n" + ?`` fails on a missing ``n`` (as in an update
   expression), so such a statement also guards ``"n" IS NOT MISSING``;
4. statements of one batch succeed or fail each on their own (an HTTP 200
   does not mean every statement succeeded), one item each, at most 25; a
   statement's write costs what the same ``UpdateItem``/``PutItem`` costs;
5. a comparison with a missing attribute is false, and ``OR`` of a true part
   and an unknown one is true (SQL's three-valued logic), as in a condition
   expression.

This module must not import boto3; it renders and reads, it does not send.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any, cast

from sqsjobs._frozen import Value
from sqsjobs.store import _rules as r
from sqsjobs.store._item import LeaseState
from sqsjobs.store._lease import Operation
from sqsjobs.store._lease_ops import (
    Acquire,
    Annotate,
    Complete,
    HandOver,
    Release,
    Renew,
)

#: DynamoDB's limit on the statements of one BatchExecuteStatement
MAX_STATEMENTS = 25
#: the operations whose success answers nothing but ok: an ``UPDATE`` carries them
UPDATES = (Complete, Release, HandOver, Renew, Annotate)


class StatementKind(StrEnum):
    """How an operation goes in a ``BatchExecuteStatement``."""

    INSERT = "INSERT"  #: a fresh ``Acquire``: the item its rule makes from nothing
    UPDATE = "UPDATE"  #: a fenced update whose success returns nothing


def kind_of(op: Operation) -> StatementKind | None:
    """How ``op`` goes in a batch (None: it keeps its single request).

    Example:
        >>> kind_of(Complete(key="k", owner="a", expires_at=9.0)).value
        'UPDATE'
        >>> kind_of(Acquire(key="k", owner="a", now=0.0, lease_until=60.0, expires_at=99.0)) is None  # a takeover
        True
    """
    if isinstance(op, Acquire):
        return StatementKind.INSERT if op.fresh else None
    if isinstance(op, UPDATES):
        return _update_kind(op.rule())
    return None


@functools.lru_cache(maxsize=256)
def _update_kind(rule: r.Rule) -> StatementKind | None:
    if rule.returns == "none" and _expressible(rule.condition) and all(
            isinstance(u, r.Set | r.Remove | r.Add) for u in rule.updates):
        return StatementKind.UPDATE
    return None


def _expressible(condition: r.Condition) -> bool:
    if isinstance(condition, r.Not | r.ItemMissing):
        return False
    if isinstance(condition, r.And | r.Or):
        return all(_expressible(p) for p in condition.parts)
    return True


def plan(ops: Sequence[Operation]) -> tuple[list[int], list[int]]:
    """The indexes of ``ops`` that go in statements, and those that keep single requests.

    Example:
        >>> plan([Complete(key="a", owner="o", expires_at=9.0),
        ...       Acquire(key="b", owner="o", now=0.0, lease_until=60.0, expires_at=99.0)])
        ([0], [1])
    """
    batched = [i for i, op in enumerate(ops) if kind_of(op) is not None]
    chosen = set(batched)
    return batched, [i for i in range(len(ops)) if i not in chosen]


def chunks(indexes: Sequence[int]) -> list[list[int]]:
    """``indexes`` in calls of at most ``MAX_STATEMENTS``.

    Example:
        >>> [len(c) for c in chunks(range(60))]
        [25, 25, 10]
    """
    return [list(indexes[start:start + MAX_STATEMENTS]) for start in range(0, len(indexes), MAX_STATEMENTS)]


# ---------------------------------------------------------------- rendering
# Each rule's statement is rendered once per shape (a rule is the same object for every operation of one shape:
# store/_lease_ops.py), with what fills each ``?`` worked out then: a constant already serialized, or a
# parameter's name and its field's serializer (``_table.wire``). Binding a message is then a dict lookup and
# one small call per ``?``: no rule walked, no pynamodb model built.
#: shapes kept (one per rule and table)
SHAPES_KEPT = 256
#: a ``?`` of an ``UPDATE``: (a parameter's name, its DynamoDB type, its serializer), (None, "", a constant's
#: value), or (None, "", None): the key
Slot = tuple[str | None, str, Any]
#: an ``INSERT``'s column: its attribute value from the call's values (None: the item has none)
Column = Callable[[Mapping[str, Any]], dict[str, Any] | None]


def bind(op: Operation, table: str) -> dict[str, Any]:
    """The ``BatchStatementRequest`` of ``op`` on ``table`` (one that ``kind_of`` puts in a batch).

    Example:
        >>> bind(Complete(key="k", owner="a", expires_at=9.0), "jobs")["Parameters"][2]
        {'S': 'k'}
    """
    if isinstance(op, Acquire):
        return bind_insert(op, table)
    if not isinstance(op, UPDATES):
        raise ValueError(f"{type(op).__name__} has no batched statement (store/_statements.py)")
    return bind_update(update_shape(op.rule(), table), op.key, op.values())


class UpdateShape(Value):
    """An ``UPDATE`` statement's text, and what fills its ``?`` in order (the key is the first ``WHERE`` one)."""

    text: str
    #: each ``?``: the operand and the field whose attribute serializes it (``r.KEY``: the key)
    params: tuple[tuple[r.Operand | None, str], ...]

    @functools.cached_property
    def slots(self) -> tuple[Slot, ...]:
        """Each ``?`` as ``bind_update`` fills it."""
        from sqsjobs.store._table import wire, wire_kind

        def slot(operand: r.Operand | None, field: str) -> Slot:
            if operand is None:
                return None, "", None
            if isinstance(operand, r.Const):
                return None, "", wire(field)(operand.value)
            return operand.name, wire_kind(field), wire(field)
        return tuple(slot(operand, field) for operand, field in self.params)


def _name(field: str) -> str:
    return f'"{_attribute(field).attr_name}"'


def _attribute(field: str) -> Any:
    from sqsjobs.store._table import model_attribute as attribute

    return attribute(field)


@functools.lru_cache(maxsize=SHAPES_KEPT)
def update_shape(rule: r.Rule, table: str) -> UpdateShape:
    """The ``UPDATE`` statement of ``rule`` on ``table`` (built once per rule and table).

    Example:
        >>> shape = update_shape(Complete(key="k", owner="a", expires_at=9.0).rule(), "jobs")
        >>> shape.text
        'UPDATE "jobs" SET "expires_at" = ? SET "status" = ? WHERE "pk" = ? AND "status" IS NOT MISSING \
AND ("owner" = ? AND "status" = ?)'
    """
    actions: list[str] = []
    params: list[tuple[r.Operand | None, str]] = []
    guards: list[str] = ['"status" IS NOT MISSING']
    for update in rule.updates:
        name = _name(update.field)
        if isinstance(update, r.Remove):
            actions.append(f"REMOVE {name}")
        elif isinstance(update, r.Add):
            actions.append(f"SET {name} = {name} + ?")
            guards.append(f"{name} IS NOT MISSING")
            params.append((update.operand, update.field))
        elif isinstance(update, r.Set):
            actions.append(f"SET {name} = ?")
            params.append((update.operand, update.field))
        else:
            raise ValueError(f"{type(update).__name__} has no batched statement (store/_statements.py)")
    params.append((None, r.KEY))
    where = [f'"{r.KEY}" = ?', *guards]
    if not isinstance(rule.condition, r.Always):
        where.append(_condition(rule.condition, params))
    return UpdateShape(text=f'UPDATE "{table}" {" ".join(actions)} WHERE {" AND ".join(where)}',
                       params=tuple(params))


def _condition(condition: r.Condition, params: list[tuple[r.Operand | None, str]]) -> str:
    if isinstance(condition, r.And | r.Or):
        joiner = " AND " if isinstance(condition, r.And) else " OR "
        return "(" + joiner.join(_condition(p, params) for p in condition.parts) + ")"
    if isinstance(condition, r.Missing):
        return f"{_name(condition.field)} IS MISSING"
    if isinstance(condition, r.Present):
        return f"{_name(condition.field)} IS NOT MISSING"
    if isinstance(condition, r.Eq | r.Lt | r.Gt | r.Ge):
        params.append((condition.operand, condition.field))
        symbol = {r.Eq: "=", r.Lt: "<", r.Gt: ">", r.Ge: ">="}[type(condition)]
        return f"{_name(condition.field)} {symbol} ?"
    raise ValueError(f"{type(condition).__name__} has no batched statement (store/_statements.py)")


def bind_update(shape: UpdateShape, key: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """One ``BatchStatementRequest`` of ``shape`` for ``key``.

    Example:
        >>> shape = update_shape(Complete(key="k", owner="a", expires_at=9.0).rule(), "jobs")
        >>> bind_update(shape, "k", {"owner": "a", "expires_at": 9.0})["Parameters"]
        [{'N': '9.0'}, {'S': 'DONE'}, {'S': 'k'}, {'S': 'a'}, {'S': 'HELD'}]
    """
    parameters: list[dict[str, Any]] = []
    for name, kind, how in shape.slots:
        if name is None:
            parameters.append({"S": key} if how is None else dict(how))
            continue
        # A string's or a finite number's attribute value written here, as ``how`` (``_table.wire``) writes it:
        # the call was most of a statement's binding.
        given = values[name]
        of = type(given)
        if of is str and kind == "S":
            parameters.append({"S": given})
        elif kind == "N" and (of is int or (of is float and math.isfinite(given))):
            parameters.append({"N": repr(given)})
        else:
            parameters.append(how(given))
    return {"Statement": shape.text, "Parameters": parameters, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


class InsertShape(Value):
    """An ``INSERT``: the item a rule makes from nothing, column by column (the key first, then the model's order).

    A column's value is worked out as ``Rule.apply`` works it out on no item
    (``r.updated`` for each of the rule's updates on that field, in order)
    and stored as ``_table.table_item`` stores it (``_table.stored``); a
    column whose value comes out missing is left out of the statement.
    """

    table: str
    #: each column after the key that may have a value: its attribute name, and its value
    columns: tuple[tuple[str, Column], ...]

    @functools.cached_property
    def text(self) -> str:
        """The statement when every column has a value."""
        return self.text_of(tuple(name for name, _ in self.columns))

    def text_of(self, names: tuple[str, ...]) -> str:
        """The statement of the key and the columns ``names``."""
        listed = ", ".join(f"'{name}': ?" for name in (r.KEY, *names))
        return f'INSERT INTO "{self.table}" VALUE {{{listed}}}'

    @functools.cached_property
    def plain(self) -> tuple[tuple[str | None, str, Column], ...]:
        """Each column as ``bind`` reads it: a plain column's parameter name and DynamoDB type, and its function.

        A plain column is one parameter set as it is (``_column``'s common case); ``bind`` writes its string,
        integer, finite float or boolean itself, as its function would, and calls the function for the rest.
        """
        return tuple((column.name, column.kind, column) if isinstance(column, PlainColumn) else (None, "", column)
                     for _, column in self.columns)

    def bind(self, key: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """The ``BatchStatementRequest`` inserting ``key``'s item with ``values``."""
        parameters: list[dict[str, Any]] = [{"S": key}]
        left_out = False
        for name, kind, column in self.plain:
            if name is not None:  # inlined: a claim's item is mostly plain columns, and the calls were half its cost
                given = values[name]
                of = type(given)
                if of is str and kind == "S":
                    parameters.append({"S": given})
                    continue
                if kind == "N" and (of is int or (of is float and math.isfinite(given))):
                    parameters.append({"N": repr(given)})
                    continue
                if of is bool and kind == "BOOL":
                    parameters.append({"BOOL": given})
                    continue
            value = column(values)
            if value is None:
                left_out = True
            else:
                parameters.append(value)
        text = self.text
        if left_out:
            text = self.text_of(tuple(name for name, column in self.columns if column(values) is not None))
        return {"Statement": text, "Parameters": parameters, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


@functools.lru_cache(maxsize=SHAPES_KEPT)
def insert_shape(rule: r.Rule, table: str) -> InsertShape:
    """The ``INSERT`` of the item ``rule`` makes where there is none, on ``table`` (built once per rule and table).

    Example:
        >>> take = Acquire(key="k", owner="a", now=0.0, lease_until=60.0, expires_at=99.0, fresh=True)
        >>> [name for name, _ in insert_shape(take.rule(), "jobs").columns]
        ['expires_at', 'lease_until', 'owner', 'status']
    """
    from sqsjobs.store._table import FIELDS, model_attribute

    by_field: dict[str, list[r.Update]] = {"status": []}
    for update in rule.updates:
        if update.field == r.KEY:
            raise ValueError("an INSERT's key is its own: no update may write it (store/_statements.py)")
        model_attribute(update.field)  # an unknown field is refused here, as the single request refuses it
        by_field.setdefault(update.field, []).append(update)
    order = {name: rank for rank, name in enumerate(FIELDS)}
    columns = ((model_attribute(field).attr_name, _column(field, tuple(updates)))
               for field, updates in sorted(by_field.items(), key=lambda pair: order[pair[0]]))
    return InsertShape(table=table, columns=tuple((name, column) for name, column in columns if column is not None))


def _column(field: str, updates: tuple[r.Update, ...]) -> Column | None:
    """``field``'s column in the new item, or None when it never has a value (only removed)."""
    from sqsjobs.store._table import stored, wire, wire_kind

    serialize = wire(field)

    def kept(given: Any) -> dict[str, Any] | None:
        value = stored(field, given)
        if value is None:
            return None
        wired = serialize(value)
        return None if next(iter(wired.values())) is None else wired  # pynamodb leaves out what serializes to None

    def value(values: Mapping[str, Any]) -> dict[str, Any] | None:
        if field == "status":
            status: str | None = None
            for update in updates:
                status = r.status_after(update, status, values)
            return serialize(LeaseState(status or LeaseState.HELD.value).value)
        current: Any = 0 if field == "attempts" else None  # what ``Rule.apply`` starts a new item's fields at
        for update in updates:
            current = r.updated(update, current, values)
        if field == "attempts":
            current = int(current or 0)
        return None if current is None else kept(current)

    if all(isinstance(u, r.Remove) or isinstance(u.operand, r.Const) for u in updates):
        constant = value({})  # no parameter: the column is the same for every call
        return None if constant is None else lambda values: dict(constant)
    if len(updates) == 1 and isinstance(updates[0], r.Set) and field not in ("status", "attempts") \
            and wire_kind(field) not in ("NS", "SS", "BS"):
        # The common column: one parameter, set as it is, of a type that serializes a value to a value
        # (a string, a number, a boolean; not a set, which is left out when empty).
        return PlainColumn(cast(r.Param, updates[0].operand).name, wire_kind(field), serialize, kept)
    return value


class PlainColumn:
    """The common column: one parameter, set as it is (``None``: no value; a number set goes through ``kept``).

    ``InsertShape.bind`` writes a plain column's string, integer, finite float
    or boolean itself, exactly as ``serialize`` would (``_table.wire``), and
    calls it for any other value.
    """

    __slots__ = ("kept", "kind", "name", "serialize")

    def __init__(self, name: str, kind: str, serialize: Callable[[Any], dict[str, Any]],
                 kept: Callable[[Any], dict[str, Any] | None]) -> None:
        self.name, self.kind, self.serialize, self.kept = name, kind, serialize, kept

    def __call__(self, values: Mapping[str, Any]) -> dict[str, Any] | None:
        given = values[self.name]
        if given is None:
            return None
        return self.kept(given) if type(given) is frozenset else self.serialize(given)


def bind_insert(op: Acquire, table: str) -> dict[str, Any]:
    """The ``INSERT`` of the item ``op``'s rule makes where there is none.

    Example:
        >>> take = Acquire(key="k", owner="a", now=0.0, lease_until=60.0, expires_at=99.0, fresh=True)
        >>> request = bind_insert(take, "jobs")
        >>> print(request["Statement"])
        INSERT INTO "jobs" VALUE {'pk': ?, 'expires_at': ?, 'lease_until': ?, 'owner': ?, 'status': ?}
        >>> request["Parameters"][:2]
        [{'S': 'k'}, {'N': '99.0'}]
    """
    return insert_shape(op.rule(), table).bind(op.key, op.values())
