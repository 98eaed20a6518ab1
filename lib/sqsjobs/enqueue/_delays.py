"""When a job is due: ``delay=`` and ``eta=`` turned into SQS's DelaySeconds or a one-time schedule's time.

SQS holds a message back for at most 900 s (``DelaySeconds``) and hides a
message being retried for at most 12 hours (its visibility timeout). Anything
longer waits in EventBridge Scheduler: a one-time schedule, named after the
job's key, that sends the message to the jobs queue at its time and deletes
itself (``sqsjobs.schedules._one_time``). This module only does the arithmetic
and the naming; it never calls AWS.

Example:
    >>> from datetime import timedelta
    >>> plan_delay("reminder", delay=timedelta(minutes=5), eta=None, now=1_767_225_600.0)
    DelayPlan(delay_seconds=300, due_at=None)
    >>> plan_delay("reminder", delay=7200, eta=None, now=1_767_225_600.0)
    DelayPlan(delay_seconds=0, due_at=1767232800.0)
    >>> at_expression(1767232800.0)
    'at(2026-01-01T02:00:00)'
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqsjobs._errors import ConfigurationError, InvalidDelayError
from sqsjobs.enqueue._message import MAX_DELAY_SECONDS as SQS_MAX_DELAY_SECONDS

#: the longest delay (and the furthest eta) a job may be enqueued with: 365 days
MAX_DELAY_SECONDS = 365 * 24 * 3600
#: prefix of a delayed enqueue's schedule name (one per key)
ENQUEUE_PREFIX = "job-"
#: prefix of a long retry's schedule name (one per delivery that asked for it)
RETRY_PREFIX = "retry-"
_KEY_HASH_CHARS = 40
_MESSAGE_HASH_CHARS = 16


@dataclass(frozen=True)
class DelayPlan:
    """How a message waits: ``delay_seconds`` on SQS (0..900), or until ``due_at`` (epoch seconds) in a schedule."""

    delay_seconds: int
    due_at: float | None


def plan_delay(job: str, *, delay: Any, eta: Any, now: float) -> DelayPlan:
    """Check ``delay`` (seconds or ``timedelta``) or ``eta`` (an aware ``datetime``) and say how the message waits.

    A wait of at most 900 s is SQS's ``DelaySeconds`` (a delay is floored to
    whole seconds, an eta rounded up so it is never early); a longer one is a
    schedule at ``due_at``. An eta in the past means now (as Celery does).
    Raises ``InvalidDelayError`` for a negative, non-numeric or over-365-day
    wait, a naive eta, or both given.

    Example:
        >>> from datetime import UTC, datetime
        >>> plan_delay("x", delay=0, eta=datetime(2025, 1, 1, tzinfo=UTC), now=1_767_225_600.0)
        DelayPlan(delay_seconds=0, due_at=None)
        >>> plan_delay("x", delay=0, eta=datetime(2026, 1, 1), now=1_767_225_600.0)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        sqsjobs.InvalidDelayError: job 'x': eta=datetime.datetime(2026, 1, 1, 0, 0) has no time zone; ...
    """
    if eta is not None:
        if delay not in (0, None) and not (isinstance(delay, timedelta) and not delay):
            raise InvalidDelayError(f"job {job!r}: pass delay= or eta=, not both (delay={delay!r}, eta={eta!r})")
        return _plan_eta(job, eta, now)
    seconds = delay_seconds(job, delay)
    if seconds <= SQS_MAX_DELAY_SECONDS:
        return DelayPlan(delay_seconds=int(seconds), due_at=None)
    return DelayPlan(delay_seconds=0, due_at=now + seconds)


def delay_seconds(job: str, delay: Any) -> float:
    """``delay`` as seconds, checked: a number or ``timedelta`` within 0..365 days.

    Example:
        >>> delay_seconds("x", timedelta(hours=2)), delay_seconds("x", 90)
        (7200.0, 90.0)
        >>> delay_seconds("x", -1)
        Traceback (most recent call last):
        ...
        sqsjobs.InvalidDelayError: job 'x': delay=-1 is negative; a delay is 0..31536000 s (365 days) from now
    """
    if delay is None:
        return 0.0
    seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds != seconds:
        raise InvalidDelayError(
            f"job {job!r}: delay={delay!r} is not a number of seconds or a timedelta (e.g. delay=timedelta(hours=2))"
        )
    if seconds < 0:
        raise InvalidDelayError(
            f"job {job!r}: delay={delay!r} is negative; a delay is 0..{MAX_DELAY_SECONDS} s (365 days) from now"
        )
    if seconds > MAX_DELAY_SECONDS:
        raise InvalidDelayError(
            f"job {job!r}: delay={delay!r} is more than 365 days ({MAX_DELAY_SECONDS} s); "
            "a job that far ahead belongs in your database, with a scheduled job that enqueues it when due"
        )
    return float(seconds)


def _plan_eta(job: str, eta: Any, now: float) -> DelayPlan:
    if not isinstance(eta, datetime):
        raise InvalidDelayError(f"job {job!r}: eta={eta!r} is not a datetime (use delay= for seconds)")
    if eta.tzinfo is None or eta.utcoffset() is None:
        raise InvalidDelayError(
            f"job {job!r}: eta={eta!r} has no time zone; pass an aware datetime, e.g. datetime(..., tzinfo=UTC)"
        )
    wait = eta.timestamp() - now
    if wait <= 0:
        return DelayPlan(delay_seconds=0, due_at=None)
    if wait > MAX_DELAY_SECONDS:
        raise InvalidDelayError(
            f"job {job!r}: eta={eta.isoformat()} is more than 365 days ahead; "
            "a job that far ahead belongs in your database, with a scheduled job that enqueues it when due"
        )
    if wait <= SQS_MAX_DELAY_SECONDS:
        return DelayPlan(delay_seconds=math.ceil(wait), due_at=None)
    return DelayPlan(delay_seconds=0, due_at=eta.timestamp())


def remaining_delay(due_at: float, now: float) -> int | None:
    """The SQS ``DelaySeconds`` a message due at ``due_at`` takes when sent at ``now``; None: too far for SQS.

    A message built earlier and sent later may have come within SQS's reach.

    Example:
        >>> remaining_delay(1000.0, now=50.0), remaining_delay(1000.0, now=400.5), remaining_delay(1000.0, now=2000.0)
        (None, 600, 0)
    """
    wait = due_at - now
    if wait > SQS_MAX_DELAY_SECONDS:
        return None
    return max(0, math.ceil(wait))


def at_expression(due_at: float) -> str:
    """The one-time schedule expression for ``due_at`` (epoch seconds), in UTC, rounded up to the second.

    Example:
        >>> at_expression(1767232800.2)
        'at(2026-01-01T02:00:01)'
    """
    when = datetime.fromtimestamp(math.ceil(due_at), UTC)
    return f"at({when.strftime('%Y-%m-%dT%H:%M:%S')})"


def due_of(expression: str, timezone: str = "UTC") -> datetime | None:
    """When an ``at(...)`` expression in ``timezone`` is due (UTC); None for a cron, a rate or anything unreadable.

    Read by the one parser of AWS's dialect (``sqsjobs.schedules._cron``).

    Example:
        >>> due_of("at(2026-01-01T02:00:00)")
        datetime.datetime(2026, 1, 1, 2, 0, tzinfo=datetime.timezone.utc)
        >>> due_of("at(2026-01-01T03:00:00)", "Europe/Paris").isoformat()
        '2026-01-01T02:00:00+00:00'
        >>> due_of("rate(5 minutes)") is None
        True
    """
    from sqsjobs.schedules._cron import parse, zone

    try:
        parsed = parse(expression)
        tz = zone(timezone or "UTC")
    except ConfigurationError:
        return None
    if parsed.at is None:
        return None
    return parsed.at.when.replace(tzinfo=tz).astimezone(UTC)


def schedule_name(key: str) -> str:
    """The one-time schedule of a delayed enqueue of ``key``: one per key, so a second enqueue finds the first.

    A hash: keys may hold characters (and lengths) Scheduler's names do not
    take, and no argument value reaches the schedule's name.

    Example:
        >>> name = schedule_name("invoice-email:42")
        >>> name.startswith("job-"), len(name) <= 64
        (True, True)
    """
    return ENQUEUE_PREFIX + _key_hash(key)


def retry_schedule_name(key: str, message_id: str) -> str:
    """The one-time schedule of a long retry: per delivery, so a redelivery of it finds its own schedule.

    Example:
        >>> name = retry_schedule_name("invoice-email:42", "5fea7756-0ea4-451a-a703-a558b933e274")
        >>> name.startswith("retry-" + schedule_name("invoice-email:42")[4:]), len(name) <= 64
        (True, True)
    """
    message_hash = hashlib.sha256(message_id.encode("utf-8", "surrogatepass")).hexdigest()[:_MESSAGE_HASH_CHARS]
    return f"{RETRY_PREFIX}{_key_hash(key)}-{message_hash}"


def retry_prefix(key: str) -> str:
    """The name prefix every long retry schedule of ``key`` shares (``ListSchedules``' ``NamePrefix``)."""
    return RETRY_PREFIX + _key_hash(key)


def _key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:_KEY_HASH_CHARS]
