"""Delayed jobs on the local cloud: a job two hours ahead waits in a one-time schedule, fired early or on time."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

from sqsjobs import JobApp
from sqsjobs.enqueue._delays import schedule_name
from sqsjobs.local.cloud import cloud_actions
from sqsjobs.local.pytest_plugin import LocalCloudSession
from sqsjobs.schedules._one_time import DelayedMessage, ScheduledJob

_ids = itertools.count(5000)


@contextmanager
def producer(cloud: LocalCloudSession) -> Iterator[JobApp]:
    """The reference app configured as the template configures its functions (queue, DLQ, group, role)."""
    with cloud.producing(cloud.app) as app:
        yield app


def sent(cloud: LocalCloudSession, invoice: int) -> int:
    return [m["subject"] for m in cloud.emails()].count(f"Invoice {invoice}")


def pending_names(cloud: LocalCloudSession) -> list[str]:
    assert cloud.one_time is not None
    return [name for _, name, _ in cloud.one_time.pending()]


def test_a_job_two_hours_ahead_waits_in_a_schedule_and_runs_once_when_fired_early(
        local_cloud: LocalCloudSession) -> None:
    invoice = next(_ids)
    key = f"invoice-email:{invoice}"
    with producer(local_cloud) as app:
        result = app.enqueue("invoice-email", invoice_id=invoice, delay=timedelta(hours=2))
        again = app.enqueue("invoice-email", invoice_id=invoice, delay=timedelta(hours=2))
    assert isinstance(result, ScheduledJob) and again.already_scheduled
    local_cloud.drain()
    assert sent(local_cloud, invoice) == 0 and schedule_name(key) in pending_names(local_cloud)

    # What `sqsjobs local fire KEY` asks the running cloud to do.
    fire = cloud_actions(local_cloud.cloud)["fire"]
    answer = fire({"name": key})
    local_cloud.drain()

    assert answer["ok"] is True and [d["schedule"] for d in answer["delayed"]] == [schedule_name(key)]
    assert sent(local_cloud, invoice) == 1
    assert schedule_name(key) not in pending_names(local_cloud)
    gone = fire({"name": key})
    assert gone["error"].endswith(f"and no delayed job with key {key!r} is pending")


def test_a_one_time_schedule_fires_by_itself_at_its_time(local_cloud: LocalCloudSession) -> None:
    invoice = next(_ids)
    key = f"invoice-email:{invoice}"
    with producer(local_cloud) as app:
        message = app.message("invoice-email", invoice_id=invoice)
        # Due in two seconds: through the app's own schedules (an enqueue would use SQS for so short a wait).
        app.runtime.one_time_schedules.create(DelayedMessage(
            name=schedule_name(key), job="invoice-email", key=key, body=message.body, due_at=time.time() + 2,
            queue_arn=app.runtime.one_time_schedules.queue_arn(app.settings.require("queue_url"))))

    assert wait_until(lambda: sent(local_cloud, invoice) == 1, local_cloud), "the schedule never fired"
    assert schedule_name(key) not in pending_names(local_cloud)
    assert any(f"{schedule_name(key)} fired" in text for _, text in local_cloud.events)


def wait_until(ready: Any, cloud: LocalCloudSession, seconds: float = 90.0) -> bool:
    """Poll for an outcome (the emulator looks once a second; the machine may be slow): no timing is asserted."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        cloud.check()
        if ready():
            return True
        time.sleep(0.5)
    return bool(ready())
