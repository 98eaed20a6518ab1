"""What tracing costs per message: no OpenTelemetry, its API imported with no SDK, the SDK exporting to memory.

Each mode runs in a fresh interpreter of its own (OpenTelemetry's tracer provider is process-wide), pinned to
one core as Lambda's vCPU (``bench/pinned.py``), the modes alternating round by round so the machine's load
falls on all three. A round enqueues ``MESSAGES`` jobs under a request span (where there is a tracer) and runs
them through the worker in batches of 10 with ``app.testing()`` (in-memory store and SQS: the figure is the
framework's own CPU, botocore's is the same in every mode). The figure is process CPU per message, producer
and worker together. "absent" blocks every ``opentelemetry`` import, as when it is not installed.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass, field

from bench.pinned import ROOT, cores
from bench.support import Stat

MODES = ("absent", "api", "sdk")
MESSAGES = 500
LABELS = {"absent": "OpenTelemetry not installed", "api": "API imported, no SDK (no-op tracer)",
          "sdk": "SDK, in-memory exporter (every span recorded)"}

CHILD = """
import json, sys, time
mode, messages, core = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import os
os.sched_setaffinity(0, {core})
if mode == "absent":
    class Absent:
        def find_spec(self, name, path=None, target=None):
            if name == "opentelemetry" or name.startswith("opentelemetry."):
                raise ImportError(name)
    sys.meta_path.insert(0, Absent())
span = None
if mode in ("api", "sdk"):
    from opentelemetry import trace
    if mode == "sdk":
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
    span = trace.get_tracer("bench").start_as_current_span
from contextlib import nullcontext
from sqsjobs import JobApp
app = JobApp()
done = []
@app.job("invoice-email", key="invoice-email:{invoice_id}")
def invoice_email(invoice_id: int) -> None:
    done.append(invoice_id)
def round(first):
    with (span("request") if span else nullcontext()):
        for i in range(first, first + messages):
            invoice_email.enqueue(invoice_id=i)
    t.drain(batch_size=10, max_batches=messages)
with app.testing() as t:
    round(0)  # warm: lazy imports, first spans
    started = time.process_time()
    round(messages)
    spent = time.process_time() - started
assert len(done) == 2 * messages, len(done)
spans = len(exporter.get_finished_spans()) if mode == "sdk" else 0
print(json.dumps({"us": spent / messages * 1e6, "spans": spans, "imported": "opentelemetry.trace" in sys.modules}))
"""


@dataclass
class TracingFigures:
    """µs of CPU per message by mode, and the spans the SDK mode recorded per message."""

    us: dict[str, list[float]] = field(default_factory=lambda: {mode: [] for mode in MODES})
    spans_per_message: float = 0.0
    messages: int = MESSAGES


def tracing_cpu(reps: int, messages: int = MESSAGES) -> TracingFigures:
    """Run the three modes ``reps`` times each, alternating."""
    core = cores()[0]
    figures = TracingFigures(messages=messages)
    for _ in range(reps):
        for mode in MODES:
            out = subprocess.run([sys.executable, "-c", CHILD, mode, str(messages), str(core)], cwd=ROOT,
                                 capture_output=True, text=True, check=True, timeout=600)
            report = json.loads(out.stdout.strip().splitlines()[-1])
            if report["imported"] != (mode != "absent"):
                raise RuntimeError(f"{mode}: opentelemetry.trace imported = {report['imported']}")
            figures.us[mode].append(report["us"])
            if mode == "sdk":
                figures.spans_per_message = report["spans"] / (2 * messages)
    return figures


def render(f: TracingFigures) -> list[str]:
    """BENCHMARKS.md's section on what tracing costs."""
    base = Stat(tuple(f.us["absent"]))
    lines = [HEADING, "",
             f"`bench/tracing.py`: {f.messages} jobs enqueued under a request span and run by the worker in batches "
             "of 10 (`app.testing()`: in-memory store and SQS, so this is the framework's own CPU, producer and "
             "worker together), each mode a fresh interpreter pinned to one core, the modes alternating. With the "
             f"SDK every message makes {f.spans_per_message:.2f} spans (its send span's share, its message span, "
             "its batch span's share). The docs: docs/observability.md (Traces).", "",
             "| mode | CPU per message, µs | over no OpenTelemetry |", "|---|---|---|"]
    for mode in MODES:
        stat = Stat(tuple(f.us[mode]))
        ratio = Stat(tuple(x / y for x, y in zip(f.us[mode], f.us["absent"], strict=True)))
        lines.append(f"| {LABELS[mode]} | {stat.render('{:.0f}')} | {ratio.render('{:.2f}x')} |")
    lines += ["", "Without OpenTelemetry, or with it imported but no tracer provider set, a hook is one `sys.modules` "
              "lookup and a global read (`sqsjobs/_otel.py`): the first two rows differ by the machine's noise. "
              f"The median with tracing off is {base.median:.0f} µs per message.", ""]
    return lines


HEADING = "## Tracing: CPU per message with and without OpenTelemetry"


def splice(report: str, section: list[str]) -> str:
    """``report`` with this section replaced, or added before ``## Method``.

    Example:
        >>> print(splice("# B\\n\\n## Method\\n\\nm\\n", [HEADING, "", "x", ""]).replace(HEADING, "## T"))
        # B
        <BLANKLINE>
        ## T
        <BLANKLINE>
        x
        <BLANKLINE>
        ## Method
        <BLANKLINE>
        m
        <BLANKLINE>
    """
    lines = report.split("\n")
    if HEADING in lines:
        start = lines.index(HEADING)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        del lines[start:end]
    at = lines.index("## Method") if "## Method" in lines else len(lines)
    lines[at:at] = section
    return "\n".join(lines)


def main() -> int:
    """Run this section only and write it into BENCHMARKS.md (``python -m bench.tracing [reps]``)."""
    from pathlib import Path

    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 9
    path = Path(ROOT) / "BENCHMARKS.md"
    path.write_text(splice(path.read_text(), render(tracing_cpu(reps))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
