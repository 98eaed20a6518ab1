"""What an enqueue returns for a job that waits in a one-time schedule: ``ScheduledJob``, a ``str`` that says when.

Kept apart from ``sqsjobs.schedules._one_time`` (the Scheduler calls) so that
``import sqsjobs`` stays cheap: only the receipt is public API.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum


class ScheduleOutcome(StrEnum):
    """What an enqueue did with a delayed job's schedule."""

    SCHEDULED = "scheduled"  #: a schedule was created
    ALREADY_SCHEDULED = "already_scheduled"  #: the key's schedule was pending: nothing changed
    MOVED = "moved"  #: ``replace=True``: the key's pending schedule now fires at the new time


class ScheduledJob(str):
    """What ``enqueue`` returns for a job that waits in a schedule: the schedule's ARN, and when it is due.

    A ``str`` (the ARN), so code that keeps the SQS message id of an enqueue
    keeps working; ``isinstance(result, ScheduledJob)`` tells the two apart.

    Example:
        >>> from datetime import UTC
        >>> job = ScheduledJob("arn:aws:scheduler:eu-west-1:1:schedule/g/job-1", key="reminder:7", job="reminder",
        ...                    name="job-1", due=datetime(2026, 1, 1, 2, tzinfo=UTC),
        ...                    outcome=ScheduleOutcome.ALREADY_SCHEDULED)
        >>> job.already_scheduled, str(job).endswith("job-1")
        (True, True)
        >>> job.describe()
        'reminder:7 already scheduled for 2026-01-01T02:00:00Z'
    """

    key: str
    job: str
    name: str
    due: datetime
    outcome: ScheduleOutcome

    def __new__(cls, arn: str, *, key: str, job: str, name: str, due: datetime,
                outcome: ScheduleOutcome) -> ScheduledJob:
        scheduled = super().__new__(cls, arn)
        scheduled.key, scheduled.job, scheduled.name, scheduled.due = key, job, name, due
        scheduled.outcome = outcome
        return scheduled

    @property
    def arn(self) -> str:
        """The schedule's ARN (the string itself)."""
        return str(self)

    @property
    def already_scheduled(self) -> bool:
        """True when the key was pending already and nothing changed."""
        return self.outcome is ScheduleOutcome.ALREADY_SCHEDULED

    def describe(self) -> str:
        """One line for people: ``"<key> scheduled for <UTC time>"``."""
        return f"{self.key} {self.outcome.value.replace('_', ' ')} for {self.due.strftime('%Y-%m-%dT%H:%M:%SZ')}"

    def __repr__(self) -> str:
        return f"ScheduledJob({str(self)!r}, {self.describe()!r})"
