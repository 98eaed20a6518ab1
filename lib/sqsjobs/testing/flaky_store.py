"""``FlakyStore``: a lease store whose chosen writes fail, for testing what a job does when DynamoDB does.

It wraps another store (an ``InMemoryStore`` by default) and answers every
operation through it, except those a plan says to fail: a predicate on the
operation and how many times. A failed write is answered as the DynamoDB
store answers a failure that botocore's own retries did not absorb
(``Written.error``), and nothing is written.

Example:
    >>> from sqsjobs.store._lease_ops import Complete
    >>> store = FlakyStore()
    >>> store.fail(lambda op: isinstance(op, Complete), times=1)
    >>> done = Complete(key="k", owner="a", expires_at=100.0)
    >>> store.write(done).error, store.failures
    ('injected by FlakyStore.fail', 1)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqsjobs.store._lease import LeaseItem, LeaseStore, Operation, Written
from sqsjobs.store._memory import InMemoryStore

#: what a plan matches: an operation (a ``Transact`` is matched as a whole)
Match = Callable[[Operation], bool]


@dataclass
class _Plan:
    match: Match
    times: int


class FlakyStore(LeaseStore):
    """A store that fails the writes a plan names (``fail``); reads always answer."""

    def __init__(self, inner: LeaseStore | None = None) -> None:
        self.inner: LeaseStore = inner if inner is not None else InMemoryStore()
        self._plans: list[_Plan] = []
        #: how many writes failed on purpose so far
        self.failures = 0

    def fail(self, match: Match, *, times: int = 1) -> None:
        """Fail the next ``times`` writes that ``match`` accepts."""
        self._plans.append(_Plan(match=match, times=times))

    def clear_faults(self) -> None:
        """Forget every plan: from now on every write goes through."""
        self._plans.clear()

    def write(self, op: Operation) -> Written:
        injected = self._injected(op)
        return injected if injected is not None else self.inner.write(op)

    def write_many(self, ops: Sequence[Operation]) -> list[Written]:
        return [self.write(op) for op in ops]

    def write_batch(self, ops: Sequence[Operation]) -> list[Written]:
        """The planned failures first; the others go to the inner store's ``write_batch`` together."""
        answers: list[Written | None] = [self._injected(op) for op in ops]
        rest = [i for i, answer in enumerate(answers) if answer is None]
        for index, answer in zip(rest, self.inner.write_batch([ops[i] for i in rest]), strict=True):
            answers[index] = answer
        return [answer for answer in answers if answer is not None]

    def _injected(self, op: Operation) -> Written | None:
        for plan in self._plans:
            if plan.times > 0 and plan.match(op):
                plan.times -= 1
                self.failures += 1
                return Written(key=op.key, ok=False, error="injected by FlakyStore.fail")
        return None

    def get(self, key: str) -> LeaseItem | None:
        return self.inner.get(key)

    def get_many(self, keys: Sequence[str]) -> dict[str, LeaseItem]:
        return self.inner.get_many(keys)

    def _apply(self, op: Operation) -> Written:
        return self.write(op)  # pragma: no cover - ``write`` is overridden
