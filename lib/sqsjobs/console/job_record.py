"""Job lookup by key: the console asks the job's record what ``app.status(key)`` answers.

The page shows a :class:`sqsjobs.worker._job_records.JobStatus` — state, attempts, last
error, result and times — read with one consistent ``GetItem`` through the
same code the CLI's ``sqsjobs job KEY`` and ``app.status`` use, so the three
never disagree.

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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqsjobs.enqueue._envelope import MAX_KEY_BYTES

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from sqsjobs.worker._job_records import JobStatus

__all__ = ["MAX_KEY_BYTES", "JobStatusView", "job_status"]

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

    @classmethod
    def of(cls, status: JobStatus) -> JobStatusView:
        """The page's view of a job's status (its result indented for reading)."""
        result = None if status.result is None else json.dumps(status.result, indent=2, sort_keys=True)
        times = tuple((label, value) for name, label in _TIMES if (value := getattr(status, name)) is not None)
        return cls(key=status.key, job=status.job, state=status.state, attempts=status.attempts,
                   last_error=status.last_error, result=result, times=times)


def job_status(dynamodb: DynamoDBClient, table: str, key: str) -> JobStatusView | None:
    """The status of the job with idempotency key ``key``, or None when no delivery ever claimed it."""
    from sqsjobs.store._dynamodb import DynamoDBStore
    from sqsjobs.worker import _job_records as guard

    status = guard.status(DynamoDBStore(dynamodb, table), key)
    return None if status is None else JobStatusView.of(status)
