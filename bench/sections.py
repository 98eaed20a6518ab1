"""BENCHMARKS.md rows and sections for issue 12: the first invocation, the Lambda bundle, the cost per million jobs.

Each summary row carries its goal and a verdict with the reason; each section
says how the figure was taken and what it is made of.
"""

from __future__ import annotations

import statistics
from typing import TYPE_CHECKING

from bench import cost
from bench.figures import BATCH, FRAMEWORKS, LATENCY
from bench.support import Stat

if TYPE_CHECKING:
    from bench.bundle import BundleSize
    from bench.cold_start import FirstInvocation
    from bench.figures import StubbedBatches
    from bench.report import Results

#: issue 12's goal for the first invocation, sqsjobs over Powertools (medians)
FIRST_INVOCATION_GOAL = 0.7
#: the Lambda poller's own SQS requests per job: a ReceiveMessage and a DeleteMessageBatch per batch of 10
POLLER_REQUESTS_PER_JOB = 2 / BATCH


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**missed**"


def _mb(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


# ---------------------------------------------------------------- first invocation
def first_invocation_rows(first: FirstInvocation) -> list[str]:
    """Summary rows: the first invocation (the goal), its CPU, and its two halves."""
    total = {name: Stat(tuple(first.total_ms[name])) for name in FRAMEWORKS}
    cpu = {name: Stat(tuple(first.cpu_ms[name])) for name in FRAMEWORKS}
    ratio = total["sqsjobs"].median / total["powertools"].median
    cpu_ratio = cpu["sqsjobs"].median / cpu["powertools"].median
    halves = {name: (statistics.median(first.import_ms[name]), statistics.median(first.batch_ms[name]))
              for name in FRAMEWORKS}
    reason = (f"import {halves['sqsjobs'][0]:.0f} + first batch {halves['sqsjobs'][1]:.0f} ms against "
              f"{halves['powertools'][0]:.0f} + {halves['powertools'][1]:.0f} ms; where it goes: "
              "First invocation below")
    return [
        f"| **cold start, first invocation**: fresh process, import of the handler, then its first batch of "
        f"{BATCH} new jobs (moto server), ms | {total['sqsjobs'].render('{:.0f}')} | "
        f"{total['powertools'].render('{:.0f}')} | {ratio:.2f}x | ≤ {FIRST_INVOCATION_GOAL}x | "
        f"{_verdict(ratio <= FIRST_INVOCATION_GOAL)}: {reason} |",
        f"| same, CPU time of the process (what a fraction of a vCPU stretches), ms | "
        f"{cpu['sqsjobs'].render('{:.0f}')} | {cpu['powertools'].render('{:.0f}')} | {cpu_ratio:.2f}x | (report) | "
        "wall time gains from overlapping the batch's calls; CPU only from doing less |",
    ]


def first_invocation_section(first: FirstInvocation) -> list[str]:
    """How the first invocation is measured, and the imports that cost the most in it."""
    lines = [
        "## First invocation (cold start)",
        "",
        "Each run is a new Python process (`bench/cold/first_call.py`) that imports the handler module —",
        "`handlers/worker.py` for sqsjobs, `bench/cold/pt_worker.py` for Powertools — and calls it once with a",
        f"batch of {BATCH} new `invoice-email` jobs received from a queue on a moto server (127.0.0.1); each job",
        "sends its e-mail through SES there, behind each framework's DynamoDB idempotency table. The clock",
        "starts before the import and stops when the handler returns; interpreter start-up is not counted (it",
        "is the same for both). Runs alternate between the frameworks after a warm-up round, and each is",
        "checked (no failed record, the records written), so a broken run cannot pass for a fast one.",
        "",
        "| framework | import, ms | first batch, ms | total, ms | CPU, ms |",
        "|---|---|---|---|---|",
    ]
    for name in FRAMEWORKS:
        lines.append(f"| {name} | {Stat(tuple(first.import_ms[name])).render('{:.0f}')} | "
                     f"{Stat(tuple(first.batch_ms[name])).render('{:.0f}')} | "
                     f"{Stat(tuple(first.total_ms[name])).render('{:.0f}')} | "
                     f"{Stat(tuple(first.cpu_ms[name])).render('{:.0f}')} |")
    lines += [
        "",
        "Where the imports of one more run each go (`-X importtime`: each module's own time, summed by",
        "top-level package; the handler's imports and those a framework makes lazily in its first batch):",
        "",
        "| framework | import ms by package |",
        "|---|---|",
    ]
    for name in FRAMEWORKS:
        listed = ", ".join(f"{package} {ms:.0f}" for package, ms in first.imports.get(name, []))
        lines.append(f"| {name} | {listed or '(none over 3 ms)'} |")
    lines += [
        "",
        "What sqsjobs does about it (docs/cold-start.md has the detail): its clients come from one botocore",
        "session shared with the jobs' own clients (`sqsjobs._clients.client`), so the service models, the",
        "endpoint data (1.2 MB of JSON) and the credentials are read once; it never imports boto3 (which",
        "brings s3transfer and multiprocessing); and its data loader checks that a service exists by looking",
        "at that service's directory instead of listing all ~400 that botocore ships. Powertools builds its",
        "own boto3 session for the persistence layer, and the job's `boto3.client` uses boto3's default one,",
        "so it reads all of that twice.",
        "",
    ]
    return lines


# ---------------------------------------------------------------- bundle
def bundle_rows(bundles: list[BundleSize], bytecode: dict[str, Stat]) -> list[str]:
    """Summary rows: every function's unzipped size (no extras inside), and what the bytecode saves."""
    rows = []
    for b in bundles:
        inside = ", ".join(b.not_runtime) or "no CLI, local cloud, moto, cfn-lint or samtranslator inside"
        rows.append(f"| Lambda bundle `{b.function}`: unzipped (zipped) | {_mb(b.unzipped)} ({_mb(b.zipped)}) | | | "
                    f"only what Lambda runs | {_verdict(not b.not_runtime)}: {inside} |")
    if bytecode:
        saved = bytecode["source only"].median - bytecode["with .pyc"].median
        rows.append(f"| worker bundle with python3.12: import + the first batch's set-up, ms, with the bundle's .pyc "
                    f"files | {bytecode['with .pyc'].render('{:.0f}')} | | | (report) | from source only "
                    f"{bytecode['source only'].median:.0f} ms: the shipped bytecode saves {saved:.0f} ms |")
    return rows


def bundle_section(bundles: list[BundleSize], bytecode: dict[str, Stat]) -> list[str]:
    """Each function's bundle, its largest parts, and the bytecode measurement."""
    lines = [
        "## Lambda bundle",
        "",
        "`sam build` output (`.aws-sam/build`, built by infra/bundle/Makefile: the sqsjobs wheel without",
        "extras, the extras' modules removed, bytecode compiled for python3.12). Unzipped is what Lambda's",
        "250 MB limit counts; zipped is a deflate archive of the same files. tests/infra/test_bundle.py fails",
        "if a package of an extra gets in, and imports every runtime module from each bundle alone.",
        "",
        "| function | unzipped | zipped | files | largest parts |",
        "|---|---|---|---|---|",
    ]
    for b in bundles:
        parts = ", ".join(f"{name} {_mb(size)}" for name, size in b.largest)
        lines.append(f"| {b.function} | {_mb(b.unzipped)} | {_mb(b.zipped)} | {b.files} | {parts} |")
    lines += [
        "",
        "Every function gets the same site-packages (one install, copied), so the sizes match. botocore is",
        "most of it; Lambda's runtime has its own boto3, but the bundle pins the one the tests ran with.",
        "",
    ]
    if bytecode:
        lines += [
            "Bytecode: Lambda's /var/task is read-only, so without `.pyc` files every cold start compiles",
            "every module it imports. Measured with python3.12 (`-B -I -S`: no bytecode written, the bundle",
            "and the standard library only), fresh processes, alternating: importing the worker and building",
            "what its first batch builds (clients, store, processor, the SES client), no AWS call —",
            f"with the bundle's `.pyc` files {bytecode['with .pyc'].render('{:.0f}')} ms, from source only "
            f"{bytecode['source only'].render('{:.0f}')} ms.",
            "",
        ]
    return lines


# ---------------------------------------------------------------- cost
def cost_inputs(r: Results) -> dict[str, cost.Inputs]:
    """Each framework's measured figures for batches of successful jobs, as the cost model takes them."""
    s, stubbed = r.scenarios, r.stubbed
    assert s is not None and stubbed is not None
    producer = {"sqsjobs": r.producer[0], "powertools": r.producer[1]}
    inputs = {}
    for name in FRAMEWORKS:
        key = (name, "success")
        inputs[name] = cost.Inputs(
            wall_ms=stubbed.wall_ms[name].median,
            cpu_ms=stubbed.cpu_ms[name].median,
            wcu_per_job=statistics.median(s.wcu_per_message(key)),
            sqs_per_job=producer[name] + POLLER_REQUESTS_PER_JOB + statistics.median(s.sqs_calls[key]),
            emf_bytes_per_job=stubbed.emf_bytes_per_job[name],
        )
    return inputs


def cost_rows(inputs: dict[str, cost.Inputs]) -> list[str]:
    """Summary rows: USD per million successful jobs at each memory size."""
    rows = []
    for memory in cost.MEMORIES:
        priced = {name: cost.price(inputs[name], memory) for name in FRAMEWORKS}
        ratio = priced["sqsjobs"].total_usd / priced["powertools"].total_usd
        cheaper = priced["sqsjobs"].total_usd <= priced["powertools"].total_usd
        rows.append(f"| cost per million successful jobs at {memory:,} MB, USD (Lambda, DynamoDB, SQS, "
                    f"CloudWatch) | {priced['sqsjobs'].total_usd:.2f} | {priced['powertools'].total_usd:.2f} | "
                    f"{ratio:.2f}x | no more than Powertools | {_verdict(cheaper)}: Cost per million jobs below |")
    return rows


def cost_section(inputs: dict[str, cost.Inputs], stubbed: StubbedBatches) -> list[str]:
    """The priced table, its inputs, the prices and the model."""
    lines = [
        "## Cost per million jobs",
        "",
        f"A million successful jobs in batches of {BATCH}, us-east-1, arm64 (the template's architecture).",
        f"Prices: {cost.PRICES_SOURCE}: Lambda ${cost.LAMBDA_ARM_GB_SECOND:.10f} per GB-s and $0.20 per million",
        f"requests, DynamoDB on-demand ${cost.DYNAMODB_WRITE_UNIT * 1e6:.3f} per million write units, SQS",
        f"${cost.SQS_REQUEST * 1e6:.2f} per million requests, CloudWatch Logs ${cost.CLOUDWATCH_LOGS_GB:.2f} per GB "
        "ingested. Free tiers are left out.",
        "",
        "| framework | memory | batch duration, ms | Lambda GB-s | Lambda $ | DynamoDB $ | SQS $ | CloudWatch $ "
        "| total $ |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for memory in cost.MEMORIES:
        for name in FRAMEWORKS:
            p = cost.price(inputs[name], memory)
            lines.append(f"| {name} | {memory:,} MB | {p.duration_ms:.1f} | {p.lambda_gb_s:,.0f} | "
                         f"{p.lambda_usd:.3f} | {p.dynamodb_usd:.3f} | {p.sqs_usd:.3f} | {p.cloudwatch_usd:.4f} | "
                         f"{p.total_usd:.3f} |")
    lines += [
        "",
        "Inputs, measured above (medians):",
        "",
        "| framework | batch wall, ms (1 core, every AWS call 5 ms) | batch CPU, ms | DynamoDB write units per job "
        "| SQS requests per job | EMF bytes per job |",
        "|---|---|---|---|---|---|",
    ]
    for name in FRAMEWORKS:
        i = inputs[name]
        lines.append(f"| {name} | {stubbed.wall_ms[name].render()} | {stubbed.cpu_ms[name].render()} | "
                     f"{i.wcu_per_job:g} | {i.sqs_per_job:.2f} | {i.emf_bytes_per_job:.0f} |")
    lines += [
        "",
        f"- **Lambda**: `duration = wall + cpu * (1 / share - 1)`, `share = min(1, memory / {cost.FULL_VCPU_MB})`:",
        f"  the batch's waits (sequential AWS calls, {LATENCY * 1000:g} ms) stay as measured and its CPU",
        "  stretches by the vCPU share Lambda gives that memory. Each invocation is billed rounded up to the",
        "  millisecond, plus the request charge. A cold start's init is billed too (since 2025-08-01) but",
        "  depends on how often instances start; the first-invocation row is its size. The batch CPU is",
        "  taken in the same batches, waits included: resuming after a wait costs CPU on a shared core, and",
        "  Powertools waits 20 times in sequence where sqsjobs waits twice, so its batch CPU is above ten",
        "  times the CPU-per-message row (measured without waits).",
        "- **DynamoDB**: every write is one write unit (items are under 1 KB; failed conditional writes are",
        "  billed). Both frameworks write twice per successful job (claim or in-progress record, then",
        "  completion); neither reads.",
        "- **SQS**: the producer's sends (sqsjobs' `enqueue_many`: 10 per `SendMessageBatch`; Powertools has no",
        "  producer, so one boto3 `send_message` per job), Lambda's poller (a receive and a delete per batch,",
        f"  {POLLER_REQUESTS_PER_JOB:g} per job, the same for both), and each framework's own calls on success (none).",
        "- **CloudWatch**: the EMF lines each framework writes (sqsjobs: its job metrics, one document per job",
        "  name per batch; the Powertools contender, set up as documented for batch + idempotency, writes no",
        "  metrics). A success logs nothing at the default level for either. The custom metrics themselves",
        "  are a monthly charge per metric, not per job.",
        "",
    ]
    return lines
