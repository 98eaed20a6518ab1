"""What counting the cost costs (issue 34): the worker's CPU per message with its cost metrics and without.

Two sqsjobs workers on the same Stubber-answered DynamoDB (bench/figures.py's successful batches of 10),
one with the cost metrics (the default) and one with ``cost_metrics=False`` (``SQSJOBS_COST_METRICS=false``),
run the same batches in turn, batch by batch, the order swapped every batch, so that a busy machine's
slow moments fall on both: the figure is the median of each one's CPU (``time.process_time``, all threads)
per batch, per message, the median of the pairs' differences, and the EMF bytes each wrote per job.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from bench.contenders import Job, bodies, event, sqsjobs_handler
from bench.figures import BATCH, STUB_ORDER, STUB_RESPONSES, _context
from bench.support import Stat, client


@dataclass
class MeteringFigures:
    """Per message: CPU with the cost metrics and without (one value per batch), and EMF bytes."""

    cpu_us: dict[str, Stat]
    #: each pair of batches' difference (with - without), µs per message: the pair ran one after the other
    extra_us: Stat
    emf_bytes_per_job: dict[str, float]


def metering_figures(batches: int) -> MeteringFigures:
    """``batches`` batches of 10 through each worker, alternating (after one warm-up batch each)."""
    from botocore.stub import Stubber

    events = [event(bodies(b * BATCH, BATCH)) for b in range(batches + 1)]
    handlers: dict[str, Any] = {}
    lines: dict[str, list[str]] = {"with": [], "without": []}
    for name, on in (("with", True), ("without", False)):
        dynamodb = client("dynamodb", None, framework="sqsjobs")
        handler, _ = sqsjobs_handler(sqs=client("sqs", None), dynamodb=dynamodb,
                                       queue_url="https://sqs.us-east-1.amazonaws.com/1/q",
                                       dlq_url="https://sqs.us-east-1.amazonaws.com/1/d", table="t", job=Job(),
                                       emit=lines[name].append, cost_metrics=on)
        stubber = Stubber(dynamodb)
        for _ in range(batches + 1):
            for operation in STUB_ORDER["sqsjobs"]:
                stubber.add_response(operation, STUB_RESPONSES.get(operation, {}))
        stubber.activate()
        handler(events[0], _context())
        lines[name].clear()
        handlers[name] = handler
    spent: dict[str, list[float]] = {"with": [], "without": []}
    for i, evt in enumerate(events[1:]):
        for name in (("with", "without") if i % 2 else ("without", "with")):
            context = _context()
            started = time.process_time()
            handlers[name](evt, context)
            spent[name].append((time.process_time() - started) / BATCH * 1e6)
    return MeteringFigures(
        cpu_us={name: Stat(tuple(values)) for name, values in spent.items()},
        extra_us=Stat(tuple(a - b for a, b in zip(spent["with"], spent["without"], strict=True))),
        emf_bytes_per_job={name: sum(len(line) + 1 for line in found) / (batches * BATCH)
                           for name, found in lines.items()},
    )


def summary_row(f: MeteringFigures) -> str:
    """BENCHMARKS.md's summary row: the cost metrics' CPU per message, and their bytes."""
    extra = f.extra_us.median
    share = extra / f.cpu_us["without"].median * 100
    bytes_more = f.emf_bytes_per_job["with"] - f.emf_bytes_per_job["without"]
    return (f"| cost metrics (issue 34): worker CPU per message with them, µs (Stubber; without: "
            f"`SQSJOBS_COST_METRICS=false`) | {f.cpu_us['with'].render('{:.0f}')} | without "
            f"{f.cpu_us['without'].render('{:.0f}')} | {f.extra_us.render('{:+.1f}')} µs ({share:+.1f}%) | ≤ 5% | "
            f"{'**met**' if abs(share) <= 5 else '**missed**'}: EMF {bytes_more:+.0f} bytes a job |")

