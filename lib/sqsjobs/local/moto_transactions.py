"""``TransactWriteItems`` for the local cloud's moto server: every condition checked first, nothing copied.

moto's own ``transact_write_items`` deep-copies each table a transaction
touches, to put it back if a condition fails: about 70 µs per item of the
table per transaction (200 ms at 3,000 items), and a job group counts each
member with a transaction. DynamoDB checks every condition before it writes
anything; this does the same, so a cancelled transaction has nothing to undo,
and only the touched items are copied, to undo a write that moto refuses
half-way (a malformed update expression).

It is installed in the server process only (``serial_moto.moto_app``), where
DynamoDB requests run one at a time, so nothing changes between the checks
and the writes. The runtime never imports it.
"""

from __future__ import annotations

import copy
from typing import Any

#: DynamoDB's limit on the actions of one transaction
MAX_ACTIONS = 100


def install() -> None:
    """Make moto's DynamoDB backend use ``transact_write_items`` below (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend

    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
    """Check every action's condition; if all hold, apply them in order; else cancel with a reason per action."""
    from moto.dynamodb.comparisons import get_filter_expression
    from moto.dynamodb.exceptions import (
        MultipleTransactionsException,
        TooManyTransactionsException,
        TransactionCanceledException,
        TransactWriteSingleOpException,
    )

    if len(transact_items) > MAX_ACTIONS:
        raise TooManyTransactionsException()
    actions: list[tuple[str, dict[str, Any], dict[str, Any]]] = []
    seen: set[tuple[str, str]] = set()
    reasons: list[tuple[Any, Any, Any]] = []
    for entry in transact_items:
        if len(entry) != 1:
            raise TransactWriteSingleOpException()
        ((kind, action),) = entry.items()
        table = self.get_table(action["TableName"])
        key = action["Key"] if kind != "Put" else {
            name: action["Item"][name] for name in (table.hash_key_attr, table.range_key_attr) if name}
        identity = (str(action["TableName"]), str(dict(sorted(key.items()))))
        if identity in seen:
            raise MultipleTransactionsException()
        seen.add(identity)
        actions.append((kind, action, key))
        current = self.get_item(action["TableName"], key)
        condition = action.get("ConditionExpression")
        if condition is not None and not get_filter_expression(
                condition, action.get("ExpressionAttributeNames"), action.get("ExpressionAttributeValues")
        ).expr(current):
            old = current.to_json()["Attributes"] if current is not None and \
                action.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD" else None
            reasons.append(("ConditionalCheckFailed", "The conditional request failed", old))
        else:
            reasons.append((None, None, None))
    if any(code is not None for code, _, _ in reasons):
        raise TransactionCanceledException(reasons)
    before = [(action["TableName"], key, copy.deepcopy(self.get_item(action["TableName"], key)))
              for _, action, key in actions]
    try:
        for kind, action, key in actions:
            _apply(self, kind, action, key)
    except Exception:
        for table_name, key, item in before:
            if item is None:
                self.delete_item(table_name, key)
            else:
                self.put_item(table_name, item.to_json()["Attributes"])
        raise


def _apply(backend: Any, kind: str, action: dict[str, Any], key: dict[str, Any]) -> None:
    table = action["TableName"]
    names = action.get("ExpressionAttributeNames")
    values = action.get("ExpressionAttributeValues")
    if kind == "Put":
        backend.put_item(table, action["Item"], expression_attribute_names=names, expression_attribute_values=values)
    elif kind == "Delete":
        backend.delete_item(table, key, expression_attribute_names=names, expression_attribute_values=values)
    elif kind == "Update":
        backend.update_item(table, key, update_expression=action["UpdateExpression"],
                            expression_attribute_names=names, expression_attribute_values=values)
