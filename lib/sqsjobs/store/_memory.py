"""``InMemoryStore``: leases in a dict, each operation's rule evaluated as DynamoDB evaluates it.

Unit tests, ``app.testing()`` and the in-process demo use it. Every operation
goes through its rule (``sqsjobs.store._rules``), the same statement the
DynamoDB store renders as expressions, so the two cannot mean different things
(tests/integration/test_lease_contract.py runs one suite against both).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from sqsjobs.store import _statement_answers as statement_answers
from sqsjobs.store import _statements as statements
from sqsjobs.store._lease import LeaseItem, LeaseStore, Operation, Written, answer
from sqsjobs.store._lease_ops import Acquire, Transact


class InMemoryStore(LeaseStore):
    """Leases in a dict, with the DynamoDB store's semantics.

    ``calls`` counts the DynamoDB requests the operations would take: one an
    operation, and for ``write_batch`` one per ``BatchExecuteStatement`` of up
    to 25 statements, plus the single requests that the DynamoDB store would
    send after the statements (a read of the items fresh ``Acquire`` found,
    the single requests of those the read does not refuse, a refusal by a
    statement's guard: ``sqsjobs.store._statements``).

    Example:
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp()
        >>> @app.job("greet", key="greet:{user_id}")
        ... def greet(user_id: int) -> None: ...
        >>> store = InMemoryStore()
        >>> with app.testing(store=store) as t:  # one batch of 30 jobs
        ...     _ = t.run(*[greet.message(user_id=n) for n in range(30)])
        >>> len(store.items()), store.calls  # taken in statements of 25 + 5, completed in 25 + 5
        (30, 4)
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

    def write_batch(self, ops: Sequence[Operation]) -> list[Written]:
        """Each operation written by its rule (through ``write``), counted as the DynamoDB store would send it."""
        batched, _ = statements.plan(ops)
        if len(batched) <= 1:
            return self.write_many(ops)
        in_statements = set(batched)
        alone = 0  # requests the DynamoDB store would send after the batch: one read, and single writes
        read = False
        for index in batched:
            op, current = ops[index], self._items.get(ops[index].key)
            if isinstance(op, Acquire):
                read = read or current is not None  # DuplicateItem: the items are read together
                alone += current is not None and statement_answers.refusal(op, current) is None
            elif not isinstance(op, Transact):
                alone += not statement_answers.guards_hold(op, current) and op.rule().holds(current, op.values())
        answers = [self.write(op) for op in ops]
        with self._lock:  # ``write`` counted each statement as a request of its own
            self.calls -= len(in_statements) - len(statements.chunks(batched)) - alone - read
        return answers

    def _apply(self, op: Operation) -> Written:
        with self._lock:
            self.calls += 1
            if isinstance(op, Transact):
                return self._transact(op)
            written, item = answer(op, self._items.get(op.key))
            if item is not None:
                self._items[item.key] = item
            return written

    def _transact(self, op: Transact) -> Written:
        """All of ``op.ops`` or none: every condition is checked before anything is written."""
        changed: list[LeaseItem] = []
        for index, inner in enumerate(op.ops):
            written, item = answer(inner, self._items.get(inner.key), in_transaction=True)
            if not written.ok:
                return Written(key=op.key, ok=False, item=written.item, refused_at=index)
            if item is not None:
                changed.append(item)
        for item in changed:
            self._items[item.key] = item
        return Written(key=op.key, ok=True)
