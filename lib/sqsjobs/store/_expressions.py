"""Each operation's rule rendered as pynamodb condition and update expressions, once per shape.

``prepare`` turns a ``Rule`` (``sqsjobs.store._rules``) into the expressions of
one ``UpdateItem`` through the table's model (``store._table.TableItem``), with
named holes (``Hole``) where the values go; ``Prepared.bind`` fills in one
call's values, serialized by the model's attributes. Building an expression
costs ~150 µs, binding ~5 µs, and the shape of an operation never changes,
only its values. ``store/_dynamodb.py`` sends what this renders.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

from pynamodb.attributes import NumberAttribute
from pynamodb.expressions.condition import Condition, Contains
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, Update

from sqsjobs.store import _rules as r
from sqsjobs.store._rules import Rule
from sqsjobs.store._table import KEY_ATTRIBUTE, TableItem
from sqsjobs.store._table import model_attribute as _attribute

#: serializes one element of a number set (a condition's ``contains`` operand)
_NUMBER = NumberAttribute()


@dataclass(frozen=True)
class Hole:
    """A named hole in a prepared expression, filled by each call; ``serialize`` turns its value into DynamoDB's."""

    name: str
    serialize: Callable[[Any], Any]


def _operand(attribute: Any, operand: r.Operand, *, element: bool = False) -> Any:
    """A rule's operand for ``attribute``: a hole for a ``Param``, the value itself for a ``Const``."""
    if isinstance(operand, r.Const):
        return operand.value
    if element:  # one number of a number set (``contains``)
        return Value({"N": Hole(operand.name, _NUMBER.serialize)})
    if attribute.attr_type == "NS":  # a set operand: the one number given, as a set
        return Value({"NS": Hole(operand.name, _one_number_set(attribute))})
    return Value({attribute.attr_type: Hole(operand.name, attribute.serialize)})


def _one_number_set(attribute: Any) -> Callable[[Any], Any]:
    def serialize(value: Any) -> Any:
        return attribute.serialize({value})

    return serialize


def render_condition(condition: r.Condition) -> Condition | None:
    """A rule's condition as a pynamodb condition (None: no condition)."""
    if isinstance(condition, r.Always):
        return None
    if isinstance(condition, r.ItemMissing):
        return cast(Condition, TableItem.pk.does_not_exist())
    if isinstance(condition, r.And | r.Or):
        parts = [render_condition(p) for p in condition.parts]
        result = parts[0]
        for part in parts[1:]:
            assert result is not None and part is not None
            result = (result & part) if isinstance(condition, r.And) else (result | part)
        return cast(Condition, result)
    if isinstance(condition, r.Not):
        inner = render_condition(condition.part)
        assert inner is not None
        return cast(Condition, ~inner)
    attribute = _attribute(condition.field)
    path = Path(attribute)
    if isinstance(condition, r.Missing):
        return cast(Condition, path.does_not_exist())
    if isinstance(condition, r.Present):
        return cast(Condition, path.exists())
    if isinstance(condition, r.Contains):
        element = _operand(attribute, condition.operand, element=True)
        # Path.contains serializes a raw number for a set's element type; a hole is already one.
        return cast(Condition, Contains(path, element) if isinstance(element, Value)  # type: ignore[no-untyped-call]
                    else path.contains(element))
    value = _operand(attribute, condition.operand)
    if isinstance(condition, r.Eq):
        return cast(Condition, path == value)
    if isinstance(condition, r.Lt):
        return cast(Condition, path < value)
    if isinstance(condition, r.Gt):
        return cast(Condition, path > value)
    return cast(Condition, path >= value)


def render_update(update: r.Update) -> Action:
    """One of a rule's updates as a pynamodb update action."""
    attribute = _attribute(update.field)
    path = Path(attribute)
    if isinstance(update, r.Remove):
        return path.remove()
    value = _operand(attribute, update.operand)
    if isinstance(update, r.Set):
        return path.set(value)
    if isinstance(update, r.SetIfMissing):
        return path.set(path | value)  # SET f = if_not_exists(f, :v)
    if isinstance(update, r.Add | r.AddToSet):
        return path.add(value)
    return path.delete(value)


def prepare(rule: Rule) -> Prepared:
    """The request shape of ``rule``: its condition (not past its TTL, when it replaces expired items) and updates.

    Example:
        >>> from sqsjobs.store._lease_ops import Complete
        >>> prepared = prepare(Complete(key="k", owner="a", expires_at=9.0).rule())
        >>> prepared.condition_expression, prepared.update_expression
        ('(#0 = :0 AND #1 = :1)', 'SET #2 = :2, #1 = :3')
    """
    condition = render_condition(rule.condition)
    if rule.replaces_expired:
        # Past its TTL an item is refused here and replaced whole (``DynamoDBStore._replace``).
        live = TableItem.expires_at.does_not_exist() | (TableItem.expires_at >= _operand(TableItem.expires_at,
                                                                                       r.Param("now")))
        condition = live if condition is None else live & condition
    returns = {"old": "ALL_OLD", "new": "ALL_NEW"}.get(rule.returns, "NONE")
    return Prepared(Update(*[render_update(u) for u in rule.updates]), condition, returns)


class Prepared:
    """An operation's expressions, built once by pynamodb; ``bind`` fills in one call's values.

    Example:
        >>> from sqsjobs.store._lease_ops import Complete
        >>> prepared = prepare(Complete(key="k", owner="a", expires_at=9.0).rule())
        >>> prepared.bind("jobs", "k", {"owner": "a", "expires_at": 9.0})["ExpressionAttributeValues"]
        {':1': {'S': 'HELD'}, ':3': {'S': 'DONE'}, ':0': {'S': 'a'}, ':2': {'N': '9.0'}}
    """

    def __init__(self, update: Update, condition: Condition | None, return_values: str) -> None:
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        self.condition_expression = condition.serialize(names, values) if condition is not None else None
        self.update_expression = update.serialize(names, values)
        self.names = {placeholder: name for name, placeholder in names.items()}
        self.constants: dict[str, Any] = {}
        #: (placeholder, DynamoDB type, the hole)
        self.holes: list[tuple[str, str, Hole]] = []
        for placeholder, value in values.items():
            ((kind, inner),) = value.items()
            if isinstance(inner, Hole):
                self.holes.append((placeholder, kind, inner))
            else:
                self.constants[placeholder] = value
        self.return_values = return_values

    def transact_update(self, table: str, key: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """The same update as a ``TransactWriteItems`` entry's ``Update`` (which returns no values)."""
        request = self.bind(table, key, values)
        del request["ReturnValues"]
        return request

    def bind(self, table: str, key: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """The request for ``key`` with ``values`` in the holes."""
        bound = dict(self.constants)
        for placeholder, kind, hole in self.holes:
            bound[placeholder] = {kind: hole.serialize(values[hole.name])}
        request: dict[str, Any] = {
            "TableName": table,
            "Key": {KEY_ATTRIBUTE: {"S": key}},
            "UpdateExpression": self.update_expression,
            "ExpressionAttributeNames": self.names,
            "ExpressionAttributeValues": bound,
            "ReturnValues": self.return_values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if self.condition_expression is not None:
            request["ConditionExpression"] = self.condition_expression
        if not bound:  # an amend that only removes fields: DynamoDB refuses an empty map
            del request["ExpressionAttributeValues"]
        return request
