"""``make bench``: measure sqsjobs against the Powertools equivalent and write BENCHMARKS.md.

Usage: ``python -m bench [--quick] [--out BENCHMARKS.md]``. Everything runs
against 127.0.0.1 (a moto server in this process or in a pinned process of its
own, the local cloud's moto child) or against botocore's Stubber; nothing
asserts, it only measures (a run that went wrong raises instead of reporting).
"""

from __future__ import annotations

import argparse
import datetime
import os
import sys
import time
from pathlib import Path

from bench import (
    async_jobs,
    batch_handlers,
    bundle,
    capacity,
    claims,
    coalescing,
    cold_start,
    figures,
    flow,
    groups,
    metering,
    pinned,
    tracing,
)
from bench.report import Results, render
from bench.support import machine, moto_server


def main(argv: list[str] | None = None) -> int:
    """Run every figure and write the report."""
    parser = argparse.ArgumentParser(description="sqsjobs vs Powertools benchmarks")
    parser.add_argument("--out", default=str(figures.ROOT / "BENCHMARKS.md"))
    parser.add_argument("--quick", action="store_true", help="few repetitions (a smoke run, not figures)")
    args = parser.parse_args(argv)
    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    q = args.quick
    started = time.perf_counter()
    results = Results(machine=machine(), started=datetime.datetime.now(datetime.UTC))

    def step(label: str) -> None:
        print(f"[bench {time.perf_counter() - started:6.1f} s] {label}", file=sys.stderr, flush=True)

    with moto_server() as endpoint:
        step("AWS calls, write units, round trips, wall time (moto server)")
        results.scenarios = figures.scenario_figures(endpoint, reps=3 if q else 15)
        step("producer calls")
        results.producer = figures.producer_calls(endpoint)
        step("worker loop vs raw loop (moto server)")
        results.loop = figures.worker_loop_throughput(endpoint, messages=50 if q else 300, reps=1 if q else 3)
        step("redrive vs raw loop (moto server)")
        results.redrive = figures.redrive_throughput(endpoint, messages=50 if q else 300, reps=1 if q else 3)
        step("flow control: what limiting costs a batch (moto server)")
        results.flow = flow.FlowFigures(cost=flow.batch_costs(endpoint, reps=3 if q else 15))
        step("debounce and dedupe: calls and write units per request (moto server)")
        results.coalescing = coalescing.coalescing_figures(endpoint)
        step("a delivery's write units by the path it came by (moto server)")
        results.claims = claims.claim_figures(endpoint)
    step("first invocation: fresh process, import, first batch (pinned; moto server process on the other core)")
    results.first = cold_start.first_invocation(reps=3 if q else 15)
    step("client CPU per message over real HTTP (pinned; moto server process on the other core)")
    results.http = pinned.http_cpu(reps=3 if q else 11, batches=10 if q else 20)
    step("job groups: units and round trips per member (local cloud's moto server)")
    results.groups = groups.group_figures()
    client_core = pinned.cores()[0]
    with pinned.pinned(client_core):  # one core, as Lambda gives a function of up to 1,769 MB
        step("wall time, CPU, round trips and EMF bytes with the Stubber (pinned)")
        results.stubbed = figures.stubbed_wall(reps=5 if q else 30)
        step("CPU per message with the Stubber (pinned)")
        results.cpu = figures.cpu_per_message(reps=3 if q else 21, batches=10 if q else 30)
        step("the cost metrics' CPU per message, with and without (pinned)")
        results.metering = metering.metering_figures(batches=50 if q else 1500)
    step("tracing: CPU per message without OpenTelemetry, with its API only, with its SDK (pinned)")
    results.tracing = tracing.tracing_cpu(reps=1 if q else 7, messages=100 if q else tracing.MESSAGES)
    step("capacity model for 10,000 jobs/s")
    results.capacity = capacity.render_markdown(capacity.model())
    from bench.contenders import message_bytes

    results.message_bytes = message_bytes()
    step("import only (python -X importtime)")
    results.cold = cold_start.import_only(reps=3 if q else 15)
    step("Lambda bundle: sizes (.aws-sam/build) and bytecode")
    results.bundles = bundle.bundle_sizes()
    results.bytecode = bundle.bytecode_saving(reps=2 if q else 7)
    step("a project made by sqsjobs init: sam build, each function and its layer")
    results.scaffold_bundles = bundle.scaffold_bundle_sizes()
    step("local cloud end to end")
    try:
        results.local_sizes = (50, 20) if q else (300, 40)
        results.local = figures.local_cloud_throughput(messages=results.local_sizes[0], reps=1 if q else 3,
                                                       shallow=results.local_sizes[1])
    except Exception as error:  # a figure we could not take is reported as such, not hidden
        results.local_error = f"{type(error).__name__}: {error}"
    step("flow control on the local cloud: a rate and a concurrency limit")
    flow.local_scenarios(results.flow)
    step("batch handlers on the local cloud: 1,000 items, per-item jobs against a batch handler")
    results.batch_handlers = batch_handlers.batch_figures()
    step("I/O-bound jobs: async and threaded jobs against both Powertools processors (pinned)")
    results.async_jobs, _ = async_jobs.figures(quick=q)
    results.seconds = time.perf_counter() - started
    Path(args.out).write_text(render(results))
    step(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
