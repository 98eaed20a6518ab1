"""Scheduled jobs behind a DynamoDB lease: racing schedulers (threads and processes) against moto's server,
crashed holders, fencing, enqueue mode and the Lambda event."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsjobs import JobApp, Outcome, PeriodBusyError
from sqsjobs.schedules._period_locks import PeriodLocks
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._lease import LeaseState
from sqsjobs.testing import FakeContext, receive_event

ROOT = Path(__file__).resolve().parents[2]
TICK = datetime(2026, 8, 5, 2, 0, tzinfo=UTC)
#: the period's lock is the job's own record (schedules/_period_locks.py)
LOCK = "nightly-report:2026-08-05"


class RecordingLogger:
    """Stands in for the Powertools logger: keeps (level, message, extra)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def _log(self, level: str, message: str, extra: dict[str, Any] | None = None) -> None:
        self.lines.append((level, message, extra or {}))

    def info(self, message: str, extra: dict[str, Any] | None = None) -> None:
        self._log("info", message, extra)

    def warning(self, message: str, extra: dict[str, Any] | None = None) -> None:
        self._log("warning", message, extra)


def locks(client: Any, table: str) -> PeriodLocks:
    return PeriodLocks(DynamoDBStore(client, table))


def scheduler_app(endpoint: str, table: str, ran: list[str], **options: Any) -> JobApp:
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
    app = JobApp(**{"table_name": table, "queue_url": f"{endpoint}/123456789012/jobs", "dynamodb_client": dynamodb,
                    "logger": RecordingLogger(), "emit_metrics": lambda line: None, **options})

    @app.scheduled("nightly-report", schedule="cron(0 2 * * ? *)", lease_seconds=600)
    def nightly_report(period: str) -> None:
        ran.append(period)

    return app


def test_racing_threads_fire_the_period_exactly_once(endpoint: str, table: str) -> None:
    ran: list[str] = []
    apps = [scheduler_app(endpoint, table, ran) for _ in range(8)]
    start = threading.Barrier(len(apps))
    results: list[Any] = [None] * len(apps)

    def tick(i: int) -> None:
        start.wait()
        results[i] = apps[i].runtime.scheduler.fire("nightly-report", at=TICK)

    threads = [threading.Thread(target=tick, args=(i,)) for i in range(len(apps))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    fired = [r for r in results if r.fired]
    assert len(fired) == 1 and ran == ["2026-08-05"]
    skipped = [r for r in results if not r.fired]
    assert len(skipped) == 7
    winner = fired[0].owner
    assert all(r.reason == f"already done by {winner}" or r.reason.startswith(f"held by {winner} until ")
               for r in skipped)
    # Each loser said so in its log.
    for app, result in zip(apps, results, strict=True):
        if not result.fired:
            (line,) = app.runtime.logger.lines
            assert line[1] == "scheduled job not fired: its period is taken"
            assert line[2]["period"] == "2026-08-05" and line[2]["reason"] == result.reason
    state = locks(apps[0].runtime.dynamodb, table).get(LOCK)
    assert state is not None and state.state is LeaseState.DONE and state.owner == winner


CHILD = r"""
import json, logging, sys
from datetime import UTC, datetime
import boto3
from sqsjobs import JobApp

endpoint, table, mode = sys.argv[1], sys.argv[2], sys.argv[3]
dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1")
app = JobApp(table_name=table, queue_url="unused", dynamodb_client=dynamodb, logger=logging.getLogger("child"))
ran = []

@app.scheduled("nightly-report", schedule="cron(0 2 * * ? *)", lease_seconds=600)
def nightly_report(period: str) -> None:
    ran.append(period)
    if mode == "hang":  # hold the lease until killed
        print(json.dumps({"holding": True}), flush=True)
        sys.stdin.readline()

dynamodb.describe_table(TableName=table)  # connect before the start line, so all start together
print(json.dumps({"ready": True}), flush=True)
sys.stdin.readline()
result = app.runtime.scheduler.fire("nightly-report", at=datetime(2026, 8, 5, 2, tzinfo=UTC))
print(json.dumps({"fired": result.fired, "reason": result.reason, "owner": result.owner, "ran": ran}), flush=True)
"""


def spawn(endpoint: str, table: str, mode: str = "race") -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, endpoint, table, mode], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)


def test_racing_processes_fire_the_period_exactly_once(endpoint: str, table: str) -> None:
    children = [spawn(endpoint, table) for _ in range(4)]
    try:
        for child in children:
            assert child.stdout is not None
            assert json.loads(child.stdout.readline()) == {"ready": True}
        for child in children:  # every process is connected and waiting: release them together
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        results = []
        for child in children:
            assert child.stdout is not None
            results.append(json.loads(child.stdout.readline()))
            assert child.wait(timeout=60) == 0
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    fired = [r for r in results if r["fired"]]
    assert len(fired) == 1 and fired[0]["ran"] == ["2026-08-05"]
    assert all(r["ran"] == [] and fired[0]["owner"] in r["reason"] for r in results if not r["fired"])


def test_a_killed_holder_blocks_its_period_until_the_lease_ends_then_the_next_tick_recovers(
        endpoint: str, table: str, clock: Any) -> None:
    holder = spawn(endpoint, table, mode="hang")
    try:
        assert holder.stdout is not None and holder.stdin is not None
        assert json.loads(holder.stdout.readline()) == {"ready": True}
        holder.stdin.write("go\n")
        holder.stdin.flush()
        assert json.loads(holder.stdout.readline()) == {"holding": True}
    finally:
        holder.kill()  # SIGKILL while holding the lease: no release, no completion
        holder.wait(timeout=60)

    ran: list[str] = []
    lease = locks(boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1"), table).get(LOCK)
    assert lease is not None and lease.state is LeaseState.HELD and lease.lease_until is not None
    clock.now = lease.lease_until - 100
    app = scheduler_app(endpoint, table, ran, clock=clock, sleep=clock.advance)
    # Lambda's retry of the killed tick: the dead holder's lease outlasts this invocation, so the tick fails
    # (and Lambda retries it again later) instead of answering "fired: False" and losing the day.
    with pytest.raises(PeriodBusyError, match=f"held by {lease.owner} until {lease.lease_until}"):
        app.runtime.scheduler.fire("nightly-report", at=TICK, context=FakeContext(remaining_ms=60_000, clock=clock))
    assert ran == []

    # A later retry whose invocation outlasts the dead lease waits it out and takes the period over.
    late = app.runtime.scheduler.fire("nightly-report", at=TICK, context=FakeContext(remaining_ms=240_000, clock=clock))
    assert late.fired and ran == ["2026-08-05"]
    assert clock.now >= lease.lease_until


def test_a_failed_run_gives_the_period_back_to_the_next_tick(endpoint: str, table: str) -> None:
    ran: list[str] = []
    app = scheduler_app(endpoint, table, ran)
    attempts = {"n": 0}

    @app.scheduled("flaky-report", schedule="cron(30 2 * * ? *)")
    def flaky_report(period: str) -> None:
        attempts["n"] += 1
        if attempts["n"] == 1:
            raise ConnectionError("warehouse down")

    at = datetime(2026, 8, 5, 2, 30, tzinfo=UTC)
    with pytest.raises(ConnectionError):
        app.runtime.scheduler.fire("flaky-report", at=at)  # the invocation fails; Lambda retries it
    assert app.runtime.scheduler.fire("flaky-report", at=at).fired  # the retry takes the released lease at once
    assert not app.runtime.scheduler.fire("flaky-report", at=at).fired
    assert attempts["n"] == 2


def test_a_holder_whose_lease_ran_out_cannot_complete_over_the_new_holder(
        endpoint: str, table: str, clock: Any) -> None:
    ran: list[str] = []
    slow = scheduler_app(endpoint, table, ran, clock=clock)
    other = scheduler_app(endpoint, table, ran, clock=clock)
    inner: list[Any] = []

    @slow.scheduled("slow-report", schedule="cron(0 3 * * ? *)", lease_seconds=60)
    def slow_report(period: str) -> None:
        clock.advance(61)  # runs past its lease; a second scheduler takes the period over meanwhile
        inner.append(other.runtime.scheduler.fire("slow-report", at=datetime(2026, 8, 5, 3, tzinfo=UTC)))

    @other.scheduled("slow-report", schedule="cron(0 3 * * ? *)", lease_seconds=60)
    def slow_report_elsewhere(period: str) -> None:
        ran.append("elsewhere")

    first = slow.runtime.scheduler.fire("slow-report", at=datetime(2026, 8, 5, 3, tzinfo=UTC))
    assert inner[0].fired and ran == ["elsewhere"]
    assert first.fired and first.reason == "lease lost"
    assert slow.logger.lines[-1][1].startswith("lease ran out while the job ran")
    state = locks(slow.runtime.dynamodb, table).get("slow-report:2026-08-05")
    assert state is not None and state.owner == inner[0].owner and state.state is LeaseState.DONE


def test_lambda_events_name_the_period_by_scheduled_time_and_each_day_fires_once(endpoint: str, table: str) -> None:
    ran: list[str] = []
    app = scheduler_app(endpoint, table, ran)
    event = {"job": "nightly-report", "scheduled_time": "2026-08-05T02:00:00Z"}
    assert app.fire_schedule(event)["fired"] is True
    # EventBridge Scheduler retrying the same tick minutes later still names 2026-08-05.
    retry = app.fire_schedule(event)
    assert retry["fired"] is False and retry["period"] == "2026-08-05" and retry["reason"].startswith("already done")
    assert app.fire_schedule({"job": "nightly-report", "scheduled_time": "2026-08-06T02:00:00Z"})["fired"]
    assert ran == ["2026-08-05", "2026-08-06"]


def test_enqueue_mode_hands_the_period_to_the_worker(make_app: Any, aws: Any) -> None:
    app = make_app()
    ran: list[str] = []

    @app.scheduled("nightly-export", schedule="cron(0 4 * * ? *)", enqueue=True)
    def nightly_export(period: str) -> None:
        ran.append(period)

    at = datetime(2026, 8, 5, 4, tzinfo=UTC)
    first = app.runtime.scheduler.fire("nightly-export", at=at)
    assert first.fired and first.enqueued and ran == []
    # A second tick of the period sends it again: the worker claims the period's key, so it runs once.
    assert app.runtime.scheduler.fire("nightly-export", at=at).enqueued
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert [d.key for d in result.deliveries] == ["nightly-export:2026-08-05"] * 2
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED, Outcome.DUPLICATE]
    assert ran == ["2026-08-05"]

