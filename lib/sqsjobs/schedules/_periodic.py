"""Scheduled jobs that fire once per period, however many schedulers tick.

``@app.scheduled("nightly-report", schedule="cron(0 2 * * ? *)")`` registers a
job taking ``period: str`` and a schedule for it. EventBridge Scheduler invokes
``handlers/scheduler.py`` with ``{"job": ..., "scheduled_time": ...}``; the
scheduler turns the *scheduled* time (not the arrival time, so a late or
retried tick still names its own period) into a period such as
``2026-08-05``, claims the job's own record ``nightly-report:2026-08-05``
(``schedules/_period_locks.py``: the period's lock is the job's record, so a
key names one operation whatever path it comes by) and only then runs the job.
A second scheduler in the same period finds the record held or done, does
nothing and logs why. With ``enqueue=True`` the tick only sends the period's
message; the worker claims its key like any delivery's, so a second tick's
message is a duplicate.

The lease lasts the invocation's remaining time + ``lease_margin`` (or
``lease_seconds``, when shorter): the holder cannot outlive its invocation,
so that is the shortest lease that never lets two runs overlap, and the
soonest a crashed holder's period can be taken over.

A tick that finds the period held by another owner (a run still going, or one
that died holding it) waits for that lease to end when it ends within this
invocation, then takes the period over or finds it done. When the lease
outlasts the invocation the tick *fails* (``PeriodBusyError``), so Lambda's
asynchronous retry comes back later: a run killed while holding its lease
never loses its period to a tick that said "fired: False".

Declaring a schedule never calls AWS; the template's schedule and the
decorator must name the same expression (a test checks it).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqsjobs._calls import run_to_end
from sqsjobs._errors import ConfigurationError, InvalidEventError, PeriodBusyError, StoreError, UnknownJobError
from sqsjobs.schedules._cron import RateUnit
from sqsjobs.schedules._cron import parse as parse_schedule
from sqsjobs.schedules._period_locks import PeriodLocks, Taken
from sqsjobs.store._lease import expiry
from sqsjobs.worker._budget import remaining_seconds

if TYPE_CHECKING:
    from sqsjobs._job import Job, JobRuntime

PERIOD = "period"
DAILY = "%Y-%m-%d"
HOURLY = "%Y-%m-%dT%H"
MINUTELY = "%Y-%m-%dT%H:%M"


@dataclass(frozen=True, kw_only=True)
class ScheduleSpec:
    """A registered schedule: which job, when, and how its period and lease are formed.

    Example:
        >>> ScheduleSpec(job="nightly-report", expression="cron(0 2 * * ? *)", period=DAILY).period_of(
        ...     datetime(2026, 8, 5, 2, 0, tzinfo=UTC))
        '2026-08-05'
    """

    job: str
    expression: str
    period: str
    lease_seconds: float | None = None
    enqueue: bool = False

    def period_of(self, when: datetime) -> str:
        """The period ``when`` (UTC) falls in."""
        return when.astimezone(UTC).strftime(self.period)


@dataclass(frozen=True, kw_only=True)
class FireResult:
    """What one scheduler tick did.

    Example:
        >>> FireResult(job="nightly-report", period="2026-08-05", fired=False, owner="b",
        ...            reason="already done by a").response()["fired"]
        False
    """

    job: str
    period: str
    fired: bool
    owner: str
    reason: str
    enqueued: str | None = None  #: the SQS message id, in enqueue mode

    def response(self) -> dict[str, Any]:
        """The Lambda response (also logged)."""
        return {"job": self.job, "period": self.period, "fired": self.fired, "reason": self.reason,
                "owner": self.owner, "enqueued": self.enqueued}


def period_format(expression: str) -> str:
    """The coarsest period in which ``expression`` fires at most once (UTC strftime format).

    The expression is checked by the one parser of AWS's dialect (``sqsjobs.schedules._cron``):
    a cron naming one minute of one hour fires once a day, one minute of every hour once an hour.

    Example:
        >>> period_format("cron(0 2 * * ? *)"), period_format("cron(15 * * * ? *)"), period_format("rate(5 minutes)")
        ('%Y-%m-%d', '%Y-%m-%dT%H', '%Y-%m-%dT%H:%M')
    """
    parsed = parse_schedule(expression)
    if parsed.cron is not None:
        if len(parsed.cron.minutes) == 1 and len(parsed.cron.hours) == 1:
            return DAILY
        return HOURLY if len(parsed.cron.minutes) == 1 else MINUTELY
    if parsed.rate is not None:
        return {RateUnit.DAY: DAILY, RateUnit.HOUR: HOURLY}.get(parsed.rate.unit, MINUTELY)
    return MINUTELY


def scheduled_time(event: Any, now: float) -> datetime:
    """The tick's scheduled time: Scheduler's ``scheduled_time``, an EventBridge rule's ``time``, or now.

    Example:
        >>> scheduled_time({"scheduled_time": "2026-08-05T02:00:00Z"}, 0).isoformat()
        '2026-08-05T02:00:00+00:00'
        >>> scheduled_time({"scheduled_time": "<aws.scheduler.scheduled-time>"}, 0).year  # not substituted
        1970
    """
    for name in ("scheduled_time", "time"):
        value = event.get(name) if isinstance(event, dict) else None
        if isinstance(value, str):
            try:
                parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
            except ValueError:
                continue
            return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return datetime.fromtimestamp(now, UTC)


class Scheduler:
    """Fires scheduled jobs behind a lease per job and period.

    Example:
        >>> import logging
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore(), logger=logging.getLogger("doc"))
        >>> @app.scheduled("nightly-report", schedule="cron(0 2 * * ? *)")
        ... def nightly_report(period: str) -> None: ...
        >>> at = datetime(2026, 8, 5, 2, tzinfo=UTC)
        >>> scheduler = Scheduler(app.runtime)  # a second fire in the same period is refused by its lease
        >>> scheduler.fire("nightly-report", at=at).fired, scheduler.fire("nightly-report", at=at).fired
        (True, False)
    """

    #: how often a tick waiting for another holder's lease looks again (seconds)
    POLL_SECONDS = 5.0
    #: a bound on the looks, whatever the clock does (a 15-minute invocation polls ~180 times)
    MAX_LOOKS = 1000

    def __init__(self, runtime: JobRuntime, *, locks: PeriodLocks | None = None) -> None:
        self.runtime = runtime
        self._locks = locks
        #: the invocation of the tick being fired (its deadline bounds the retries of the period's writes)
        self._context: Any = None

    @property
    def locks(self) -> PeriodLocks:
        """The periods' records (in the idempotency table); their completions are retried inside the deadline."""
        if self._locks is None:
            from functools import partial

            from sqsjobs.worker._record_writes import write_with_retries

            store = self.runtime.store
            self._locks = PeriodLocks(store, write=partial(write_with_retries, store, sleep=self.runtime.sleep,
                                                           time_left=self._time_left, random=self.runtime.random))
        return self._locks

    def _time_left(self) -> float | None:
        remaining = remaining_seconds(self._context)
        return None if remaining is None else remaining - self.runtime.settings.deadline_margin

    def handle(self, event: Any, context: Any = None) -> dict[str, Any]:
        """The Lambda handler body for EventBridge Scheduler's invocation."""
        name = event.get("job") if isinstance(event, dict) else None
        if name is None and len(self.runtime.registry.schedules) == 1:
            name = next(iter(self.runtime.registry.schedules))
        if not isinstance(name, str):
            raise InvalidEventError(
                "the scheduler event names no job: the schedule's Input must be "
                '{"job": "<name>", "scheduled_time": "<aws.scheduler.scheduled-time>"}'
            )
        return self.fire(name, at=scheduled_time(event, self.runtime.clock()), context=context).response()

    def fire(self, job: str, *, at: datetime | None = None, context: Any = None) -> FireResult:
        """Claim the period's record and run ``job`` (or enqueue it); do nothing if the period is taken.

        Raises what the job raised, after releasing the record, so the invocation
        fails and a retry in the same period can claim it again; raises
        ``PeriodBusyError`` when another holder's lease outlasts this invocation.
        """
        spec = self.runtime.registry.schedules.get(job)
        if spec is None:
            known = ", ".join(sorted(self.runtime.registry.schedules)) or "none"
            raise UnknownJobError(f"no scheduled job named {job!r} (scheduled: {known})")
        now = self.runtime.clock()
        period = spec.period_of(at or datetime.fromtimestamp(now, UTC))
        target = self.runtime.job(job)
        key = target.key_for({PERIOD: period})
        owner = uuid.uuid4().hex
        fields = {"job": job, "period": period, "key": key, "owner": owner}
        if spec.enqueue:  # the worker claims the key: a second tick's message is a duplicate there
            enqueued = self.runtime.send(target.message(**{PERIOD: period}))
            self.runtime.logger.info("scheduled job enqueued", extra={**fields, "enqueued": enqueued})
            return FireResult(job=job, period=period, fired=True, owner=owner, reason="enqueued", enqueued=enqueued)
        self._context = context
        taken = self._take(key, target, period, owner, spec, context)
        if not taken.ok:
            self.runtime.logger.info("scheduled job not fired: its period is taken", extra={**fields,
                                                                                         "reason": taken.reason})
            return FireResult(job=job, period=period, fired=False, owner=owner, reason=taken.reason)
        ttl = self.runtime.settings.record_ttl
        try:
            run_to_end(target.fn, {PERIOD: period}, f"scheduled job {job!r}")  # an async one on a loop of its own
        except BaseException as error:
            # Give the period back, so the next tick (a retry) may run it.
            now = self.runtime.clock()
            if not self.locks.release(key, owner=owner, now=now, expires_at=expiry(now, ttl), error=error):
                self.runtime.logger.warning("lease lost before release", extra=fields)
            raise
        now = self.runtime.clock()
        if not self.locks.complete(key, owner=owner, now=now, expires_at=expiry(now, ttl)):
            self.runtime.logger.warning("lease ran out while the job ran; another scheduler may have fired too",
                                        extra=fields)
            return FireResult(job=job, period=period, fired=True, owner=owner, reason="lease lost")
        self.runtime.logger.info("scheduled job fired", extra=fields)
        return FireResult(job=job, period=period, fired=True, owner=owner, reason="acquired")

    def _take(self, key: str, target: Job[Any, Any], period: str, owner: str, spec: ScheduleSpec,
              context: Any) -> Taken:
        """Claim the period, waiting out another holder's lease when it ends within this invocation."""
        settings = self.runtime.settings
        started = self.runtime.clock()
        remaining = remaining_seconds(context)
        own_end = started + (remaining if remaining is not None else self._default_lease())
        for _ in range(self.MAX_LOOKS):
            now = self.runtime.clock()
            lease_until = min(own_end + settings.lease_margin,
                              now + spec.lease_seconds if spec.lease_seconds is not None else float("inf"))
            taken = self.locks.acquire(key, owner=owner, now=now, lease_until=lease_until, job=target.name,
                                       expires_at=expiry(now, settings.record_ttl, lease_until),
                                       fingerprint=target.fingerprint({PERIOD: period}),
                                       fp_version=target.options.version, period=period)
            if taken.error is not None:
                raise StoreError(taken.error)
            if taken.conflict:
                raise ConfigurationError(f"scheduled job {target.name!r}: the key {key!r} of its period "
                                         f"{taken.reason}; give the job a key template of its own")
            if taken.ok or taken.done or taken.current is None:
                return taken
            holder_end = taken.current.lease_until
            if holder_end is None or holder_end + 1.0 > own_end - settings.deadline_margin:
                raise PeriodBusyError(
                    f"scheduled job {target.name!r}: the period is {taken.reason}, past this invocation's end; "
                    "failing the tick so that Lambda retries it after that lease (a run that died holding it is "
                    "taken over then)"
                )
            self.runtime.sleep(max(min(self.POLL_SECONDS, holder_end + 1.0 - now), 0.0))
        raise PeriodBusyError(f"scheduled job {target.name!r}: the period stayed held after {self.MAX_LOOKS} looks")

    def _default_lease(self) -> float:
        return self.runtime.settings.function_timeout or 900.0


def schedule_spec(job: str, schedule: str, *, period: str | None, lease_seconds: float | None,
                  enqueue: bool) -> ScheduleSpec:
    """Validate a ``@app.scheduled`` declaration (no AWS)."""
    fmt = period_format(schedule)  # also validates the expression
    if period is not None:
        if not isinstance(period, str) or "%" not in period:
            raise ConfigurationError(f"scheduled job {job!r}: period must be a strftime format such as "
                                     f"'%Y-%m-%d', got {period!r}")
        fmt = period
    if lease_seconds is not None and (isinstance(lease_seconds, bool) or not lease_seconds > 0):
        raise ConfigurationError(f"scheduled job {job!r}: lease_seconds must be a positive number of seconds "
                                 "(expected runtime + margin)")
    return ScheduleSpec(job=job, expression=schedule.strip(), period=fmt, lease_seconds=lease_seconds,
                        enqueue=enqueue)
