"""``InMemoryStore``: leases in a dict, each operation's rule evaluated as DynamoDB evaluates it.

Unit tests, ``app.testing()`` and the in-process demo use it. Every operation
goes through its rule (``sqsjobs.store._rules``), the same statement the
DynamoDB store renders as expressions, so the two cannot mean different things
(tests/integration/test_lease_contract.py runs one suite against both).
"""

from __future__ import annotations

import threading

from sqsjobs.store._lease import LeaseItem, LeaseStore, Operation, Transact, Written, answer


class InMemoryStore(LeaseStore):
    """Leases in a dict, with the DynamoDB store's semantics.

    ``calls`` counts operations (each would be one DynamoDB request).

    Example:
        >>> from sqsjobs.store._lease import Close
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
