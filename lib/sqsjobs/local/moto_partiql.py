"""``BatchExecuteStatement`` for moto: sqsjobs' statement shapes, with DynamoDB's documented semantics.

moto's PartiQL is wrong for what sqsjobs sends (checked with moto 5.2.5): a
second ``INSERT`` of a key succeeds silently, an ``UPDATE ... WHERE`` whose
condition is false still writes, and a ``?`` inside ``INSERT ... VALUE {...}``
crashes its parser. This emulation takes the two fixed shapes that
``sqsjobs.store._statements`` renders and follows the points that module's
docstring lists as resting on DynamoDB's documentation:

- ``INSERT INTO "t" VALUE {'a': ?, ...}``: an existing key fails the statement
  with ``DuplicateItem`` and writes nothing;
- ``UPDATE "t" SET "a" = ? | SET "n" = "n" + ? | REMOVE "b" ... WHERE "pk" = ?
  AND <condition>``: never creates an item; a condition that does not hold
  fails the statement with ``ConditionalCheckFailed`` and, when
  ``ReturnValuesOnConditionCheckFailure`` is ``ALL_OLD``, the item as
  ``Error.Item``; ``IS MISSING``/``IS NOT MISSING`` read as
  ``attribute_not_exists``/``attribute_exists``; the condition is checked by
  moto's own condition-expression evaluator, the updates applied by its
  ``update_item`` (the same code the single requests go through);
- each statement succeeds or fails on its own; any other statement goes to
  moto's own implementation, one at a time.

It is installed in the local cloud's server process (``serial_moto.moto_app``)
and by the tests' in-process moto (tests/aws_support.py); users' tests get it
only by asking, for a block (``sqsjobs.testing.moto_partiql``), never from the
pytest plugins. The runtime never imports it, and does not need it: without
it, the store's probe finds moto's PartiQL untrusted and writes each record
with its own request (``sqsjobs.store._statement_trust``).
"""

from __future__ import annotations

import re
from typing import Any

_INSERT = re.compile(r'^INSERT INTO "(?P<table>[^"]+)" VALUE \{(?P<body>.*)\}$', re.DOTALL)
_UPDATE = re.compile(r'^UPDATE "(?P<table>[^"]+)" (?P<actions>.*?) WHERE (?P<where>.*)$', re.DOTALL)
_MISSING = re.compile(r'("[^"]+") IS (NOT )?MISSING')
_TOKEN = re.compile(r'"([^"]+)"|\?')


def install() -> None:
    """Make moto's DynamoDB backend answer ``BatchExecuteStatement`` as below (idempotent)."""
    from moto.dynamodb.models import DynamoDBBackend

    current = DynamoDBBackend.batch_execute_statement
    original = getattr(current, "moto_original", current)
    if current is not original:
        return

    def batch_execute_statement(self: Any, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [_one(self, statement) or original(self, [statement])[0] for statement in statements]

    batch_execute_statement.moto_original = original  # type: ignore[attr-defined]
    DynamoDBBackend.batch_execute_statement = batch_execute_statement  # type: ignore[method-assign]


def uninstall() -> None:
    """Give moto's DynamoDB backend its own ``BatchExecuteStatement`` back (nothing when not installed)."""
    from moto.dynamodb.models import DynamoDBBackend

    original = getattr(DynamoDBBackend.batch_execute_statement, "moto_original", None)
    if original is not None:
        DynamoDBBackend.batch_execute_statement = original  # type: ignore[method-assign]


def installed() -> bool:
    """Whether moto's DynamoDB backend answers ``BatchExecuteStatement`` through this emulation."""
    from moto.dynamodb.models import DynamoDBBackend

    return hasattr(DynamoDBBackend.batch_execute_statement, "moto_original")


def _one(backend: Any, statement: dict[str, Any]) -> dict[str, Any] | None:
    """The answer to one of sqsjobs' statements (None: not one of its shapes)."""
    text = str(statement["Statement"]).strip()
    params = list(statement.get("Parameters") or [])
    all_old = statement.get("ReturnValuesOnConditionCheckFailure") == "ALL_OLD"
    inserted = _INSERT.match(text)
    if inserted is not None:
        return _insert(backend, inserted["table"], inserted["body"], params)
    updated = _UPDATE.match(text)
    if updated is not None:
        return _update(backend, updated["table"], updated["actions"], updated["where"], params, all_old)
    return None


def _missing_table(backend: Any, table: str) -> dict[str, Any] | None:
    if table not in backend.tables:
        return {"Error": {"Code": "ResourceNotFound", "Message": "Requested resource not found"}}
    return None


def _insert(backend: Any, table: str, body: str, params: list[Any]) -> dict[str, Any] | None:
    names = re.findall(r"'([^']+)'\s*:\s*\?", body)
    if len(names) != len(params):
        return None
    missing = _missing_table(backend, table)
    if missing is not None:
        return missing
    item = dict(zip(names, params, strict=True))
    key_name = backend.tables[table].hash_key_attr
    if backend.get_item(table, {key_name: item[key_name]}) is not None:
        return {"Error": {"Code": "DuplicateItem", "Message": "Duplicate primary key exists in table"}}
    backend.put_item(table, item)
    return {"TableName": table}


def _update(backend: Any, table: str, actions: str, where: str, params: list[Any],
            all_old: bool) -> dict[str, Any] | None:
    from moto.dynamodb.comparisons import get_filter_expression

    missing = _missing_table(backend, table)
    if missing is not None:
        return missing
    names: dict[str, str] = {}
    values: dict[str, Any] = {}
    counter = iter(range(len(params) + 1))

    def placeholder(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            alias = f"#n{len(names)}"
            for known, name in names.items():
                if name == match.group(1):
                    return known
            names[alias] = match.group(1)
            return alias
        index = next(counter)
        if index >= len(params):
            raise ValueError("more ? than parameters")
        values[f":p{index}"] = params[index]
        return f":p{index}"

    try:
        update = _TOKEN.sub(placeholder, actions)
        condition = _TOKEN.sub(placeholder, _MISSING.sub(
            lambda m: f"attribute_exists({m[1]})" if m[2] else f"attribute_not_exists({m[1]})", where))
    except ValueError:
        return None
    key_name = backend.tables[table].hash_key_attr
    head = re.match(r"^(#n\d+) = (:p\d+)(?: AND (.*))?$", condition, re.DOTALL)
    if head is None or names[head[1]] != key_name:
        return None
    key = {key_name: values[head[2]]}
    current = backend.get_item(table, key)
    rest = head[3]
    if current is None or (rest and not get_filter_expression(rest, names, values).expr(current)):
        error: dict[str, Any] = {"Code": "ConditionalCheckFailed", "Message": "The conditional request failed"}
        if all_old and current is not None:
            error["Item"] = current.to_json()["Attributes"]
        return {"Error": error}
    parts = re.split(r"\b(SET|REMOVE)\b", update)[1:]
    sets = [action.strip() for verb, action in zip(parts[::2], parts[1::2], strict=True) if verb == "SET"]
    removes = [action.strip() for verb, action in zip(parts[::2], parts[1::2], strict=True) if verb == "REMOVE"]
    expression = " ".join(part for part in (
        "SET " + ", ".join(sets) if sets else "", "REMOVE " + ", ".join(removes) if removes else "") if part)
    used_names = {k: v for k, v in names.items() if re.search(rf"{k}\b", expression)}
    used_values = {k: v for k, v in values.items() if re.search(rf"{k}\b", expression)}
    backend.update_item(table, key, update_expression=expression, expression_attribute_names=used_names,
                        expression_attribute_values=used_values)
    return {"TableName": table}
