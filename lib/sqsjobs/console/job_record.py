"""Job lookup by key: the console asks the job's record what ``app.status(key)`` answers.

The page shows a :class:`sqsjobs.worker._job_records.JobStatus` — state, attempts, last
error, result and times — read with one consistent ``GetItem`` through the
same code the CLI's ``sqsjobs job KEY`` and ``app.status`` use, so the three
never disagree. A key with no record yet may be a delayed job waiting in its one-time
schedule (named after the key: ``sqsjobs.enqueue._delays.schedule_name``): :func:`scheduled_job`
finds it, and the page (and ``sqsjobs job KEY``) shows it as ``scheduled``, with its due time.

Example:
    >>> from sqsjobs.worker._job_records import JobStatus
    >>> status = JobStatus(key="invoice-email:42", job="invoice-email", state="succeeded", attempts=2,
    ...                    last_error=None, result={"sent": True}, enqueued_at=1.0, started_at=2.0,
    ...                    finished_at=3.0, updated_at=3.0)
    >>> view = JobStatusView.of(status)
    >>> view.state, view.result.split(), [label for label, _ in view.times]
    ('succeeded', ['{', '"sent":', 'true', '}'], ['enqueued', 'started', 'finished', 'updated'])
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final

from sqsjobs.enqueue._debounce import coalescing
from sqsjobs.enqueue._delays import schedule_name
from sqsjobs.enqueue._envelope import MAX_KEY_BYTES
from sqsjobs.worker import _job_records as guard

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from sqsjobs.enqueue._debounce import Coalescing
    from sqsjobs.worker._job_records import JobStatus

__all__ = ["MAX_KEY_BYTES", "SCHEDULED", "JobStatusView", "ScheduledJobView", "job_status", "scheduled_job"]

#: the state shown for a delayed job that waits in its one-time schedule (it has no record yet)
SCHEDULED: Final = "scheduled"

#: the status's times, in the order the page lists them
_TIMES: Final = (("enqueued_at", "enqueued"), ("started_at", "started"), ("finished_at", "finished"),
                 ("updated_at", "updated"))


@dataclass(frozen=True, kw_only=True)
class JobStatusView:
    """What the lookup page shows for one key."""

    key: str
    job: str | None
    state: str
    attempts: int
    last_error: str | None
    result: str | None
    times: tuple[tuple[str, float], ...]
    #: a debounced burst waiting, or a deduplicated request holding the key (``sqsjobs.enqueue._debounce``)
    coalescing: Coalescing | None = None

    @classmethod
    def of(cls, status: JobStatus) -> JobStatusView:
        """The page's view of a job's status (its result indented for reading)."""
        result = None if status.result is None else json.dumps(status.result, indent=2, sort_keys=True)
        times = tuple((label, value) for name, label in _TIMES if (value := getattr(status, name)) is not None)
        return cls(key=status.key, job=status.job, state=status.state, attempts=status.attempts,
                   last_error=status.last_error, result=result, times=times)


def job_status(dynamodb: DynamoDBClient, table: str, key: str, now: float | None = None) -> JobStatusView | None:
    """The status of the job with idempotency key ``key``, or None when no delivery ever claimed it.

    A debounced key's waiting burst (due time, requests coalesced) and a deduplicated
    key's holding request come with it, as ``sqsjobs job KEY`` shows them (``cli/lifecycle.py``).
    """
    from sqsjobs.store._dynamodb import DynamoDBStore

    item = DynamoDBStore(dynamodb, table).get(guard.checked_key(key))  # one read for the status and the burst
    if item is None:
        return None
    waiting = coalescing(item, now=time.time() if now is None else now)
    return replace(JobStatusView.of(guard.JobStatus.of(item)), coalescing=waiting)


@dataclass(frozen=True, kw_only=True)
class ScheduledJobView:
    """A delayed job waiting in its one-time schedule: when it is due, and where it waits.

    Example:
        >>> view = ScheduledJobView(key="digest:7", job="digest", due=1767232800.0, schedule="job-ab12",
        ...                         group="jobs-delayed")
        >>> view.state, view.due_text
        ('scheduled', '2026-01-01T02:00:00+00:00')
    """

    key: str
    job: str | None
    #: epoch seconds; None when the schedule's expression is not an ``at(...)``
    due: float | None
    schedule: str
    group: str
    arn: str = ""
    state: str = SCHEDULED

    @property
    def due_text(self) -> str:
        """The due time in ISO 8601, UTC ("?" when unknown)."""
        return "?" if self.due is None else datetime.fromtimestamp(self.due, UTC).isoformat()

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready dict (``sqsjobs job KEY --json``)."""
        return {"key": self.key, "job": self.job, "state": self.state, "due_at": self.due_text,
                "schedule": self.schedule, "schedule_group": self.group, "schedule_arn": self.arn}


def scheduled_job(scheduler: EventBridgeSchedulerClient, group: str, key: str) -> ScheduledJobView | None:
    """The delayed enqueue of ``key`` pending in schedule group ``group``, or None."""
    from sqsjobs.schedules._one_time import OneTimeSchedules

    pending = OneTimeSchedules(group=group, clock=time.time, client=scheduler).get(schedule_name(key))
    if pending is None:
        return None
    return ScheduledJobView(key=key, job=pending.job, due=None if pending.due is None else pending.due.timestamp(),
                            schedule=pending.name, group=group, arn=pending.arn)
