"""Flow control on the deployed template (the reference app's flow-control jobs, the local cloud's pollers).

Robust on a loaded machine: every figure is read from what the jobs logged (when each call started and
ended), the limits are asserted as counts over those times (they hold whatever the load), correctness as
counts (all done, one attempt each, nothing dead-lettered), and wall time only gets generous ceilings: the
span of the rate's starts must show that it limited (at least 19 windows) and stay within 2.5 x the ideal.
The issue's 1.3 x is measured by ``make bench`` (BENCHMARKS.md, "Flow control"), with the load it ran
under: on a machine so busy that the emulated DynamoDB (one request at a time) answers in 100 ms, a limited
job's four requests, not the limiter, set the pace (docs/flow-control.md, "Measured").
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.e2e_support import E2E_PARAMETERS

from sqsjobs import _metrics as m
from sqsjobs.enqueue._producer import Producer
from sqsjobs.local.cloud import LocalCloud
from sqsjobs.local.output import Output
from sqsjobs.local.pytest_plugin import LocalCloudSession
from sqsjobs.local.timeline import busy_seconds, calls, metric_total, most_at_once, most_in_window
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.worker import _job_records as guard

ROOT = Path(__file__).resolve().parents[2]
_ids = itertools.count(1)
#: the issue's rate scenario: 200 jobs, 10 a second, two pollers
RATE_JOBS, RATE, POLLERS = 200, 10, 2
IDEAL_SECONDS = RATE_JOBS / RATE


def records(cloud: Any, keys: list[str]) -> list[guard.JobStatus | None]:
    store = DynamoDBStore(cloud.clients.get("dynamodb"), cloud.function_env("WorkerFunction")["SQSJOBS_TABLE"])
    return [guard.status(store, key) for key in keys]


def send_all(cloud: Any, messages: list[Any]) -> None:
    url = cloud.queue_url(cloud.app_queue(messages[0].queue))
    report = Producer(cloud.clients.get("sqs"), url).send_many(messages)
    assert report.ok, report.failed


# ---------------------------------------------------------------- on the session's cloud
def test_a_critical_job_runs_from_its_own_queue_with_its_tenant(local_cloud: LocalCloudSession) -> None:
    user = 9000 + next(_ids)
    message = local_cloud.app.message("password-reset", user_id=user, tenant="acme")
    assert local_cloud.app_queue(message.queue) == "CriticalQueue"
    local_cloud.send_job(message)
    local_cloud.drain()

    assert user in calls(local_cloud.logs, "reset")
    assert local_cloud.queue_depth("CriticalQueue") == 0
    assert [m.logical_id for m in local_cloud.deployment.sqs_mappings if m.queue_url.endswith("CriticalQueue")]
    # tenant_metrics=True: the job's metrics carry the tenant.
    assert metric_total(local_cloud, m.SUCCEEDED, Job="password-reset", Tenant="acme") >= 1


def test_two_pdf_renders_at_most_run_at_once_and_all_forty_finish(local_cloud: LocalCloudSession) -> None:
    ids = [20_000 + next(_ids) for _ in range(40)]
    deferred_before = metric_total(local_cloud, m.DEFERRED, Job="invoice-pdf", Limiter="pdf")
    send_all(local_cloud, [local_cloud.app.message("invoice-pdf", invoice_id=i) for i in ids])
    local_cloud.drain(timeout=300)

    renders = {i: run for i, run in calls(local_cloud.logs, "pdf").items() if i in ids}
    assert sorted(renders) == ids  # all 40 done
    assert most_at_once(list(renders.values())) <= 2
    statuses = records(local_cloud, [f"invoice-pdf:{i}" for i in ids])
    assert all(s is not None and s.state == "succeeded" and s.attempts == 1 for s in statuses)
    # The limiter did the work: with up to 10 invocations at once, the third and later were deferred.
    assert metric_total(local_cloud, m.DEFERRED, Job="invoice-pdf", Limiter="pdf") > deferred_before
    assert local_cloud.dead_letters() == [] or all("invoice-pdf" not in d["Body"] for d in local_cloud.dead_letters())


# ---------------------------------------------------------------- the rate scenario: its own cloud, two pollers
@pytest.fixture(scope="module")
def two_pollers() -> Iterator[LocalCloudSession]:
    parameters = {**E2E_PARAMETERS, "MaximumConcurrency": str(POLLERS), "MaxAttempts": "5",
                  "WorkerTimeoutSeconds": "30", "QueueVisibilityTimeoutSeconds": "70"}
    logs: list[tuple[str, str]] = []
    output = Output(event=lambda level, text: None, log=lambda function, line: logs.append((function, line)))
    with LocalCloud.start(ROOT / "template.yaml", parameters=parameters, stack_name="sqsjobs-rate",
                          output=output) as cloud:
        session = LocalCloudSession(cloud)
        session.logs = logs
        yield session


def test_two_hundred_jobs_at_ten_a_second_never_exceed_the_rate_and_use_one_attempt_each(
        two_pollers: LocalCloudSession) -> None:
    cloud = two_pollers
    assert [mapping.max_concurrency for mapping in cloud.deployment.sqs_mappings
            if mapping.queue_url.endswith("-JobsQueue")] == [POLLERS]
    ids = list(range(1, RATE_JOBS + 1))
    sent = time.time()
    send_all(cloud, [cloud.app.message("sms-reminder", appointment_id=i) for i in ids])
    cloud.drain(timeout=IDEAL_SECONDS * 6)  # a generous ceiling: the machine may be busy
    drained = time.time()

    sends = calls(cloud.logs, "sms")
    assert sorted(sends) == ids
    starts = sorted(started for started, _ in sends.values())
    span = starts[-1] - starts[0]
    # The limit, from the times the jobs themselves logged: +1 for clock edges.
    assert most_in_window(starts, 1.0) <= RATE + 1
    # It did limit: 200 starts at 10 a window need 20 windows (the last opens 19 s after the first).
    assert span >= IDEAL_SECONDS - 1.0 - 0.5
    # Throughput: a generous ceiling here (the machine may be busy); BENCHMARKS.md has the measured ratio.
    busy = busy_seconds(cloud, "WorkerFunction", sent, drained) / POLLERS
    assert span <= 2.5 * IDEAL_SECONDS, (span, busy)
    assert drained - sent < IDEAL_SECONDS * 6
    # None dead-lettered, no attempt consumed by waiting.
    statuses = records(cloud, [f"sms-reminder:{i}" for i in ids])
    assert all(s is not None and s.state == "succeeded" and s.attempts == 1 for s in statuses)
    assert cloud.dead_letters() == []
    assert metric_total(cloud, m.DEFERRED, Job="sms-reminder", Limiter="sms") > 0
    print(f"\nrate: {RATE_JOBS} jobs, starts span {span:.1f} s (ideal {IDEAL_SECONDS:.0f} s; pollers busy {busy:.1f} s "
          f"each), sent->drained {drained - sent:.1f} s, most starts in 1 s: {most_in_window(starts, 1.0)}, "
          f"deferrals {metric_total(cloud, m.DEFERRED, Job='sms-reminder', Limiter='sms')}")
