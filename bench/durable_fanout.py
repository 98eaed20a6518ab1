"""A fan-out a durable workflow awaits: an sqsjobs group answered by one callback, against a durable ``map``.

``python -m bench.durable_fanout [N]`` (default 10,000) measures, in-process and with no AWS:

- the sqsjobs side: a group of N members with one ``DurableCallback``, drained by the worker under
  ``app.testing()`` (batches of 10, as the event source mapping delivers them): the SQS requests the
  producer and the worker make (FakeSQS's calls; the event source mapping's own receives and deletes are
  one each per batch and are added), the worker's invocations, the idempotency store's writes and reads
  by kind, and the callback's answers;
- the durable side: the operations a durable function's history holds for ``context.map`` over items
  with one step each, and for one ``wait_for_callback`` awaiting the whole group, counted by the durable
  testing SDK's local runner at 100 and 1,000 items (the count is linear: it is extrapolated to N).

The figures and the prices (with their sources and dates) are in docs/durable.md, "What a 10,000-way
fan-out costs". Nothing asserts here: it only counts.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from typing import Any

from sqsjobs import DurableCallback, JobApp
from sqsjobs.store._lease_ops import Transact
from sqsjobs.store._memory import InMemoryStore


class CountingStore(InMemoryStore):
    """The in-memory store, counting each write by its kind (a transaction: each of its items) and each read."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: Counter[str] = Counter()
        self.reads = 0

    def _apply(self, op: Any) -> Any:
        for one in op.ops if isinstance(op, Transact) else (op,):
            self.writes[type(one).__name__ + (" (in a transaction)" if isinstance(op, Transact) else "")] += 1
        return super()._apply(op)

    def get(self, key: str) -> Any:
        self.reads += 1
        return super().get(key)


def sqsjobs_group(members: int) -> dict[str, Any]:
    """Run one group of ``members`` awaited by one callback; what it took."""
    app = JobApp()

    @app.job("thumbnail", key="thumbnail:{image_id}")
    def thumbnail(image_id: int) -> None: ...

    store = CountingStore()
    with app.testing(store=store) as t:
        group = app.group(name="fan-out", callback=DurableCallback("ZmFuLW91dA=="))
        group.add_many(thumbnail.message(image_id=i) for i in range(members))
        enqueue_writes = sum(store.writes.values())
        group.enqueue()
        enqueue_writes = sum(store.writes.values()) - enqueue_writes
        sent = Counter(call.operation for call in t.sqs.calls)
        store.writes.clear()
        store.reads = 0
        results = t.drain(max_batches=members)
        worker_calls = Counter(call.operation for call in t.sqs.calls) - sent
        answers = len(t.callbacks.told)
        payload = json.loads(t.callbacks.told[0].answer.payload or "{}")
    batches = len(results)
    return {"members": members, "batches": batches, "producer_sqs": dict(sent), "worker_sqs": dict(worker_calls),
            "esm_receives_and_deletes": 2 * batches, "store_writes": dict(store.writes),
            "store_reads": store.reads, "enqueue_writes": enqueue_writes, "answers": answers,
            "answer": payload}


def durable_operations(items: int) -> dict[str, int]:
    """Operations in a durable function's history: a map of ``items`` one-step items, and one callback."""
    from aws_durable_execution_sdk_python import DurableContext, durable_execution
    from aws_durable_execution_sdk_python_testing import DurableFunctionTestRunner

    @durable_execution
    def mapped(event: Any, context: DurableContext) -> int:
        done = context.map(list(range(items)), lambda c, item, i, _: c.step(lambda _s: item * 2))
        return len(done.get_results())

    @durable_execution
    def awaited(event: Any, context: DurableContext) -> Any:
        return context.wait_for_callback(lambda callback_id, _c: None, name="group")

    counts = {}
    with DurableFunctionTestRunner(handler=mapped) as runner:
        counts["map"] = len(runner.run(input="{}", timeout=600).get_all_operations())
    with DurableFunctionTestRunner(handler=awaited) as runner:
        arn = runner.run_async(input="{}", execution_name="awaited")
        history = None
        for _ in range(1000):  # the callback's id appears once its submitter step ran
            history = runner.get_execution_history(arn)
            found = [e for e in history.events if getattr(e, "callback_started_details", None)]
            if found:
                break
            import threading

            threading.Event().wait(0.01)
        callback_id = found[0].callback_started_details.callback_id
        runner.send_callback_success(callback_id, b"{}")
        counts["callback"] = len(runner.wait_for_result(arn, timeout=60).get_all_operations())
    return counts


def main(argv: list[str]) -> None:
    members = int(argv[0]) if argv else 10_000
    print(json.dumps({"sqsjobs": sqsjobs_group(members),
                      "durable_map": {n: durable_operations(n) for n in (100, 1000)}}, indent=1, default=str))


if __name__ == "__main__":
    main(sys.argv[1:])
