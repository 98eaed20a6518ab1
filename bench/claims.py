"""What a delivery costs the worker, by the path it came by (issue 31 item 3): counted, not timed.

A first delivery's claim is an ``INSERT`` in the batch's one
``BatchExecuteStatement`` (store/_statements.py): 1 write unit when the key is
new. When the key already has a record, that ``INSERT`` is refused (still 1
WCU), the record is read (``BatchGetItem``), and the claim is written again
(``UpdateItem``). So the worker marks a claim ``fresh`` only when its key can
be new (worker/_consumer.py ``may_be_new``): not a debounced or deduplicated
delivery (its record was written at enqueue), nor a re-sent or redriven copy.

On a moto server (127.0.0.1), ``PATHS`` deliveries of 10 keys each, every one
succeeding; the worker's DynamoDB calls and writes are counted per delivery
(each statement of a ``BatchExecuteStatement`` is a write; every item is
under 1 KB, so a write is 1 WCU):

- ``new``: a plain job, a first delivery (the baseline);
- ``debounced``: one debounced enqueue per key (the token's record exists);
- ``deduplicated``: one ``dedupe="until_done"`` enqueue per key (the reservation exists);
- ``re-sent``: the worker's copy of a message that met its key held elsewhere at its backstop receive;
- ``redriven``: a letter redriven from the DLQ after its job was fixed.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.figures import writes
from bench.support import CallLog, client, create_queues, create_table

KEYS = 10
PATHS = ("new", "debounced", "deduplicated", "re-sent", "redriven")
#: the app's max_attempts: a message's backstop receive (re-sent instead of left to SQS's redrive) is the next one
MAX_ATTEMPTS = 2


@dataclass
class ClaimFigures:
    """Per path: the worker's DynamoDB writes and calls (by operation), and the deliveries they served."""

    writes: dict[str, int] = field(default_factory=dict)
    calls: dict[str, Counter[str]] = field(default_factory=dict)
    deliveries: dict[str, int] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)


class _World:
    def __init__(self, endpoint: str, name: str) -> None:
        from sqsjobs import JobApp
        from sqsjobs.testing.tester import ManualClock

        self.log = CallLog()
        self.sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint, "sqsjobs")
        self.log.attach(dynamodb)
        self.queue, self.dlq = create_queues(self.sqs, name, max_receive=MAX_ATTEMPTS + 1)
        create_table(dynamodb, name, "pk")
        #: leases and lease checks read this clock (it never moves): a lease held "elsewhere" stays live
        self.clock = ManualClock()
        self.app = JobApp(queue_url=self.queue, dlq_url=self.dlq, table_name=name, sqs_client=self.sqs,
                          dynamodb_client=dynamodb, max_attempts=MAX_ATTEMPTS, emit_metrics=lambda line: None,
                          clock=self.clock)
        self.ran: list[Any] = []
        self.deliveries = 0

    def drain(self, *, receive_count: int | None = None, wait: int = 0) -> None:
        from sqsjobs.testing import FakeContext, receive_event

        while (event := receive_event(self.sqs, self.queue, wait=wait))["Records"]:
            if receive_count is not None:
                for record in event["Records"]:
                    record["attributes"]["ApproximateReceiveCount"] = str(receive_count)
            self.deliveries += len(event["Records"])
            self.app.process_batch(event, FakeContext())

    def counted(self) -> tuple[int, Counter[str]]:
        dynamodb = [c for c in self.log.calls if c.service == "dynamodb"]
        self.log.clear()
        return writes(dynamodb), Counter(c.operation for c in dynamodb)


def _path(endpoint: str, path: str) -> _World:
    """Set up ``path``'s deliveries (uncounted), leaving them in the queue, the call log cleared."""
    from sqsjobs import PermanentError
    from sqsjobs.store._lease import expiry
    from sqsjobs.store._lease_ops import Acquire, Release

    w = _World(endpoint, f"bench-claims-{path.replace('-', '')}")
    fixed = path != "redriven"

    @w.app.job("work", key="work:{n}", **({"debounce": 0.4} if path == "debounced" else
                                            {"dedupe": "until_done"} if path == "deduplicated" else {}))
    def work(n: int) -> None:
        if not fixed:
            raise PermanentError("not yet fixed")
        w.ran.append(n)

    for n in range(KEYS):
        work.enqueue(n=n)
    store, now = w.app.runtime.store, w.app.runtime.clock()
    if path == "re-sent":  # each key held by a live run elsewhere when its message reaches its backstop receive
        for n in range(KEYS):
            store.write(Acquire(key=f"work:{n}", owner="elsewhere", now=now, lease_until=now + 0.5,
                                expires_at=expiry(now, 3600), job="work", data={"job": "work", "outcome": "running"}))
        w.drain(receive_count=MAX_ATTEMPTS + 1)  # busy at the backstop: each is re-sent as a fresh copy
        for n in range(KEYS):
            store.write(Release(key=f"work:{n}", owner="elsewhere", expires_at=expiry(now, 3600),
                                data={"outcome": "retrying"}))
    if path == "redriven":
        from sqsjobs.ops._redrive import redrive
        from sqsjobs.ops._redrive_options import RedriveOptions

        w.drain()  # each dead-lettered (permanent), then the job is fixed and the DLQ redriven
        fixed = True
        redrive(RedriveOptions(dlq=w.dlq, to=w.queue, wait_time_seconds=0), sqs_client=w.sqs, records=store)
    w.log.clear()
    w.deliveries = 0
    return w


def claim_figures(endpoint: str) -> ClaimFigures:
    """Every path on ``endpoint``."""
    figures = ClaimFigures()
    for path in PATHS:
        w = _path(endpoint, path)
        w.drain(wait=5 if path == "re-sent" else 0)  # a re-sent copy waits the holder's lease out (2 s)
        figures.writes[path], figures.calls[path] = w.counted()
        figures.deliveries[path], figures.runs[path] = w.deliveries, len(w.ran)
    return figures


def render(f: ClaimFigures) -> list[str]:
    """BENCHMARKS.md's section on what a delivery costs the worker, by path."""
    lines = ["## A delivery's write units, by the path it came by", "",
             f"Counted on a moto server (`bench/claims.py`): {KEYS} keys per path, each delivery succeeding. A "
             "claim is an `INSERT` only when its key can be new; a debounced or deduplicated delivery (its record "
             "was written at enqueue), a re-sent or a redriven copy claims with one `UpdateItem` instead of a "
             "refused `INSERT`, a read and that `UpdateItem`. Every item is under 1 KB: a write (a refused one "
             "too) is 1 WCU.", "",
             "| path | deliveries | runs | WCU per delivery (worker) | DynamoDB calls per delivery (worker) |",
             "|---|---|---|---|---|"]
    for path in PATHS:
        n = f.deliveries[path] or 1
        calls = ", ".join(f"{v / n:.3g} {op}" for op, v in sorted(f.calls[path].items())) or "none"
        lines.append(f"| {path} | {f.deliveries[path]} | {f.runs[path]} | {f.writes[path] / n:.2f} | {calls} |")
    return [*lines, ""]


if __name__ == "__main__":
    import os

    from bench.support import moto_server

    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        os.environ.setdefault(name, "bench")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    with moto_server() as url:
        print("\n".join(render(claim_figures(url))))
