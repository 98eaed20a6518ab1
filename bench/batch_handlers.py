"""Batch handlers' figure (issue 26): 1,000 items through a batch handler against 1,000 per-item jobs.

Both run on the local cloud with the same template parameters (SQS batches of
up to 100, a 1 s batching window, two pollers) and the reference app's two
jobs that do the same upsert (handlers/app.py): ``product-search`` writes one
search document a job (``PutItem``), ``product-search-bulk`` writes up to 25
a call (``BatchWriteItem``). Figures: wall time from the first send until the
queue is drained, the worker's busy time (its invocations' Duration), items
done, items with one attempt, dead letters, and the ratio of the two.

Beside it, the counts that explain it (``request_counts``): the same two jobs
in one warm worker on a moto server with ``LATENCY`` added to each request,
SQS batches of 25: DynamoDB requests per item, by operation, sequential round
trips and wall time per batch.

``python -m bench.batch_handlers`` runs only this section and puts it into
BENCHMARKS.md (its section, and its summary row, replaced in place);
``make bench`` runs it with the rest.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypedDict

from bench.figures import ROOT
from bench.flow import FLOW_PARAMETERS, _cloud, _send, _statuses

ITEMS = 1000
POLLERS = 2
#: the same for both contenders: batches of up to 100 (a window is needed above 10), two pollers
PARAMETERS = {"BatchSize": "100", "MaximumBatchingWindowSeconds": "1", "MaximumConcurrency": str(POLLERS)}
JOBS = {"per-item jobs": "product-search", "batch handler (25 a call)": "product-search-bulk"}
HEADING = "## Batch handlers (issue 26)"
SUMMARY = "| batch handlers: throughput of a batch handler (25 a call) against per-item jobs"


LATENCY = 0.005
COUNT_BATCH, COUNT_BATCHES = 25, 8


class Product(TypedDict):
    """One item of the counted batch handler."""

    product_id: int


@dataclass
class BatchFigures:
    """Per contender: wall and busy seconds, items done, one attempt, dead letters, invocations; and the
    request counts (per contender: DynamoDB requests per item by operation, round trips and ms per batch)."""

    runs: dict[str, dict[str, float]] = field(default_factory=dict)
    counts: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)

    def ratio(self) -> float | None:
        """How many times the batch handler's throughput is the per-item jobs' (None: one did not run)."""
        per_item, batch = (self.runs.get(label) for label in JOBS)
        if not per_item or not batch:
            return None
        return per_item["wall"] / batch["wall"]


def scenario(job: str) -> dict[str, float]:
    """``ITEMS`` items of ``job`` through the local cloud: sent, drained, then counted."""
    from sqsjobs.local.timeline import busy_seconds

    with _cloud({**FLOW_PARAMETERS, **PARAMETERS}) as (cloud, _logs):
        messages = [cloud.app.message(job, product_id=i) for i in range(1, ITEMS + 1)]
        sent = time.time()
        _send(cloud, messages)
        cloud.drain(timeout=900)
        drained = time.time()
        statuses = _statuses(cloud, [m.key for m in messages])
        dynamodb = cloud.clients.get("dynamodb")
        table = cloud.function_env("WorkerFunction")["SQSJOBS_ORDERS_TABLE"]
        pages = dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT",
                                                          FilterExpression="begins_with(pk, :s)",
                                                          ExpressionAttributeValues={":s": {"S": "search#"}})
        written = sum(page["Count"] for page in pages)
        return {"wall": drained - sent, "busy": busy_seconds(cloud, "WorkerFunction", sent, drained),
                "done": sum(1 for s in statuses if s is not None), "one attempt": sum(1 for s in statuses if s == 1),
                "written": written, "dead letters": len(cloud.dead_letters()),
                "invocations": _invocations(cloud, sent, drained)}


def _invocations(cloud: Any, since: float, until: float) -> float:
    """How many worker invocations ran between ``since`` and ``until`` (their Duration samples)."""
    name = cloud.deployment.functions["WorkerFunction"].name
    return float(sum(1 for (namespace, metric, dims), series in cloud.metrics.series().items()
                     if (namespace, metric) == ("AWS/Lambda", "Duration") and dict(dims).get("FunctionName") == name
                     for at, _ in series if since <= at <= until))


def request_counts() -> dict[str, dict[str, float]]:
    """Both jobs in one warm worker on a moto server, ``COUNT_BATCHES`` SQS batches of ``COUNT_BATCH`` each."""
    import json
    import statistics
    from collections import Counter

    from bench.support import CallLog, add_latency, client, create_queues, create_table, sequential_depth
    from sqsjobs import JobApp
    from sqsjobs.local.serial_moto import serving
    from sqsjobs.testing import sqs_event

    out: dict[str, dict[str, float]] = {}
    with serving() as endpoint:
        sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint, "sqsjobs")
        queue, dlq = create_queues(sqs, "bench-batch")
        create_table(dynamodb, "bench-batch", "pk")
        create_table(dynamodb, "bench-search", "pk")
        log = CallLog()
        log.attach(dynamodb)
        add_latency(dynamodb, LATENCY)
        app = JobApp(queue_url=queue, dlq_url=dlq, table_name="bench-batch", function_timeout=60, sqs_client=sqs,
                     dynamodb_client=dynamodb, emit_metrics=lambda line: None)

        def document(product_id: int) -> dict[str, Any]:
            return {"pk": {"S": f"search#{product_id}"}, "title": {"S": f"product {product_id}"}}

        @app.job("product-search", key="product-search:{product_id}")
        def one(product_id: int) -> None:
            dynamodb.put_item(TableName="bench-search", Item=document(product_id))

        @app.job("product-search-bulk", key="product-search-bulk:{product_id}", batch=COUNT_BATCH)
        def bulk(items: list[Product]) -> None:
            dynamodb.batch_write_item(RequestItems={"bench-search": [
                {"PutRequest": {"Item": document(item["product_id"])}} for item in items]})

        ids = iter(range(1, 10**9))
        for label, job in JOBS.items():
            operations: Counter[str] = Counter()
            depth, wall = [], []
            for batch in range(COUNT_BATCHES + 1):  # the first warms the clients
                event = sqs_event([json.loads(app.jobs[job].message(product_id=next(ids)).body)
                                   for _ in range(COUNT_BATCH)])
                log.clear()
                started = time.perf_counter()
                app.process_batch(event)
                elapsed = time.perf_counter() - started
                calls = [c for c in log.calls if c.service == "dynamodb"]
                if batch:
                    operations.update(c.operation for c in calls)
                    depth.append(sequential_depth(calls))
                    wall.append(elapsed * 1000)
            items = COUNT_BATCH * COUNT_BATCHES
            out[label] = {**{op: n / items for op, n in sorted(operations.items())},
                          "requests": sum(operations.values()) / items,
                          "round trips": float(statistics.median(depth)), "ms": float(statistics.median(wall))}
    return out


def batch_figures() -> BatchFigures:
    """Both contenders, one after the other; one that could not run is reported, not hidden."""
    out = BatchFigures()
    try:
        out.counts = request_counts()
    except Exception as error:  # reported in BENCHMARKS.md
        out.errors.append(f"request counts: {type(error).__name__}: {error}")
    for label, job in JOBS.items():
        try:
            out.runs[label] = scenario(job)
        except Exception as error:  # reported in BENCHMARKS.md
            out.errors.append(f"{label}: {type(error).__name__}: {error}")
    return out


def summary_row(f: BatchFigures) -> str:
    """The row for the summary table of BENCHMARKS.md."""
    ratio = f.ratio()
    shown = "not measured" if ratio is None else f"{ratio:.1f} x"
    return f"{SUMMARY}, {ITEMS:,} items, local cloud | {shown} | | | (report) | |"


def render(f: BatchFigures, load: str) -> list[str]:
    """The batch-handler section of BENCHMARKS.md."""
    lines = [HEADING, ""]
    add = lines.append
    add(f"{ITEMS:,} search-document upserts through the local cloud (`bench/batch_handlers.py`), once as "
        "per-item jobs (`product-search`, one `PutItem` a job) and once through a batch handler "
        "(`product-search-bulk`, `batch=25`, one `BatchWriteItem` a call), with the same template parameters: "
        f"SQS batches of up to 100 with a 1 s batching window, {POLLERS} pollers (load average at the end: {load}). "
        "Every item keeps its own claim and completion in both runs: what the batch handler saves is the "
        "handler's own requests.")
    add("")
    add("| run | sent to drained, s | items/s | worker busy, s | invocations | items done / one attempt / "
        "written / dead-lettered |")
    add("|---|---|---|---|---|---|")
    for label, r in f.runs.items():
        add(f"| {label} | {r['wall']:.1f} | {ITEMS / r['wall']:.1f} | {r['busy']:.1f} | {r['invocations']:.0f} | "
            f"{r['done']:.0f} / {r['one attempt']:.0f} / {r['written']:.0f} / {r['dead letters']:.0f} |")
    ratio = f.ratio()
    if ratio is not None:
        add("")
        add(f"The batch handler's throughput is **{ratio:.1f} x** the per-item jobs'.")
    if f.counts:
        add("")
        add(f"What each item costs, in one warm worker on a moto server with {LATENCY * 1000:g} ms added to each "
            f"request, SQS batches of {COUNT_BATCH} (medians of {COUNT_BATCHES} batches):")
        add("")
        add(f"| run | DynamoDB requests per item | by operation | sequential round trips per batch of {COUNT_BATCH} "
            f"| ms per batch of {COUNT_BATCH} |")
        add("|---|---|---|---|---|")
        for label, c in f.counts.items():
            ops = ", ".join(f"{v:.2g} {k}" for k, v in c.items() if k not in ("requests", "round trips", "ms"))
            add(f"| {label} | {c['requests']:.2f} | {ops} | {c['round trips']:.0f} | {c['ms']:.0f} |")
        per_item, batch = (f.counts.get(label) for label in JOBS)
        if per_item and batch:
            add("")
            add("On the local cloud the DynamoDB emulator serves one request at a time, so its pace is set by the "
                f"requests per item ({per_item['requests']:.2f} against {batch['requests']:.2f}: each item's claim "
                "and completion are the same in both runs) and by the load of the machine, and the ratio moves with "
                "the load. The counts do not: the sequential round trips of a batch of "
                f"{COUNT_BATCH} fall from {per_item['round trips']:.0f} to {batch['round trips']:.0f}, which is what "
                "sets a batch's time against DynamoDB, where requests run in parallel. The wall times of this table "
                "are the machine's, not the round trips': the worker and the moto server share one process (and "
                "its GIL) on a loaded machine.")
    for error in f.errors:
        add("")
        add(f"Not measured: {error}")
    add("")
    return lines


def splice(report: str, section: list[str], row: str) -> str:
    """``report`` with this section (and its summary row) replaced, or added before ``## Method``.

    Example:
        >>> text = "# B\\n\\n## Summary\\n\\n| a |\\n\\n## Method\\n\\nm\\n"
        >>> print(splice(text, ["## Batch handlers (issue 26)", "", "x", ""], SUMMARY + " | 3 |"))
        # B
        <BLANKLINE>
        ## Summary
        <BLANKLINE>
        | a |
        | batch handlers: throughput of a batch handler (25 a call) against per-item jobs | 3 |
        <BLANKLINE>
        ## Batch handlers (issue 26)
        <BLANKLINE>
        x
        <BLANKLINE>
        ## Method
        <BLANKLINE>
        m
        <BLANKLINE>
    """
    from bench.support import splice_section

    return splice_section(report, HEADING, section, SUMMARY, [row])


def main() -> int:
    """Run this section only and write it into BENCHMARKS.md (``--counts``: print the request counts only)."""
    import os

    from bench.support import machine

    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    if "--counts" in sys.argv:
        for label, counts in request_counts().items():
            print(label, {k: round(v, 3) for k, v in counts.items()})
        return 0
    figures = batch_figures()
    load = machine()["load"]
    path = Path(ROOT) / "BENCHMARKS.md"
    path.write_text(splice(path.read_text(), render(figures, load), summary_row(figures)))
    for label, run in figures.runs.items():
        print(label, {k: round(v, 2) for k, v in run.items()}, file=sys.stderr)
    print("errors:", figures.errors, "ratio:", figures.ratio(), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
