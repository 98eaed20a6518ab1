"""Run the demo: ``python -m demo`` (``make demo``). Exits 0 when the outcome is as expected.

``--keep`` (``make demo KEEP=1``) leaves the local cloud and the operator console running until Ctrl-C.
"""

from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live

from demo import coalescing, patterns, report
from demo.console import hold_open, start_console
from demo.view import render
from demo.workload import Workload, messages

ROOT = Path(__file__).resolve().parent.parent
SENDER = "billing@example.com"
# Short timeouts so a lost or failed delivery comes back within seconds; the
# visibility timeout still exceeds timeout + margin, as `sqsjobs check` demands.
PARAMETERS = {
    "SenderEmail": SENDER,
    "WorkerTimeoutSeconds": "10",
    "QueueVisibilityTimeoutSeconds": "20",
    "VisibilityMarginSeconds": "5",
    "MaximumBatchingWindowSeconds": "1",
    "MaximumConcurrency": "4",
    "MaxAttempts": "4",
}
OUTAGE_S = 3.0
DEADLINE_S = 100.0


class Demo:
    """One demo run against a fresh local cloud."""

    def __init__(self, console: Console, *, keep: bool = False) -> None:
        self.console = console
        self.keep = keep
        self.workload = Workload.default()
        self.events: deque[tuple[str, str]] = deque(maxlen=50)
        self.sent = 0
        self.phase = "starting"
        self.started = time.monotonic()
        self.log_path = Path(tempfile.gettempdir()) / "sqsjobs-demo-functions.log"
        self.patterns = patterns.PatternsOutcome()
        self.coalescing = coalescing.CoalescingOutcome()

    def event(self, level: str, text: str) -> None:
        self.events.append((level, text))
        if level in ("page", "alarm-warn", "error"):
            label = {"page": "[bold white on red] PAGE [/]", "alarm-warn": "[bold black on yellow] WARN [/]",
                     "error": "[bold red]error[/]"}[level]
            self.console.print(f"{label} {text.splitlines()[0]}", highlight=False)

    def run(self) -> int:
        from sqsjobs.local.cloud import LocalCloud
        from sqsjobs.local.output import Output

        sys.path.insert(0, str(ROOT))
        log_file = self.log_path.open("w")
        output = Output(event=self.event, log=lambda fn, line: (log_file.write(f"[{fn}] {line}\n"), None)[1])
        self.console.print(f"starting the local cloud with {ROOT / 'template.yaml'} ...")
        with LocalCloud.start(ROOT / "template.yaml", parameters=PARAMETERS, output=output,
                              stack_name="sqsjobs-demo") as cloud:
            self.console.print(f"moto server on {cloud.endpoint}; function logs in {self.log_path}")
            operator_console = start_console(cloud)
            self.console.print(f"operator console on [bold]{operator_console.url}[/bold]", highlight=False)
            app = self._app()
            worker = cloud.function_env("WorkerFunction")
            namespace = worker["POWERTOOLS_METRICS_NAMESPACE"]
            service = worker["POWERTOOLS_SERVICE_NAME"]
            stop = threading.Event()
            sender = threading.Thread(target=self._send, args=(cloud, app, stop), daemon=True)
            with Live(console=self.console, refresh_per_second=4, transient=False) as live:
                sender.start()
                quiet_frames = 0
                # Idle for 2 s (8 frames): stream pollers have read their shards again meanwhile.
                while sender.is_alive() or quiet_frames < 8:
                    quiet_frames = 0 if sender.is_alive() or cloud.pending() else quiet_frames + 1
                    cloud.check()
                    if time.monotonic() - self.started > DEADLINE_S:
                        self.console.print("[red]the workload did not settle in time[/]")
                        break
                    live.update(render(cloud, namespace=namespace, service=service, phase=self.phase,
                                       sent=self.sent, elapsed=time.monotonic() - self.started, events=self.events))
                    time.sleep(0.25)
                self.phase = "done"
                cloud.evaluate_alarms()
                live.update(render(cloud, namespace=namespace, service=service, phase=self.phase,
                                   sent=self.sent, elapsed=time.monotonic() - self.started, events=self.events))
            stop.set()
            patterns.check(cloud, self.patterns)
            outcome = report.gather(cloud, namespace=namespace, service=service,
                                    wall_s=time.monotonic() - self.started)
            log_file.close()
            report.show(self.console, outcome, self.workload)
            for line in self.patterns.lines() + self.coalescing.lines():
                self.console.print(line)
            problems = outcome.problems(self.workload) + self.patterns.problems() + self.coalescing.problems()
            for problem in problems:
                self.console.print(f"[bold red]unexpected:[/] {problem}")
            if not problems:
                self.console.print("[bold green]demo OK[/]: every invoice e-mailed once, duplicates skipped, "
                                   "outage failures retried, poison dead-lettered with reasons, DLQ paged; "
                                   "orders went through the outbox, the reindex ran in pages, the schedule ran "
                                   "once, a job two hours ahead waited in a schedule until fired early, a job "
                                   "was looked up by key and one cancelled before delivery (not run), "
                                   "the billing run's group reported once, 20 edits of a product reindexed it "
                                   "once, a second export was refused at the producer, and a redrive brought "
                                   "back the jobs whose orders committed late.")
            if self.keep:
                hold_open(self.console, cloud, operator_console)
            operator_console.stop()
        return 1 if problems else 0

    def _app(self) -> Any:
        from sqsjobs._loading import load_app

        return load_app("handlers.app:app")

    @staticmethod
    def _wait(ready: Any, stop: threading.Event, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if ready():
                return True
            stop.wait(0.5)
        return bool(ready())

    def _send(self, cloud: Any, app: Any, stop: threading.Event) -> None:
        w = self.workload
        ses = cloud.clients.get("ses")
        self.phase = "normal traffic + duplicates"
        for message in messages(app, w.invoices):
            self.sent += 1
            cloud.send_job(message)
        time.sleep(1.0)
        for message in messages(app, w.duplicates):
            self.sent += 1
            cloud.send_job(message)
        cloud.drain(timeout=30)
        self.phase = f"SES outage ({OUTAGE_S:.0f} s): jobs fail and retry with full jitter"
        self.event("warn", f"demo: SES outage begins (sender {SENDER} unverified for {OUTAGE_S:.0f} s)")
        ses.delete_identity(Identity=SENDER)
        for message in messages(app, w.outage_invoices):
            self.sent += 1
            cloud.send_job(message)
        stop.wait(OUTAGE_S)
        ses.verify_email_identity(EmailAddress=SENDER)
        self.event("info", "demo: SES outage over; retries will succeed")
        self.phase = "patterns: outbox orders, chunked reindex, leased schedule, a job group"
        self.patterns.duplicate_order_refused = patterns.place_orders(cloud, app)
        patterns.start_reindex(cloud, app)
        self.patterns.group_id = patterns.start_billing_run(cloud, app)
        patterns.enqueue_before_commit(cloud, app)
        self.patterns.schedule_runs = patterns.fire_schedule_twice(cloud)
        self.phase = "delayed job: two hours ahead, fired early"
        patterns.delay_and_fire_early(cloud, app, self.patterns, wait=lambda ready: self._wait(ready, stop, 30.0))
        self.phase = "job lifecycle: a status lookup by key, a cancel before delivery"
        patterns.look_up_and_cancel(cloud, app, self.patterns, wait=lambda ready: self._wait(ready, stop, 30.0))
        self.phase = "debounce and dedupe: 20 product edits -> 1 reindex, a second export refused"
        self.coalescing = coalescing.run(cloud.clients.get("sqs"), cloud.clients.get("dynamodb"),
                                         cloud.function_env("WorkerFunction")["SQSJOBS_TABLE"])
        self.phase = "poison messages"
        for message in messages(app, w.poison):
            self.sent += 1
            cloud.send_job(message)
        for body in w.malformed:
            self.sent += 1
            cloud.send(cloud.app_queue(), body)
        self.phase = "redrive: orders committed late, their dead-lettered jobs brought back"
        dead, moved = patterns.redrive_after_late_commit(cloud, wait=lambda ready: self._wait(ready, stop, 40.0))
        self.patterns.early_dead_lettered, self.patterns.redriven = dead, moved
        self.event("info", f"demo: redrive moved {moved} process-order letters back to the jobs queue")
        self.phase = "waiting for retries to finish"


def main() -> int:
    """Run the demo; the exit status says whether the outcome was as expected."""
    console = Console(highlight=False)
    if not console.is_terminal:
        # Piped (CI logs, `make demo | tee`): rich would assume 80 columns and wrap the tables.
        console = Console(highlight=False, width=120)
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    return Demo(console, keep="--keep" in sys.argv[1:]).run()


if __name__ == "__main__":
    sys.exit(main())
