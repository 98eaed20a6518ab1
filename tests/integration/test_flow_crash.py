"""A concurrency slot never leaks: a worker process SIGKILLed while it holds the only slot (against moto's server,
whose DynamoDB is atomic) blocks the limiter only until its invocation's lease ends; then the slot is taken over."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest

from sqsjobs import JobApp, Outcome
from sqsjobs.store._lease import LeaseState
from sqsjobs.testing import FakeContext, sqs_event

ROOT = Path(__file__).resolve().parents[2]
SLOT = "limit#pdf#slot#0"
REMAINING_MS = 30_000

CHILD = r"""
import json, sys
import boto3
from sqsjobs import JobApp
from sqsjobs.testing import FakeContext, sqs_event

endpoint, table = sys.argv[1], sys.argv[2]
client = lambda service: boto3.client(service, endpoint_url=endpoint, region_name="us-east-1")
app = JobApp(table_name=table, queue_url=endpoint + "/123456789012/jobs", dynamodb_client=client("dynamodb"),
             sqs_client=client("sqs"), emit_metrics=lambda line: None)
app.concurrency_limit("pdf", 1)

@app.job("render", key="render:{n}", limits=["pdf"])
def render(n: int) -> None:
    print(json.dumps({"holding": True}), flush=True)
    sys.stdin.readline()  # holds the slot until it is killed

event = sqs_event([json.loads(render.message(n=1).body)], message_id="m-1")
app.process_batch(event, FakeContext(remaining_ms=int(sys.argv[3])))
print(json.dumps({"finished": True}), flush=True)
"""


def worker_app(endpoint: str, table: str, clock: Any, ran: list[int]) -> JobApp:
    client = lambda service: boto3.client(service, endpoint_url=endpoint, region_name="us-east-1")  # noqa: E731
    app = JobApp(table_name=table, queue_url=f"{endpoint}/123456789012/jobs", dynamodb_client=client("dynamodb"),
                 sqs_client=client("sqs"), clock=clock, emit_metrics=lambda line: None)
    app.concurrency_limit("pdf", 1)

    @app.job("render", key="render:{n}", limits=["pdf"])
    def render(n: int) -> None:
        ran.append(n)

    return app


def test_a_killed_invocation_holds_its_slot_only_until_its_lease_ends(endpoint: str, table: str, clock: Any) -> None:
    child = subprocess.Popen([sys.executable, "-c", CHILD, endpoint, table, str(REMAINING_MS)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout is not None
        lines = iter(child.stdout.readline, "")
        assert any(line.strip() == '{"holding": true}' for line in lines)  # (log lines may come first)
    finally:
        child.kill()  # SIGKILL while the job runs: no release of the slot, no completion of the record
        child.wait(timeout=60)
    assert child.returncode == -9

    ran: list[int] = []
    app = worker_app(endpoint, table, clock, ran)
    slot = app.runtime.store.get(SLOT)
    assert slot is not None and slot.state is LeaseState.HELD and slot.lease_until is not None
    dead_owner = slot.owner
    # The slot's lease is the dead invocation's: its remaining time plus the lease margin.
    record = app.runtime.store.get("render:1")
    assert record is not None and record.owner == dead_owner
    assert slot.lease_until == pytest.approx(record.lease_until, abs=5.0)

    # Before that lease ends, the limiter is full: other invocations defer their renders (no attempt used).
    clock.now = slot.lease_until - 1
    waiting = app.process_batch(sqs_event([json.loads(app.jobs["render"].message(n=2).body)]),
                                FakeContext(remaining_ms=REMAINING_MS, clock=clock))
    assert (waiting.deliveries[0].outcome, waiting.deliveries[0].deferred_by) == (Outcome.DEFERRED, "pdf")
    assert ran == [] and app.status("render:2") is None

    # Once it ended, the next invocation takes the slot over, and the crashed job's redelivery runs again.
    clock.now = slot.lease_until + 1
    after = app.process_batch(sqs_event([json.loads(app.jobs["render"].message(n=1).body),
                                         json.loads(app.jobs["render"].message(n=2).body)], message_id=None),
                              FakeContext(remaining_ms=REMAINING_MS, clock=clock))
    assert [d.outcome for d in after.deliveries] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    assert ran == [1, 2] and after.deliveries[0].took_over
    assert app.status("render:1").attempts == 2 and app.status("render:2").attempts == 1
    freed = app.runtime.store.get(SLOT)
    assert freed is not None and freed.state is LeaseState.RELEASED and freed.owner != dead_owner
