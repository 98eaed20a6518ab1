"""A claim is marked fresh (an ``INSERT`` first) only when its key can be new (issue 31 item 3).

``worker/_job_records.py`` ``may_be_new``: a debounced or deduplicated
delivery's record was written at enqueue, a re-sent or redriven copy met its
key before; each claim of those marked fresh cost a refused ``INSERT`` (1
WCU), a read and the ``UpdateItem``. bench/claims.py counts the write units.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sqsjobs import JobApp, Outcome
from sqsjobs.store._lease import Operation, Written
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.store._memory import InMemoryStore


class Spy(InMemoryStore):
    """Remembers, per key, whether its claims were marked fresh."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh: dict[str, list[bool]] = {}

    def write_batch(self, ops: Sequence[Operation]) -> list[Written]:
        for op in ops:
            if isinstance(op, Acquire) and not op.key.startswith(("limit#", "group#", "chain#")):
                self.fresh.setdefault(op.key, []).append(op.fresh)
        return super().write_batch(ops)


def app_with_jobs() -> JobApp:
    app = JobApp()

    @app.job("plain", key="plain:{n}")
    def plain(n: int) -> None: ...

    @app.job("reindex", key="reindex:{n}", debounce=30)
    def reindex(n: int) -> None: ...

    @app.job("export", key="export:{n}", dedupe="until_done")
    def export(n: int) -> None: ...

    return app


def test_only_a_key_that_can_be_new_is_claimed_with_an_insert() -> None:
    app = app_with_jobs()
    spy = Spy()
    jobs = app.runtime.registry.jobs
    with app.testing(store=spy) as t:
        jobs["plain"].enqueue(n=1)
        jobs["reindex"].enqueue(n=1)
        jobs["export"].enqueue(n=1)
        group = app.group()
        group.add(jobs["export"].message(n=2))  # a member is not reserved: its key may be new
        group.add(jobs["reindex"].message(n=2))  # nor is a debounced job's member (it carries no token)
        group.enqueue()
        t.clock.advance(31)
        t.drain()
        assert spy.fresh == {"plain:1": [True], "reindex:1": [False], "export:1": [False], "export:2": [True],
                             "reindex:2": [True]}
        assert t.count(Outcome.SUCCEEDED) == 5


@pytest.mark.parametrize("attribute", ["sqsjobs.resends", "sqsjobs.redrive_count", "sqsjobs.reason"])
def test_a_re_sent_or_redriven_copy_is_not_fresh(attribute: str) -> None:
    app = app_with_jobs()
    spy = Spy()
    with app.testing(store=spy) as t:
        body = app.runtime.registry.jobs["plain"].message(n=7).body
        t.sqs.put(t.queue_url, body, attributes={attribute: {"DataType": "String", "StringValue": "1"}})
        t.drain()
        assert spy.fresh == {"plain:7": [False]}
        assert t.count(Outcome.SUCCEEDED) == 1  # a key with no record after all is claimed all the same


def test_a_second_receive_is_not_fresh() -> None:
    app = app_with_jobs()
    spy = Spy()
    with app.testing(store=spy) as t:
        t.run(app.runtime.registry.jobs["plain"].message(n=3), attempt=2)
        assert spy.fresh == {"plain:3": [False]}
