"""Flow control on the deployed template (the reference app's flow-control jobs, the local cloud's pollers).

Robust on a loaded machine: nothing here bounds wall time. Every figure is a count: the limits over the times
the jobs themselves logged (they hold whatever the load), correctness (all done, one attempt each, nothing
dead-lettered), and what the limiter cost each job (its deferrals and receives, from the workers' outcome
lines). The span of the starts against the ideal is a throughput figure: ``make bench`` measures it
(BENCHMARKS.md, "Flow control"), with the load it ran under. ``drain``'s timeout is a ceiling that only keeps a
broken run from hanging.
"""

from __future__ import annotations

import itertools
from collections import Counter
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
from sqsjobs.local.timeline import calls, metric_total, most_at_once, most_in_window
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
    # DEBUG: the worker logs every job's outcome, which outcomes() reads (each job's deferrals).
    with LocalCloud.start(ROOT / "template.yaml", parameters=parameters, stack_name="sqsjobs-rate",
                          output=output, log_level="DEBUG") as cloud:
        session = LocalCloudSession(cloud)
        session.logs = logs
        yield session


def test_two_hundred_jobs_at_ten_a_second_never_exceed_the_rate_and_use_one_attempt_each(
        two_pollers: LocalCloudSession) -> None:
    cloud = two_pollers
    assert [mapping.max_concurrency for mapping in cloud.deployment.sqs_mappings
            if mapping.queue_url.endswith("-JobsQueue")] == [POLLERS]
    ids = list(range(1, RATE_JOBS + 1))
    send_all(cloud, [cloud.app.message("sms-reminder", appointment_id=i) for i in ids])
    cloud.drain(timeout=600)  # a ceiling against a hang, not a figure

    sends = calls(cloud.logs, "sms")
    assert sorted(sends) == ids
    starts = sorted(started for started, _ in sends.values())
    # The limit, from the times the jobs themselves logged: +1 for clock edges (a log line follows its start).
    assert most_in_window(starts, 1.0) <= RATE + 1
    # It did limit: 200 starts at 10 a window never fit in fewer than 20 windows.
    assert most_in_window(starts, (RATE_JOBS - 1) / RATE - 1.0) < RATE_JOBS
    # Each job was deferred once at most (to its slot), so received twice at most; none dead-lettered, no
    # attempt consumed by waiting.
    outcomes = [o for o in cloud.outcomes() if str(o.get("key", "")).startswith("sms-reminder:")]
    deferrals = Counter(o["key"] for o in outcomes if o["outcome"] == "deferred")
    receives = Counter(o["key"] for o in outcomes)
    assert max(deferrals.values(), default=0) <= 1, deferrals.most_common(3)
    assert sorted(receives) == sorted(f"sms-reminder:{i}" for i in ids) and max(receives.values()) <= 2
    statuses = records(cloud, [f"sms-reminder:{i}" for i in ids])
    assert all(s is not None and s.state == "succeeded" and s.attempts == 1 for s in statuses)
    assert cloud.dead_letters() == []
    assert metric_total(cloud, m.DEFERRED, Job="sms-reminder", Limiter="sms") == sum(deferrals.values())
    print(f"\nrate: {RATE_JOBS} jobs, starts span {starts[-1] - starts[0]:.1f} s (ideal {IDEAL_SECONDS:.0f} s), "
          f"most starts in 1 s: {most_in_window(starts, 1.0)}, deferrals {sum(deferrals.values())}")
