"""Flow control's figures (issue 16): what limiting costs a batch, and what the limiters do end to end.

- **Cost** (moto server, ``LATENCY`` a request): a batch of 10 jobs under a
  rate limit, under a concurrency limit and under none, in one warm worker:
  DynamoDB calls, write units and sequential round trips; and a batch facing a
  full limiter (deferred without a call).
- **Rate** (local cloud, two pollers): 200 ``sms-reminder`` jobs limited to 10
  a second: the most starts in any 1 s window, the span of starts against the
  ideal 20 s, deferrals (all, and the most any one job had), attempts and dead
  letters; and (issue 35) 100 jobs at 10 a second under ``app.testing()`` (its
  manual clock: no wall time at all), with the DynamoDB calls per batch.
- **Concurrency** (local cloud): 40 ``invoice-pdf`` renders of 0.3 s limited
  to 2 at once: the most runs at once, all done, deferrals.

Starts and runs are read from what the jobs logged (``sqsjobs.local.timeline``).
"""

from __future__ import annotations

import json
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from bench.figures import LATENCY, ROOT
from bench.support import CallLog, Stat, add_latency, client, create_queues, create_table, sequential_depth
from sqsjobs._metrics import DEFERRED

#: the issue's scenarios
RATE_JOBS, RATE, RATE_POLLERS = 200, 10, 2
PDF_JOBS, PDF_LIMIT, PDF_POLLERS = 40, 2, 5
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
#: each statement of a BatchExecuteStatement is a write of its own (store/_statements.py)
STATEMENTS = "BatchExecuteStatement"
#: the template's parameters for the flow scenarios (the e2e suite's, with room for a loaded machine)
FLOW_PARAMETERS = {"SenderEmail": "billing@example.com", "WorkerTimeoutSeconds": "30",
                   "QueueVisibilityTimeoutSeconds": "70", "MaximumBatchingWindowSeconds": "0", "MaxAttempts": "5"}


@dataclass
class BatchCost:
    """One kind of batch of 10: median DynamoDB calls, writes (= WCU: every item is under 1 KB), round trips."""

    calls: list[float] = field(default_factory=list)
    writes: list[float] = field(default_factory=list)
    depth: list[float] = field(default_factory=list)

    def median(self, name: str) -> float:
        return float(statistics.median(getattr(self, name)))


@dataclass
class FlowFigures:
    """Everything the flow-control section of BENCHMARKS.md shows."""

    cost: dict[str, BatchCost] = field(default_factory=dict)
    rate: dict[str, float] = field(default_factory=dict)
    #: 100 jobs at 10/s under app.testing() (issue 35's second row)
    testing: dict[str, float] = field(default_factory=dict)
    pdf: dict[str, float] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)


def batch_costs(endpoint: str, reps: int) -> dict[str, BatchCost]:
    """Batches of 10 in one warm worker: unlimited, rate-limited, concurrency-limited, and facing a full limiter."""
    from sqsjobs import JobApp
    from sqsjobs.testing import sqs_event

    sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint, "sqsjobs")
    queue, dlq = create_queues(sqs, "bench-flow")
    create_table(dynamodb, "bench-flow", "pk")
    log = CallLog()
    log.attach(dynamodb)
    add_latency(dynamodb, LATENCY)
    app = JobApp(queue_url=queue, dlq_url=dlq, table_name="bench-flow", function_timeout=60, sqs_client=sqs,
                 dynamodb_client=dynamodb, emit_metrics=lambda line: None)
    app.rate_limit("roomy", rate=100_000)  # never full: what taking the tokens costs
    app.rate_limit("full", rate=10, per=3600.0)  # full after one batch: what a deferral costs
    app.concurrency_limit("pdf", PDF_LIMIT)
    kinds = {"none": (), "rate": ("roomy",), "concurrency": ("pdf",), "full": ("full",)}
    for kind, limits in kinds.items():
        app.job(kind, key=kind + ":{n}", limits=limits)(_noop)
    out = {kind: BatchCost() for kind in kinds}
    counter = iter(range(10**9))

    def batch(kind: str) -> list[Any]:
        event = sqs_event([json.loads(app.jobs[kind].message(n=next(counter)).body) for _ in range(10)])
        log.clear()
        app.process_batch(event)
        return [c for c in log.calls if c.service == "dynamodb"]

    for kind in ("none", "rate", "concurrency", "full"):
        batch(kind)  # warm: clients, prepared requests, the lag and step the permits learn; fills "full"
    for _ in range(reps):
        for kind in kinds:
            calls = batch(kind)
            out[kind].calls.append(len(calls))
            out[kind].writes.append(sum(1 if c.operation in WRITES else len(c.params.get("Statements", []))
                                        if c.operation == STATEMENTS else 0 for c in calls))
            out[kind].depth.append(sequential_depth(calls))
    return out


def _noop(n: int) -> None:
    """The job under measurement does nothing: only the framework's calls count."""


def rate_scenario() -> dict[str, float]:
    """200 jobs at 10 a second through the local cloud with two pollers."""
    from sqsjobs.local.timeline import busy_seconds, calls, metric_total, most_in_window

    with _cloud({"MaximumConcurrency": str(RATE_POLLERS)}) as (cloud, logs):
        sent = time.time()
        _send(cloud, [cloud.app.message("sms-reminder", appointment_id=i) for i in range(1, RATE_JOBS + 1)])
        cloud.drain(timeout=600)
        drained = time.time()
        starts = sorted(start for start, _ in calls(logs, "sms").values())
        statuses = _statuses(cloud, [f"sms-reminder:{i}" for i in range(1, RATE_JOBS + 1)])
        per_job = Counter(o.get("key") for o in cloud.outcomes()
                          if o.get("outcome") == "deferred" and str(o.get("key", "")).startswith("sms-reminder:"))
        return {
            "most deferrals of a job": max(per_job.values(), default=0),
            "done": len(starts), "most in 1 s": most_in_window(starts, 1.0), "span": starts[-1] - starts[0],
            "sent to drained": drained - sent,
            "busy per poller": busy_seconds(cloud, "WorkerFunction", sent, drained) / RATE_POLLERS,
            "deferred": metric_total(cloud, DEFERRED, Job="sms-reminder", Limiter="sms"),
            "one attempt": sum(1 for s in statuses if s == 1), "dead letters": len(cloud.dead_letters()),
        }


def testing_rate_scenario(jobs: int = 100, rate: int = RATE) -> dict[str, float]:
    """``jobs`` jobs at ``rate`` a second under ``app.testing()``: its poller drains the queue on a manual clock."""
    from sqsjobs import JobApp, Outcome
    from sqsjobs.local.timeline import most_in_window

    app = JobApp()
    app.rate_limit("sms", rate=rate)
    starts: list[float] = []

    @app.job("sms", key="sms:{n}", limits=["sms"])
    def sms(n: int) -> None:
        starts.append(app.runtime.clock())

    with app.testing() as t:
        for n in range(jobs):
            sms.enqueue(n=n)
        store = app.runtime.store
        before = store.calls  # type: ignore[attr-defined]
        batches = t.drain(max_batches=10 * jobs)
        per_job = Counter(o.key for o in t.outcomes if o.outcome is Outcome.DEFERRED)
        receives = sum(len(b.deliveries) for b in batches)
        starts.sort()
        return {"done": len(starts), "deferred": sum(per_job.values()),
                "most deferrals of a job": max(per_job.values(), default=0), "receives": receives,
                "span": starts[-1] - starts[0], "ideal": jobs / rate, "most in 1 s": most_in_window(starts, 1.0),
                "batches": len(batches), "calls": store.calls - before}  # type: ignore[attr-defined]


def concurrency_scenario() -> dict[str, float]:
    """40 renders of 0.3 s, at most 2 at once, with 5 invocations allowed."""
    from sqsjobs.local.timeline import calls, metric_total, most_at_once

    with _cloud({"MaximumConcurrency": str(PDF_POLLERS)}) as (cloud, logs):
        sent = time.time()
        _send(cloud, [cloud.app.message("invoice-pdf", invoice_id=i) for i in range(1, PDF_JOBS + 1)])
        cloud.drain(timeout=600)
        runs = calls(logs, "pdf")
        statuses = _statuses(cloud, [f"invoice-pdf:{i}" for i in range(1, PDF_JOBS + 1)])
        return {"done": len(runs), "most at once": most_at_once(runs.values()), "total": time.time() - sent,
                "ideal": PDF_JOBS * 0.3 / PDF_LIMIT,
                "deferred": metric_total(cloud, DEFERRED, Job="invoice-pdf", Limiter="pdf"),
                "one attempt": sum(1 for s in statuses if s == 1)}


class _cloud:
    """The template on the local cloud with ``parameters``, its function logs collected."""

    def __init__(self, parameters: dict[str, str]) -> None:
        self.parameters = {**FLOW_PARAMETERS, **parameters}

    def __enter__(self) -> tuple[Any, list[tuple[str, str]]]:
        from sqsjobs.local.cloud import LocalCloud
        from sqsjobs.local.output import Output
        from sqsjobs.local.pytest_plugin import LocalCloudSession

        logs: list[tuple[str, str]] = []
        # DEBUG: the worker logs each job's outcome (a job's deferrals are counted from them).
        self.cloud = LocalCloud.start(ROOT / "template.yaml", parameters=self.parameters, stack_name="bench-flow",
                                      output=Output(event=lambda level, text: None,
                                                    log=lambda function, line: logs.append((function, line))),
                                      log_level="DEBUG")
        session = LocalCloudSession(self.cloud)
        session.logs = logs
        return session, logs

    def __exit__(self, *exc: object) -> None:
        self.cloud.stop()


def _send(cloud: Any, messages: list[Any]) -> None:
    from sqsjobs.enqueue._producer import Producer

    Producer(cloud.clients.get("sqs"), cloud.queue_url(cloud.app_queue(messages[0].queue))).send_many(messages)


def _statuses(cloud: Any, keys: list[str]) -> list[int | None]:
    from sqsjobs.store._dynamodb import DynamoDBStore
    from sqsjobs.worker import _job_records as guard

    store = DynamoDBStore(cloud.clients.get("dynamodb"), cloud.function_env("WorkerFunction")["SQSJOBS_TABLE"])
    return [None if (s := guard.status(store, key)) is None else s.attempts for key in keys]


def local_scenarios(out: FlowFigures | None) -> None:
    """The rate and concurrency scenarios into ``out``; one that could not run is reported, not hidden."""
    if out is None:
        return
    for name, scenario in (("testing", testing_rate_scenario), ("rate", rate_scenario),
                           ("pdf", concurrency_scenario)):
        try:
            setattr(out, name, scenario())
        except Exception as error:  # reported in BENCHMARKS.md
            out.errors.append(f"{name}: {type(error).__name__}: {error}")


def summary_rows(f: FlowFigures) -> list[str]:
    """Rows for the summary table of BENCHMARKS.md."""
    from bench.report import _verdict

    rows = []
    calls = f.cost["rate"].median("calls")
    rows.append(f"| flow control: DynamoDB calls for a batch of 10 rate-limited jobs (moto server; 12 before issue 35) "
                f"| {calls:g} | | | ≤ 3 | {_verdict(calls <= 3)} |")
    extra = f.cost["rate"].median("depth") - f.cost["none"].median("depth")
    rows.append(f"| flow control: extra sequential DynamoDB round trips for a batch of 10 rate-limited jobs "
                f"(WCU {f.cost['rate'].median('writes') - f.cost['none'].median('writes'):+g}) | {extra:+g} | | | "
                f"≤ 1 | {_verdict(extra <= 1)} |")
    if f.rate:
        r = f.rate
        rows.append(f"| flow control: most starts in any 1 s, {RATE_JOBS} jobs at {RATE}/s, local cloud | "
                    f"{r['most in 1 s']:.0f} | | | ≤ {RATE + 1} | {_verdict(r['most in 1 s'] <= RATE + 1)} |")
        ratio = r["span"] / (RATE_JOBS / RATE)
        rows.append(f"| flow control: span of those starts against the ideal {RATE_JOBS / RATE:.0f} s | {ratio:.2f}x | "
                    f"| | ≤ 1.1x | {_verdict(ratio <= 1.1)} |")
        if "most deferrals of a job" in r:
            rows.append(f"| flow control: deferrals a job, {RATE_JOBS} at {RATE}/s, local cloud (mean; most) | "
                        f"{r['deferred'] / RATE_JOBS:.2f}; {r['most deferrals of a job']:.0f} | | | ≤ 1 | "
                        f"{_verdict(r['most deferrals of a job'] <= 1)} |")
    if f.testing:
        t = f.testing
        ratio = t["span"] / t["ideal"]
        rows.append(f"| flow control: {t['done']:.0f} jobs at {RATE}/s under `app.testing()`: deferrals a job (mean; "
                    f"most), span against ideal | {t['deferred'] / t['done']:.2f}; {t['most deferrals of a job']:.0f}; "
                    f"{ratio:.2f}x | | | ≤ 1; ≤ 1.1x | "
                    f"{_verdict(t['most deferrals of a job'] <= 1 and ratio <= 1.1)} |")
    if f.pdf:
        most = f.pdf["most at once"]
        rows.append(f"| flow control: most of {PDF_JOBS} renders at once, limit {PDF_LIMIT}, local cloud | "
                    f"{most:.0f} | | | ≤ {PDF_LIMIT} | {_verdict(most <= PDF_LIMIT)} |")
    return rows


def render(f: FlowFigures, load: str) -> list[str]:
    """The flow-control section of BENCHMARKS.md."""
    from bench.report import _verdict

    lines = ["## Flow control (issue 16)", ""]
    add = lines.append
    base = f.cost["none"]
    add(f"Batches of 10 in one warm worker on the moto server, {LATENCY * 1000:g} ms a request; write units are "
        "writes (every limiter item is under 1 KB: 1 WCU, refused conditional writes included).")
    add("")
    add("| batch of 10 | DynamoDB calls | WCU | sequential round trips | extra over no limit |")
    add("|---|---|---|---|---|")
    labels = {"none": "no limiter", "rate": "`limits=[rate]` (slots free)", "concurrency":
              f"`limits=[concurrency]` (limit {PDF_LIMIT})", "full": "`limits=[rate]`, limiter full (all deferred)"}
    for kind, label in labels.items():
        c = f.cost[kind]
        extra = (f"{c.median('calls') - base.median('calls'):+g} calls, "
                 f"{c.median('depth') - base.median('depth'):+g} round trips")
        add(f"| {label} | {Stat(tuple(c.calls)).render('{:.0f}')} | {c.median('writes'):g} | "
            f"{Stat(tuple(c.depth)).render('{:.0f}')} | {extra} |")
    add("")
    add("A rate-limited batch reserves its ten start slots in one conditional write on the limiter's one item "
        "(issue 35: before, ten token probes, 12 calls); the claims and the completions are the batch's other two.")
    add("")
    if f.testing:
        t = f.testing
        ratio = t["span"] / t["ideal"]
        add(f"**Rate under `app.testing()`** (issue 35): {t['done']:.0f} jobs at {RATE}/s, drained by the tester's "
            "poller on its manual clock (no wall time): each job's deferrals and receives are counted.")
        add("")
        add("| figure | measured | goal | |")
        add("|---|---|---|---|")
        add(f"| deferrals a job: mean; most | {t['deferred'] / t['done']:.2f}; {t['most deferrals of a job']:.0f} | "
            f"≤ 1 | {_verdict(t['most deferrals of a job'] <= 1)} |")
        add(f"| receives a job | {t['receives'] / t['done']:.2f} | (report) | |")
        add(f"| span of the starts against the ideal {t['ideal']:.0f} s | {t['span']:.2f} s = {ratio:.3f}x | ≤ 1.1x | "
            f"{_verdict(ratio <= 1.1)} |")
        add(f"| most starts in any 1 s | {t['most in 1 s']:.0f} | ≤ {RATE} | {_verdict(t['most in 1 s'] <= RATE)} |")
        add(f"| DynamoDB calls a batch ({t['batches']:.0f} batches) | {t['calls'] / t['batches']:.2f} | ≤ 3 | "
            f"{_verdict(t['calls'] / t['batches'] <= 3)} |")
        add("")
    if f.rate:
        r = f.rate
        ideal = RATE_JOBS / RATE
        bound = 1.3 * max(ideal, r["busy per poller"])
        add(f"**Rate**: {RATE_JOBS} `sms-reminder` jobs limited to {RATE}/s through the local cloud, {RATE_POLLERS} "
            f"pollers (load average at the end: {load}).")
        add("")
        add("| figure | measured | goal | |")
        add("|---|---|---|---|")
        add(f"| most starts in any 1 s window (from the jobs' own start times) | {r['most in 1 s']:.0f} | "
            f"≤ {RATE} (+1 for clock edges) | {_verdict(r['most in 1 s'] <= RATE + 1)} |")
        add(f"| span of the {RATE_JOBS} starts, s | {r['span']:.1f} = {r['span'] / ideal:.2f}x | ≤ 1.1 x {ideal:.0f} s "
            f"= {1.1 * ideal:.0f} s | {_verdict(r['span'] <= 1.1 * ideal)} |")
        add(f"| the same against what the pollers could do (busy {r['busy per poller']:.1f} s each) | "
            f"{r['span']:.1f} | ≤ 1.3 x max(ideal, busy) = {bound:.0f} s | {_verdict(r['span'] <= bound)} |")
        add(f"| sent to drained, s | {r['sent to drained']:.1f} | (report) | |")
        add(f"| jobs done / with attempts == 1 / dead-lettered | {r['done']:.0f} / {r['one attempt']:.0f} / "
            f"{r['dead letters']:.0f} | {RATE_JOBS} / {RATE_JOBS} / 0 | "
            f"{_verdict(r['done'] == r['one attempt'] == RATE_JOBS and r['dead letters'] == 0)} |")
        add(f"| deferrals (JobDeferred): all, a job on average | {r['deferred']:.0f}, "
            f"{r['deferred'] / RATE_JOBS:.2f} | (report) | |")
        if "most deferrals of a job" in r:
            add(f"| the most deferrals of one job (its outcome lines) | {r['most deferrals of a job']:.0f} | ≤ 1 | "
                f"{_verdict(r['most deferrals of a job'] <= 1)} |")
        add("")
    if f.pdf:
        p = f.pdf
        add(f"**Concurrency**: {PDF_JOBS} `invoice-pdf` renders of 0.3 s, `concurrency_limit(\"pdf\", {PDF_LIMIT})`, "
            f"{PDF_POLLERS} invocations allowed at once.")
        add("")
        add("| figure | measured | goal | |")
        add("|---|---|---|---|")
        add(f"| most renders running at once (from their logged start and end) | {p['most at once']:.0f} | "
            f"≤ {PDF_LIMIT} | {_verdict(p['most at once'] <= PDF_LIMIT)} |")
        add(f"| renders done, attempts == 1 | {p['done']:.0f}, {p['one attempt']:.0f} | {PDF_JOBS} | "
            f"{_verdict(p['done'] == p['one attempt'] == PDF_JOBS)} |")
        add(f"| total, s (ideal {p['ideal']:.0f} s) | {p['total']:.1f} | (report) | |")
        add(f"| deferrals (JobDeferred) | {p['deferred']:.0f} | (report) | |")
        add("")
    for error in f.errors:
        add(f"Not measured: {error}")
        add("")
    return lines


def splice(path: Any, f: FlowFigures, load: str) -> None:
    """Put ``f``'s section and summary rows into the BENCHMARKS.md at ``path``, leaving every other section."""
    from pathlib import Path

    text = Path(path).read_text()
    start = text.index("## Flow control")
    end = text.find("\n## ", start + 1)
    section = "\n".join(render(f, load)).rstrip("\n") + "\n"
    text = text[:start] + section + (text[end:] if end != -1 else "")
    lines = text.split("\n")
    rows = [i for i, line in enumerate(lines) if line.startswith("| flow control:")]
    if rows:
        lines[rows[0]:rows[-1] + 1] = summary_rows(f)
    Path(path).write_text("\n".join(lines))


def main() -> None:
    """``python -m bench.flow``: only the flow-control figures, spliced into BENCHMARKS.md."""
    import os

    from bench.support import moto_server

    for name, value in (("AWS_ACCESS_KEY_ID", "bench"), ("AWS_SECRET_ACCESS_KEY", "bench"),
                        ("AWS_DEFAULT_REGION", "us-east-1")):
        os.environ.setdefault(name, value)
    os.environ.pop("AWS_ENDPOINT_URL", None)
    with moto_server() as endpoint:
        figures = FlowFigures(cost=batch_costs(endpoint, reps=15))
    local_scenarios(figures)
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    splice(ROOT / "BENCHMARKS.md", figures, load)


if __name__ == "__main__":
    main()
