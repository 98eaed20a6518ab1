"""What counting the cost costs (issue 34): the worker's CPU per message with its cost metrics and without.

Two sqsjobs workers on the same Stubber-answered DynamoDB (bench/figures.py's successful batches of 10),
one with the cost metrics (the default) and one with ``cost_metrics=False`` (``SQSJOBS_COST_METRICS=false``),
run the same batches in turn, batch by batch, the order swapped every batch, so that a busy machine's
slow moments fall on both: the figure is the median of each one's CPU (``time.process_time``, all threads)
per batch, per message, the median of the pairs' differences, and the EMF bytes each wrote per job.

``make bench`` writes its row with the others; ``python -m bench.metering`` (pinned to one core, as ``make
bench`` pins it) measures it alone and rewrites that row of BENCHMARKS.md in place (:func:`splice`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import Any

from bench.contenders import Job, bodies, event, sqsjobs_handler
from bench.figures import BATCH, ROOT, STUB_ORDER, STUB_RESPONSES, _context, stub_probe
from bench.support import Stat, client

#: how the row bench.report writes for these figures starts
ROW_START = "| cost metrics (issue 34)"


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
    jobs: dict[str, Job] = {}
    lines: dict[str, list[str]] = {"with": [], "without": []}
    for name, on in (("with", True), ("without", False)):
        dynamodb = client("dynamodb", None, framework="sqsjobs")
        jobs[name] = Job()
        handler, _ = sqsjobs_handler(sqs=client("sqs", None), dynamodb=dynamodb,
                                     queue_url="https://sqs.us-east-1.amazonaws.com/1/q",
                                     dlq_url="https://sqs.us-east-1.amazonaws.com/1/d", table="t", job=jobs[name],
                                     emit=lines[name].append, cost_metrics=on)
        stubber = Stubber(dynamodb)
        stub_probe(stubber)  # the store's probe, in the warm-up call
        for _ in range(batches + 1):
            for operation in STUB_ORDER["sqsjobs"]:
                stubber.add_response(operation, STUB_RESPONSES.get(operation, {}))
        stubber.activate()
        if handler(events[0], _context()) != {"batchItemFailures": []}:
            raise RuntimeError(f"{name}: the warm-up batch failed")
        lines[name].clear()
        handlers[name] = handler
    spent: dict[str, list[float]] = {"with": [], "without": []}
    for i, evt in enumerate(events[1:]):
        for name in (("with", "without") if i % 2 else ("without", "with")):
            context = _context()
            started = time.process_time()
            handlers[name](evt, context)
            spent[name].append((time.process_time() - started) / BATCH * 1e6)
    for name, job in jobs.items():  # every run succeeded: the figures are of successful batches
        if len(job.effects) != BATCH * (batches + 1):
            raise RuntimeError(f"{name}: {len(job.effects)} effects, expected {BATCH * (batches + 1)}")
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
    return (f"{ROW_START}: worker CPU per message with them, µs (Stubber; without: "
            f"`SQSJOBS_COST_METRICS=false`) | {f.cpu_us['with'].render('{:.0f}')} | without "
            f"{f.cpu_us['without'].render('{:.0f}')} | {f.extra_us.render('{:+.1f}')} µs ({share:+.1f}%) | ≤ 5% | "
            f"{'**met**' if abs(share) <= 5 else '**missed**'}: EMF {bytes_more:+.0f} bytes a job |")


def splice(report: str, row: str) -> str:
    r"""``report`` (BENCHMARKS.md) with its cost metrics row replaced, or added after the last cost row.

    Example:
        >>> old = "| cost per million at 128 MB | 1 |\n| cost per million at 512 MB | 2 |\n| other | 3 |\n"
        >>> new = splice(old, "| cost metrics (issue 34): x | 4 |")
        >>> print(new, end="")
        | cost per million at 128 MB | 1 |
        | cost per million at 512 MB | 2 |
        | cost metrics (issue 34): x | 4 |
        | other | 3 |
        >>> splice(new, "| cost metrics (issue 34): y | 5 |").count("cost metrics")
        1
    """
    lines = report.splitlines()
    mine = [i for i, line in enumerate(lines) if line.startswith(ROW_START)]
    if mine:
        lines[mine[0]] = row
    else:
        costs = [i for i, line in enumerate(lines) if line.startswith("| cost per million")]
        if not costs:
            raise ValueError("BENCHMARKS.md has no cost rows: run make bench")
        lines.insert(costs[-1] + 1, row)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Measure the cost metrics' CPU on one core and rewrite their row of BENCHMARKS.md."""
    from bench import pinned

    args = sys.argv[1:] if argv is None else argv
    batches = int(args[0]) if args else 1500
    out = ROOT / "BENCHMARKS.md"
    with pinned.pinned(pinned.cores()[0]):  # one core, as Lambda gives a function of up to 1,769 MB
        figures = metering_figures(batches)
    row = summary_row(figures)
    out.write_text(splice(out.read_text(), row))
    print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main())
