"""What ``sqsjobs status`` reports: frozen values, and the DLQ's letters grouped and listed.

:func:`sqsjobs.ops._status.collect_status` fills a :class:`StatusReport`;
``sqsjobs.cli.status`` and the console render it. Nothing here calls AWS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from sqsjobs.ops._dlq_letters import DlqMessage

if TYPE_CHECKING:
    from sqsjobs.ops._cost import CostReport
    from sqsjobs.ops._metrics_reader import SkippedJob
    from sqsjobs.schedules._one_time import PendingSummary
    from sqsjobs.workflows._chunked import RunStatus

__all__ = ["DEFAULT_RECENT", "DEFAULT_SAMPLE", "DEFAULT_SKIPPED_HOURS", "AgeSource", "AlarmState", "DeadLetterGroup",
           "QueueStatus", "RecentFailure", "StatusReport", "group_dead_letters", "recent_failures"]

DEFAULT_SAMPLE: Final = 100
DEFAULT_RECENT: Final = 10
#: the window of the cancelled and expired counts per job
DEFAULT_SKIPPED_HOURS: Final = 24
ERROR_MESSAGE_CHARS: Final = 200

AgeSource = Literal["cloudwatch", "peek", "empty", "unknown"]


@dataclass(frozen=True, kw_only=True)
class QueueStatus:
    """Depth of one queue and the age of its oldest message.

    Example:
        >>> QueueStatus(name="jobs", url="u", visible=3, in_flight=1, delayed=0,
        ...             oldest_age_seconds=None, oldest_age_source="unknown").depth
        4
    """

    name: str
    url: str
    visible: int
    in_flight: int
    delayed: int
    oldest_age_seconds: float | None
    oldest_age_source: AgeSource

    @property
    def depth(self) -> int:
        """Visible + in flight + delayed."""
        return self.visible + self.in_flight + self.delayed


@dataclass(frozen=True, kw_only=True)
class DeadLetterGroup:
    """Dead letters of one job with one reason and error type (from the peeked sample).

    Example:
        >>> DeadLetterGroup(job="a", reason="exhausted", error_type="TimeoutError", count=2,
        ...                 oldest_age_seconds=60.0).count
        2
    """

    job: str
    reason: str
    error_type: str
    count: int
    oldest_age_seconds: float | None
    #: False when the reason is the letters' own claim (no idempotency table was read)
    verified: bool = True


@dataclass(frozen=True, kw_only=True)
class RecentFailure:
    """One recent dead letter: which job, why, when.

    Example:
        >>> RecentFailure(message_id="m", job="a", reason="permanent", error_type="KeyError",
        ...               error_message="'x'", attempts=1, redrive_count=0, age_seconds=5.0).job
        'a'
    """

    #: the id the worker logged (the original message id its evidence names; the DLQ's own id for a letter
    #: SQS's redrive moved, which keeps the id): the same id in logs, status, redrive and the console
    message_id: str
    job: str
    reason: str
    error_type: str
    error_message: str
    attempts: int | None
    #: None when the letter's count is unreadable (poison-suspect)
    redrive_count: int | None
    age_seconds: float | None
    #: False when reason, error and counts are the letter's own claims (no idempotency table was read)
    verified: bool = True


@dataclass(frozen=True, kw_only=True)
class AlarmState:
    """One CloudWatch alarm and its state (``OK``, ``ALARM``, ``INSUFFICIENT_DATA``).

    Example:
        >>> AlarmState(name="jobs-dlq-not-empty", state="ALARM", reason="1 > 0", metric="x",
        ...            updated_at=None).firing
        True
    """

    name: str
    state: str
    reason: str
    metric: str
    updated_at: float | None

    @property
    def firing(self) -> bool:
        """True in state ``ALARM``."""
        return self.state == "ALARM"


@dataclass(frozen=True, kw_only=True)
class StatusReport:
    """Everything ``sqsjobs status`` shows.

    ``dlq_sampled`` is how many DLQ messages the groups and recent failures
    were computed from; when it is below the DLQ's depth they are a sample.
    Copies of one dead letter (the same original message id, as their
    evidence says) count once: ``dlq_duplicates`` says how many extra copies
    the sample held. ``dlq_verified`` is False when no idempotency table was
    read: reasons and counts are then the letters' own claims.
    ``dlq_malformed_attributes`` counts sampled letters with an unreadable
    ``sqsjobs.*`` attribute (one note each).

    Example:
        >>> StatusReport(queue=None, dlq=None, dlq_groups=(), dlq_sampled=0, alarms=(),
        ...              recent_failures=(), notes=()).to_dict()["dlq_sampled"]
        0
    """

    queue: QueueStatus | None
    dlq: QueueStatus | None
    dlq_groups: tuple[DeadLetterGroup, ...]
    dlq_sampled: int
    alarms: tuple[AlarmState, ...]
    recent_failures: tuple[RecentFailure, ...]
    notes: tuple[str, ...]
    #: chunked runs asked for with ``--run JOB:RUN_ID`` (docs/patterns.md)
    runs: tuple[RunStatus, ...] = ()
    dlq_duplicates: int = 0
    dlq_malformed_attributes: int = 0
    dlq_verified: bool = True
    #: delayed jobs waiting in the schedule group (``--schedule-group`` / ``SQSJOBS_SCHEDULE_GROUP``)
    delayed: PendingSummary | None = None
    #: every jobs queue: ``queue`` first, then the app's named queues and the DLQ's other source queues
    queues: tuple[QueueStatus, ...] = ()
    #: per job, deliveries acknowledged without running in the last ``skipped_hours``: cancelled, expired
    skipped: tuple[SkippedJob, ...] = ()
    skipped_hours: int = DEFAULT_SKIPPED_HOURS
    #: what each job cost over the last days, from the worker's metrics (``ops/_cost.py``)
    costs: CostReport | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``sqsjobs status --json``)."""
        data = asdict(self)
        data["costs"] = None if self.costs is None else self.costs.to_dict()
        for key in ("queue", "dlq"):
            value = getattr(self, key)
            if value is not None:
                data[key]["depth"] = value.depth
        for entry, value in zip(data["queues"], self.queues, strict=True):
            entry["depth"] = value.depth
        data["alarms_firing"] = [a.name for a in self.alarms if a.firing]
        data["delayed"] = None if self.delayed is None else self.delayed.to_dict()
        return data


def group_dead_letters(letters: Iterable[DlqMessage]) -> tuple[DeadLetterGroup, ...]:
    """Dead letters grouped by job, reason and error type, largest group first.

    Example:
        >>> msg = {"MessageId": "m", "Body": '{"job": "a"}', "MessageAttributes": {
        ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "exhausted"}}}
        >>> [(g.job, g.reason, g.count) for g in group_dead_letters([DlqMessage.from_message(msg, now=0.0)] * 2)]
        [('a', 'exhausted', 2)]
    """
    return _grouped(list(letters))


def _grouped(letters: list[DlqMessage]) -> tuple[DeadLetterGroup, ...]:
    groups: dict[tuple[str, str, str, bool], list[DlqMessage]] = defaultdict(list)
    for letter in letters:
        groups[letter.job, letter.reason, letter.error_type, letter.verified].append(letter)
    out = []
    for (job, reason, error_type, verified), members in groups.items():
        ages = [m.age_seconds for m in members if m.age_seconds is not None]
        out.append(
            DeadLetterGroup(
                job=job,
                reason=reason,
                error_type=error_type,
                count=len(members),
                oldest_age_seconds=max(ages) if ages else None,
                verified=verified,
            )
        )
    return tuple(sorted(out, key=lambda g: (-g.count, g.job, g.reason, g.error_type)))


def recent_failures(letters: list[DlqMessage], limit: int) -> tuple[RecentFailure, ...]:
    """The ``limit`` newest letters, as the report lists them (error messages cut to ``ERROR_MESSAGE_CHARS``)."""
    newest = sorted(letters, key=lambda m: -(m.sent_at or 0.0))[:limit]
    return tuple(
        RecentFailure(
            message_id=m.original_message_id,
            job=m.job,
            reason=m.reason,
            error_type=m.error_type,
            error_message=m.error_message[:ERROR_MESSAGE_CHARS],
            attempts=m.attempts,
            redrive_count=m.redrive_count,
            age_seconds=m.age_seconds,
            verified=m.verified,
        )
        for m in newest
    )
