"""Debounce and dedupe (issue 26): what one request costs, counted, not timed.

On a moto server (127.0.0.1): 20 enqueues of one debounced key, then the worker
over what they sent; 10 enqueues of one deduplicated key, then the worker. The
figures are counts of API calls (``bench.support.CallLog``) per request, and
write units as DynamoDB bills these items (each under 1 KB: one WCU per write,
a refused conditional write included; a consistent read of an item under 4 KB
is 0.5 RCU, a ``BatchGetItem`` of n items n x 0.5).

The debounce window is 0.4 s, which SQS takes as ``DelaySeconds=0``, so the
whole burst is visible at once and nothing waits on the clock.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.support import CallLog, client, create_queues, create_table

BURST = 20
DEDUPED = 10


@dataclass
class CoalescingFigures:
    """Calls per request at the producer and per delivery at the worker, by scenario."""

    producer: dict[str, Counter[str]] = field(default_factory=dict)
    worker: dict[str, Counter[str]] = field(default_factory=dict)
    #: the writes at the producer and the worker: a write request, or a statement of a BatchExecuteStatement
    producer_writes: dict[str, int] = field(default_factory=dict)
    worker_writes: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    runs: dict[str, int] = field(default_factory=dict)


def _app(endpoint: str, log: CallLog, name: str) -> Any:
    from sqsjobs import JobApp

    sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint, "sqsjobs")
    log.attach(sqs)
    log.attach(dynamodb)
    queue, dlq = create_queues(sqs, name)
    create_table(dynamodb, name, "pk")
    return JobApp(queue_url=queue, dlq_url=dlq, table_name=name, sqs_client=sqs, dynamodb_client=dynamodb,
                  emit_metrics=lambda line: None), sqs, queue


def _drain(app: Any, sqs: Any, queue: str) -> None:
    from sqsjobs.testing import FakeContext, receive_event

    while (event := receive_event(sqs, queue))["Records"]:
        app.process_batch(event, FakeContext())


def _counted(log: CallLog) -> tuple[Counter[str], int]:
    from bench.figures import writes

    calls = [c for c in log.calls if c.operation not in ("GetQueueAttributes", "ReceiveMessage")]
    log.clear()
    return Counter(c.operation for c in calls), writes([c for c in calls if c.service == "dynamodb"])


def coalescing_figures(endpoint: str) -> CoalescingFigures:
    """The two scenarios on ``endpoint``."""
    figures = CoalescingFigures()
    log = CallLog()
    ran: list[Any] = []
    app, sqs, queue = _app(endpoint, log, "bench-debounce")

    @app.job("reindex", key="reindex:{product_id}", debounce=0.4)
    def reindex(product_id: int, title: str) -> None:
        ran.append(title)

    log.clear()
    for n in range(BURST):
        reindex.enqueue(product_id=7, title=f"edit {n}")
    figures.producer["debounce"], figures.producer_writes["debounce"] = _counted(log)
    _drain(app, sqs, queue)
    figures.worker["debounce"], figures.worker_writes["debounce"] = _counted(log)
    figures.requests["debounce"], figures.runs["debounce"] = BURST, len(ran)

    ran.clear()
    app, sqs, queue = _app(endpoint, log, "bench-dedupe")

    @app.job("export", key="export:{account_id}", dedupe="until_done")
    def export(account_id: int) -> None:
        ran.append(account_id)

    log.clear()
    for _ in range(DEDUPED):
        export.enqueue(account_id=1)
    figures.producer["dedupe"], figures.producer_writes["dedupe"] = _counted(log)
    _drain(app, sqs, queue)
    figures.worker["dedupe"], figures.worker_writes["dedupe"] = _counted(log)
    figures.requests["dedupe"], figures.runs["dedupe"] = DEDUPED, len(ran)
    return figures


def _per(counts: Counter[str], n: int) -> str:
    return ", ".join(f"{v / n:.3g} {op}" for op, v in sorted(counts.items())) or "none"




def render(f: CoalescingFigures) -> list[str]:
    """BENCHMARKS.md's section on debounce and dedupe."""
    lines = ["## Debounce and dedupe: what a request costs", "",
             f"Counted on a moto server (`bench/coalescing.py`): {BURST} enqueues of one debounced key (window "
             f"0.4 s, so SQS delays nothing and the burst is delivered at once), and {DEDUPED} enqueues of one "
             "`dedupe=\"until_done\"` key, each followed by the worker over what was sent. Every item is under "
             "1 KB: a write (a refused conditional write too, and each statement of a `BatchExecuteStatement`) "
             "is 1 WCU.", "",
             "| scenario | requests | runs | calls per request at the producer | WCU per request (producer) | "
             "calls per request at the worker | WCU per request (worker) |",
             "|---|---|---|---|---|---|---|"]
    for name in ("debounce", "dedupe"):
        n = f.requests[name]
        lines.append(f"| {name} | {n} | {f.runs[name]} | {_per(f.producer[name], n)} | "
                     f"{f.producer_writes[name] / n:.2f} | {_per(f.worker[name], n)} | "
                     f"{f.worker_writes[name] / n:.2f} |")
    lines += ["", "A debounced request costs its token write and its message; its delivery, when superseded, costs "
              "a share of one `BatchGetItem` and no write. Only the burst's last delivery claims and completes. A "
              "refused deduplicated request costs its refused write and no SQS call.", ""]
    return lines
