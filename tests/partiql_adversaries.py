"""moto's PartiQL as it is, and endpoints that answer sqsjobs' statements wrongly (on the tests path).

``stock_moto()`` takes the statement emulation out of in-process moto for a block (tests/aws_support.py
installs it for every other test): moto answers with its own PartiQL, as in a user's suite.

``moto_as_is()`` is stock moto that *parses* what the store sends: an UPDATE is rewritten into a form
moto's parser takes (``SET a = ? SET b = ?`` as ``SET a = ?, b = ?``) and answered by moto's own
implementation; an INSERT is written as moto writes one it parses (its ``?`` inside ``VALUE {...}`` is what
moto cannot parse, and its parser turns number literals into floats its serializer refuses): over any item
of the key, with success. What comes back is moto's semantics on our statements, each measured on stock moto
in tests/integration/test_statement_trust.py: a second INSERT of a key overwrites it, an UPDATE whose WHERE
is false succeeds and writes nothing. It is what
a runtime that trusted "moto accepted the statement" would meet once moto parses one more shape, or once
the statements are rendered in a shape it parses already (tests/integration/test_statement_trust.py shows
both happening today).

moto cannot parse an UPDATE with REMOVE at all (a job's completion has two), so the next two carry moto's
measured semantics to every shape: each is the emulation (``sqsjobs.local.moto_partiql``) with one fault.

``duplicate_inserts_accepted()``: an INSERT of an existing key overwrites it and succeeds; fenced UPDATEs
stay right. A probe that checked only the UPDATE would trust it.

``false_where_succeeds()``: an UPDATE whose WHERE is false succeeds and writes nothing; INSERTs stay right.
A probe that checked only the INSERT would trust it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_VALUE = re.compile(r"VALUE \{(?P<body>.*)\}$", re.DOTALL)


@contextmanager
def stock_moto() -> Iterator[None]:
    """moto's own ``BatchExecuteStatement`` for the block; the emulation comes back after it if it was there."""
    from moto.dynamodb.models import DynamoDBBackend

    from sqsjobs.local import moto_partiql

    was = DynamoDBBackend.batch_execute_statement
    moto_partiql.uninstall()
    try:
        assert not moto_partiql.installed()
        yield
    finally:
        DynamoDBBackend.batch_execute_statement = was  # type: ignore[method-assign]


@contextmanager
def _answering(answer: Any) -> Iterator[None]:
    from moto.dynamodb.models import DynamoDBBackend

    was = DynamoDBBackend.batch_execute_statement
    original = getattr(was, "moto_original", was)

    def batch_execute_statement(self: Any, statements: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [answer(self, original, statement) for statement in statements]

    DynamoDBBackend.batch_execute_statement = batch_execute_statement  # type: ignore[method-assign]
    try:
        yield
    finally:
        DynamoDBBackend.batch_execute_statement = was  # type: ignore[method-assign]


def _insert(backend: Any, statement: dict[str, Any]) -> dict[str, Any]:
    """Write an INSERT's item over whatever the key holds (what moto does with one it parses)."""
    text = str(statement["Statement"])
    body = _VALUE.search(text)
    assert body is not None, text
    names = re.findall(r"'([^']+)'\s*:\s*\?", body["body"])
    table = text.split('"')[1]
    backend.put_item(table, dict(zip(names, statement["Parameters"], strict=True)))
    return {"TableName": table}


def _update_as_moto_parses(statement: dict[str, Any]) -> dict[str, Any]:
    head, where = str(statement["Statement"]).split(" WHERE ", 1)
    table, *assignments = head.split(" SET ")
    return {**statement, "Statement": f"{table} SET {', '.join(assignments)} WHERE {where}"}


@contextmanager
def moto_as_is() -> Iterator[None]:
    """moto's own PartiQL semantics on the store's statements (see the module docstring)."""

    def answer(backend: Any, original: Any, statement: dict[str, Any]) -> dict[str, Any]:
        if str(statement["Statement"]).startswith("INSERT"):
            return _insert(backend, statement)
        return dict(original(backend, [_update_as_moto_parses(statement)])[0])

    with _answering(answer):
        yield


@contextmanager
def duplicate_inserts_accepted() -> Iterator[None]:
    """The emulation, except that an INSERT of an existing key overwrites it and succeeds."""
    from sqsjobs.local import moto_partiql

    def answer(backend: Any, original: Any, statement: dict[str, Any]) -> dict[str, Any]:
        if str(statement["Statement"]).startswith("INSERT"):
            return _insert(backend, statement)
        return moto_partiql._one(backend, statement) or dict(original(backend, [statement])[0])

    with _answering(answer):
        yield


@contextmanager
def false_where_succeeds() -> Iterator[None]:
    """The emulation, except that an UPDATE whose WHERE is false answers success (and writes nothing)."""
    from sqsjobs.local import moto_partiql

    def answer(backend: Any, original: Any, statement: dict[str, Any]) -> dict[str, Any]:
        answered = moto_partiql._one(backend, statement) or dict(original(backend, [statement])[0])
        text = str(statement["Statement"])
        if text.startswith("UPDATE") and answered.get("Error", {}).get("Code") == "ConditionalCheckFailed":
            return {"TableName": text.split('"')[1]}
        return answered

    with _answering(answer):
        yield
