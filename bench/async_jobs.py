"""Async jobs' figure (issue 32): billed time, cost and memory of batches of I/O-bound jobs, side by side.

Each job of a batch of 10 calls a local HTTP server that answers after 200 ms (``bench.slow_server``), behind
each contender's DynamoDB idempotency table on a moto server. Four contenders (``bench.async_client`` says how
each is built): sqsjobs with ``async def`` jobs, sqsjobs with ``threads=True`` jobs, Powertools'
``BatchProcessor`` (one record after another, as its documentation sets it up with idempotency) and
Powertools' ``AsyncBatchProcessor`` (records at once, the same persistence layer around each).

As ``bench/pinned.py`` measures: every run is a fresh client process pinned to one core (a Lambda of up to
1,769 MB has one vCPU), the moto server and the slow server are processes pinned to the other core, and the
rounds alternate the contenders against the same servers, so drift in the machine's load falls on all four and
the ratios are taken round by round. What a Lambda bills is the handler's wall time per batch, so that is the
figure; its CPU, DynamoDB requests, peak RSS and Python heap are measured in the same runs.

``python -m bench.async_jobs [--quick]`` runs this section alone and puts it into BENCHMARKS.md in place (its
section and its summary rows); ``make bench`` runs it with the rest.
"""

from __future__ import annotations

import contextlib
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from bench import cost
from bench.async_client import BATCH, CONTENDERS
from bench.pinned import ROOT, child_env, cores, moto_process, pin_to, run_client
from bench.support import Stat, client, create_queues, create_table

#: how long the slow server takes to answer each job's call
DELAY = 0.2
LABELS = {"sqsjobs-async": "sqsjobs, async jobs", "sqsjobs-threads": "sqsjobs, threads=True",
          "powertools-batch": "Powertools BatchProcessor", "powertools-async": "Powertools AsyncBatchProcessor",
          "sqsjobs-async-flush0": "sqsjobs, async jobs, flush_after=0"}
#: issue 32's goals: sqsjobs' billed time per batch over each Powertools processor's
GOALS = {"powertools-batch": 0.15, "powertools-async": 0.8}
MEMORIES = (128, 1769)
HEADING = "## Async jobs and concurrency (issue 32)"
SUMMARY = "| I/O-bound jobs (issue 32):"


@dataclass
class AsyncFigures:
    """Per contender, one measurement per round (wall and CPU ms per batch, DynamoDB calls, memory...)."""

    runs: dict[str, list[dict[str, float]]] = field(default_factory=lambda: {name: [] for name in CONTENDERS})
    cores: tuple[int, int] = (0, 0)
    batches: int = 0
    errors: list[str] = field(default_factory=list)

    def stat(self, contender: str, name: str) -> Stat:
        return Stat(tuple(run[name] for run in self.runs[contender]))

    def median(self, contender: str, name: str) -> float:
        return statistics.median(run[name] for run in self.runs[contender])

    def ratio(self, ours: str, theirs: str) -> Stat:
        """Wall time per batch, ``ours`` over ``theirs``, round by round."""
        return Stat(tuple(a["wall_ms"] / b["wall_ms"] for a, b in zip(self.runs[ours], self.runs[theirs],
                                                                        strict=True)))

    @property
    def complete(self) -> bool:
        return all(self.runs[name] for name in CONTENDERS)


@contextlib.contextmanager
def slow_server(core: int, delay: float) -> Iterator[int]:
    """``bench.slow_server`` in its own process pinned to ``core``; yields its port."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    server = subprocess.Popen([sys.executable, "-m", "bench.slow_server", str(port), str(delay)], cwd=ROOT,
                              env=child_env(), stdout=subprocess.PIPE, text=True, preexec_fn=pin_to(core))
    try:
        assert server.stdout is not None
        if server.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the slow server did not start (exit {server.poll()})")
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def measure(reps: int, batches: int, warm: int = 2) -> AsyncFigures:
    """``reps`` rounds of the four contenders, each a fresh pinned process answering ``batches`` batches."""
    client_core, server_core = cores()
    figures = AsyncFigures(cores=(client_core, server_core), batches=batches)
    with moto_process(server_core) as moto, slow_server(server_core, DELAY) as port:
        sqs, dynamodb = client("sqs", moto.url), client("dynamodb", moto.url)
        queue, dlq = create_queues(sqs, "bench-async")
        for name in CONTENDERS:
            create_table(dynamodb, f"bench-async-{name}", "pk" if name.startswith("sqsjobs") else "id")
        for rep in range(reps + 1):
            for n, name in enumerate(CONTENDERS):
                config = {"contender": name, "endpoint": moto.url, "queue": queue, "dlq": dlq, "port": port,
                          "table": f"bench-async-{name}", "first": 10_000_000 * (rep + 1) + 1_000_000 * n,
                          "warm": warm, "batches": batches}
                env = child_env()
                if name == "powertools-async":
                    env["LAMBDA_TASK_ROOT"] = ROOT  # its processor keeps one loop in Lambda, a new one elsewhere
                server_before = moto.cpu_seconds()
                run = run_client("bench.async_client", config, core=client_core, label=name, env=env)
                run["server_cpu_ms"] = (moto.cpu_seconds() - server_before) * 1000 / (run["expected"] / BATCH)
                if rep:  # the first round warms the page cache and the .pyc files for all four
                    figures.runs[name].append(run)
    return figures


def inputs(f: AsyncFigures, message_bytes: int) -> dict[str, cost.Inputs]:
    """Each contender's measured figures as ``bench/cost.py`` takes them: the waits are the batch's sequential
    calls to the slow server times their 200 ms, plus its sequential DynamoDB round trips times an in-region
    round trip (``cost.LATENCY_MS``), as the main cost table counts them; the CPU is the measured one."""
    from bench.sections import sqs_per_job

    return {name: cost.Inputs(
        wait_ms=f.median(name, "io_depth") * DELAY * 1000 + f.median(name, "dynamodb_depth") * cost.LATENCY_MS,
        cpu_ms=f.median(name, "cpu_ms"),
        wcu_per_job=2.0, sqs_per_job=sqs_per_job(name.split("-")[0], message_bytes),
        emf_bytes_per_job=f.median(name, "emf_bytes_per_job")) for name in CONTENDERS}


def _verdict(ratio: float, goal: float) -> str:
    return "**met**" if ratio <= goal else "**missed**"


def summary_rows(f: AsyncFigures) -> list[str]:
    """The rows for BENCHMARKS.md's summary table: billed time per batch against each Powertools processor."""
    if not f.complete:
        return [f"{SUMMARY} billed time per batch of {BATCH} | not measured | | | | {'; '.join(f.errors)} |"]
    rows = []
    for ours in ("sqsjobs-async", "sqsjobs-threads"):
        for theirs, goal in GOALS.items():
            ratio = f.ratio(ours, theirs)
            rows.append(f"{SUMMARY} billed time per batch of {BATCH} jobs that each wait {DELAY * 1000:.0f} ms, "
                        f"{LABELS[ours]} against {LABELS[theirs]}, ms (pinned) | "
                        f"{f.stat(ours, 'wall_ms').render('{:.0f}')} | {f.stat(theirs, 'wall_ms').render('{:.0f}')} | "
                        f"{ratio.render('{:.3f}', 'x')} | ≤ {goal}x | {_verdict(ratio.median, goal)} |")
    modelled = inputs(f, 0)
    for memory in MEMORIES:
        ours = cost.duration_ms(modelled["sqsjobs-async"], memory)
        for theirs in GOALS:
            other = cost.duration_ms(modelled[theirs], memory)
            rows.append(f"{SUMMARY} the same batch's duration modelled with in-region DynamoDB round trips "
                        f"(`bench/cost.py`) at {memory:,} MB, sqsjobs async jobs against {LABELS[theirs]}, ms | "
                        f"{ours:.0f} | {other:.0f} | {ours / other:.2f}x | (report) | the measured round trips "
                        "and CPU, without moto's answers |")
    return rows


def render(f: AsyncFigures, load: str, message_bytes: int) -> list[str]:
    """The async-jobs section of BENCHMARKS.md."""
    lines = [HEADING, ""]
    add = lines.append
    client_core, server_core = f.cores
    add(f"Batches of {BATCH} jobs, each calling an HTTP server on 127.0.0.1 that answers after {DELAY * 1000:.0f} ms "
        f"(`bench/slow_server.py`, on a new connection each), behind each contender's DynamoDB idempotency table "
        f"on a moto server (`bench/async_jobs.py`, `bench/async_client.py`). Every run is a fresh client process "
        f"pinned to core {client_core}; the moto server and the slow server are processes pinned to core "
        f"{server_core}; the four contenders alternate, round by round, {f.batches} measured batches a run after "
        f"2 warm-up batches (load average at the end: {load}). A Lambda bills the handler's wall time: that is "
        "the figure.")
    add("")
    add("- **sqsjobs, async jobs**: `async def` jobs awaiting the call (asyncio streams), the batch's jobs on one "
        "event loop, `concurrency` 10 (the default);")
    add("- **sqsjobs, threads=True**: plain jobs making the call with `http.client`, on the job threads;")
    add("- **Powertools BatchProcessor**: the record handler in `idempotent_function`, as documented for SQS, "
        "making the same `http.client` call, one record after another;")
    add("- **Powertools AsyncBatchProcessor**: an async record handler awaiting the same call as sqsjobs' async "
        "job. `idempotent_function` takes no coroutine function, so the handler takes the same persistence layer's "
        "own steps around the call (`save_inprogress`, `save_success`), each on a thread so the records overlap;")
    add("- **sqsjobs, async jobs, flush_after=0**: the async jobs again, each completion written as its job ends "
        "(what a crash window of 0 costs: docs/reliability.md).")
    if not f.complete:
        for error in f.errors:
            add("")
            add(f"Not measured: {error}")
        add("")
        return lines
    add("")
    add("| contender | billed (wall) time per batch, ms | CPU per batch, ms | DynamoDB requests (sequential) per "
        "batch | sequential calls to the slow server | the moto server's CPU per batch, ms | peak RSS of the "
        "process, MB | Python heap's peak over a batch, KB |")
    add("|---|---|---|---|---|---|---|---|")
    for name in CONTENDERS:
        add(f"| {LABELS[name]} | {f.stat(name, 'wall_ms').render('{:.0f}')} | "
            f"{f.stat(name, 'cpu_ms').render('{:.1f}')} | {f.median(name, 'dynamodb_calls'):g} "
            f"({f.median(name, 'dynamodb_depth'):g}) | {f.median(name, 'io_depth'):g} | "
            f"{f.median(name, 'server_cpu_ms'):.0f} | {f.median(name, 'peak_rss_mb'):.1f} | "
            f"{f.median(name, 'heap_peak_kb'):.0f} |")
    add("")
    add("The wall time includes the moto server's answers: it runs on the other core, one request at a time, and "
        "evaluates sqsjobs' two `BatchExecuteStatement`s (ten statements each, through the local cloud's "
        "statement emulation) in about the time of its ten single requests, where DynamoDB answers a statement "
        "batch in about one request's time; on a loaded machine its answers stretch the batch. The sequential "
        "round trips and the CPU are the figures that do not depend on the local servers: the cost table below "
        "prices them with an in-region round trip.")
    add("")
    add("Ratios of billed time per batch, round by round:")
    add("")
    add("| sqsjobs | against | ratio | goal | verdict |")
    add("|---|---|---|---|---|")
    for ours in ("sqsjobs-async", "sqsjobs-threads"):
        for theirs, goal in GOALS.items():
            ratio = f.ratio(ours, theirs)
            add(f"| {LABELS[ours]} | {LABELS[theirs]} | {ratio.render('{:.3f}', 'x')} | ≤ {goal}x | "
                f"{_verdict(ratio.median, goal)} |")
    add("")
    add(f"**Memory, and the default bound.** A batch of {BATCH} jobs at once peaks at "
        f"{f.median('sqsjobs-async', 'peak_rss_mb'):.0f} MB of RSS with async jobs and "
        f"{f.median('sqsjobs-threads', 'peak_rss_mb'):.0f} MB with threads, the whole worker counted (Python, "
        "botocore, Powertools' logger); the jobs' own share is the Python heap's peak over one batch "
        f"({f.median('sqsjobs-async', 'heap_peak_kb'):.0f} KB async, "
        f"{f.median('sqsjobs-threads', 'heap_peak_kb'):.0f} KB threaded, each thread's stack aside). So "
        f"`concurrency` defaults to {BATCH}, a whole standard batch at once, in a 128 MB function with room "
        "to spare for what the jobs themselves hold; a batch larger than that (a batching window) runs 10 at a "
        "time, which keeps its peak where it is. Jobs that hold megabytes each need a lower bound, or more memory.")
    add("")
    add(f"**DynamoDB.** sqsjobs makes {f.median('sqsjobs-async', 'dynamodb_calls'):g} requests a batch of "
        f"{BATCH} successes however its jobs run (one `BatchExecuteStatement` of claims, one of completions, "
        "written together since the batch's jobs end within `flush_after`); Powertools makes "
        f"{f.median('powertools-async', 'dynamodb_calls'):g}, two per record.")
    lines.extend(cost_table(inputs(f, message_bytes)))
    add("")
    return lines


def cost_table(priced_inputs: dict[str, cost.Inputs]) -> list[str]:
    """A million I/O-bound jobs priced with ``bench/cost.py``'s model and prices, per contender and memory."""
    lines = ["", f"**Cost per million of these I/O-bound jobs** (batches of {BATCH}; `bench/cost.py`'s model and "
             f"prices, {cost.PRICES_SOURCE}). A batch's duration is its sequential calls to the slow server times "
             f"{DELAY * 1000:.0f} ms, plus its sequential DynamoDB round trips times {cost.LATENCY_MS:g} ms, plus its "
             "measured CPU, stretched by the vCPU share below 1,769 MB:", "",
             "| contender | memory | batch duration, ms | Lambda $ | DynamoDB $ | SQS $ | CloudWatch $ | total $ | "
             "sqsjobs async over it |", "|---|---|---|---|---|---|---|---|---|"]
    for memory in MEMORIES:
        ours = cost.price(priced_inputs["sqsjobs-async"], memory).total_usd
        for name in CONTENDERS:
            p = cost.price(priced_inputs[name], memory)
            lines.append(f"| {LABELS[name]} | {memory:,} MB | {p.duration_ms:.0f} | {p.lambda_usd:.2f} | "
                         f"{p.dynamodb_usd:.2f} | {p.sqs_usd:.2f} | {p.cloudwatch_usd:.3f} | {p.total_usd:.2f} | "
                         f"{ours / p.total_usd:.2f}x |")
    return lines


def splice(report: str, section: list[str], rows: list[str]) -> str:
    """``report`` with this section and its summary rows replaced in place, or added before ``## Method``."""
    from bench.support import splice_section

    return splice_section(report, HEADING, section, SUMMARY, rows)


def figures(quick: bool = False) -> tuple[AsyncFigures, int]:
    """The measurements ``make bench`` takes for this section, and the jobs' message size."""
    from bench.contenders import message_bytes

    try:
        measured = measure(reps=1 if quick else 5, batches=2 if quick else 5)
    except Exception as error:  # reported in BENCHMARKS.md, not hidden
        measured = AsyncFigures(errors=[f"{type(error).__name__}: {error}"])
    return measured, message_bytes()


def main() -> int:
    """Run this section only and write it into BENCHMARKS.md."""
    import os

    from bench.support import machine

    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    started = time.perf_counter()
    measured, size = figures(quick="--quick" in sys.argv)
    path = Path(ROOT) / "BENCHMARKS.md"
    path.write_text(splice(path.read_text(), render(measured, machine()["load"], size), summary_rows(measured)))
    for name in CONTENDERS:
        if measured.runs[name]:
            print(LABELS[name], {k: round(measured.median(name, k), 2) for k in measured.runs[name][0]},
                  file=sys.stderr)
    print(f"errors: {measured.errors}; {time.perf_counter() - started:.0f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
