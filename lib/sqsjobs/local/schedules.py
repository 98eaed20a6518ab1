"""Schedules from the template: ``rate(...)`` and ``cron(...)`` fired on time, or on demand.

EventBridge cron has six fields (minutes hours day-of-month month
day-of-week year), UTC. Supported: ``*``, ``?``, numbers, names (JAN, MON),
lists, ranges and ``/`` steps; ``L``, ``W`` and ``#`` are not, and such a
schedule is reported and fires only with ``sqsjobs local fire``.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from sqsjobs.local.aws import ACCOUNT_ID
from sqsjobs.local.model import Schedule

_RATE = re.compile(r"^rate\(\s*(\d+)\s+(minute|minutes|hour|hours|day|days)\s*\)$")
_CRON = re.compile(r"^cron\((.+)\)$")
_UNIT_S = {"minute": 60, "hour": 3600, "day": 86400}
_MONTHS = {m: i + 1 for i, m in enumerate(("JAN", "FEB", "MAR", "APR", "MAY", "JUN",
                                           "JUL", "AUG", "SEP", "OCT", "NOV", "DEC"))}
_DAYS = {d: i + 1 for i, d in enumerate(("SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"))}


class ScheduleError(ValueError):
    """Raised when a schedule expression cannot be emulated."""


def _field(text: str, low: int, high: int, names: dict[str, int]) -> set[int]:
    if text in ("*", "?"):
        return set(range(low, high + 1))
    values: set[int] = set()
    for part in text.split(","):
        step = 1
        if "/" in part:
            part, step_text = part.split("/", 1)
            step = int(step_text)
        if part in ("*", ""):
            start, end = low, high
        elif "-" in part:
            a, b = part.split("-", 1)
            start, end = _number(a, names), _number(b, names)
        else:
            start = _number(part, names)
            end = high if "/" in text else start
        values.update(range(start, end + 1, step))
    return values


def _number(text: str, names: dict[str, int]) -> int:
    if text.upper() in names:
        return names[text.upper()]
    if not text.isdigit():
        raise ScheduleError(f"cron field value {text!r} is not supported locally")
    return int(text)


class Timing:
    """When a schedule expression fires.

    Example:
        >>> Timing("cron(0 3 * * ? *)").matches(datetime(2026, 1, 5, 3, 0, tzinfo=UTC))
        True
        >>> Timing("rate(5 minutes)").interval_s
        300
    """

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.interval_s = 0
        rate = _RATE.match(expression.strip())
        cron = _CRON.match(expression.strip())
        if rate:
            unit = rate.group(2).rstrip("s")
            self.interval_s = int(rate.group(1)) * _UNIT_S[unit]
            return
        if not cron:
            raise ScheduleError(f"schedule {expression!r} is neither rate(...) nor cron(...)")
        fields = cron.group(1).split()
        if len(fields) != 6:
            raise ScheduleError(f"cron {expression!r} needs 6 fields")
        minute, hour, dom, month, dow, year = fields
        self._minutes = _field(minute, 0, 59, {})
        self._hours = _field(hour, 0, 23, {})
        self._dom = _field(dom, 1, 31, {})
        self._months = _field(month, 1, 12, _MONTHS)
        self._dow = _field(dow, 1, 7, _DAYS)
        self._years = _field(year, 1970, 2199, {})
        self._dom_any, self._dow_any = dom in ("*", "?"), dow in ("*", "?")

    def matches(self, moment: datetime) -> bool:
        """True when a cron expression fires in the minute of ``moment`` (UTC)."""
        dow = (moment.isoweekday() % 7) + 1  # EventBridge: SUN=1 .. SAT=7
        return (
            moment.minute in self._minutes
            and moment.hour in self._hours
            and moment.month in self._months
            and moment.year in self._years
            and (self._dom_any or moment.day in self._dom)
            and (self._dow_any or dow in self._dow)
        )


def scheduled_event(schedule: Schedule, region: str, scheduled_time: datetime | None = None) -> Any:
    """The payload a schedule delivers: its Input (placeholders filled in), or EventBridge's Scheduled Event.

    Example:
        >>> s = Schedule(logical_id="R", name="nightly", expression="rate(1 day)", function="F")
        >>> scheduled_event(s, "us-east-1")["detail-type"]
        'Scheduled Event'
        >>> s = Schedule(logical_id="S", name="n", expression="rate(1 day)", function="F",
        ...              raw_input='{"at": "<aws.scheduler.scheduled-time>"}')
        >>> scheduled_event(s, "us-east-1", datetime(2026, 1, 2, 3, 4, tzinfo=UTC))
        {'at': '2026-01-02T03:04:00Z'}
    """
    when = (scheduled_time or datetime.now(UTC)).astimezone(UTC).replace(second=0, microsecond=0)
    if schedule.raw_input is not None:
        filled = (
            schedule.raw_input.replace("<aws.scheduler.scheduled-time>", when.strftime("%Y-%m-%dT%H:%M:%SZ"))
            .replace("<aws.scheduler.execution-id>", str(uuid.uuid4()))
            .replace("<aws.scheduler.attempt-number>", "1")
            .replace("<aws.scheduler.schedule-arn>",
                     f"arn:aws:scheduler:{region}:{ACCOUNT_ID}:schedule/default/{schedule.name}")
        )
        return json.loads(filled)
    return {
        "version": "0",
        "id": str(uuid.uuid4()),
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": ACCOUNT_ID,
        "time": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": region,
        "resources": [f"arn:aws:events:{region}:{ACCOUNT_ID}:rule/{schedule.name}"],
        "detail": {},
    }


class Scheduler:
    """Fires enabled schedules on time (in each schedule's time zone) in a background thread.

    Example:
        >>> s = Schedule(logical_id="R", name="tick", expression="rate(1 minute)", function="F")
        >>> scheduler = Scheduler([s], fire=lambda schedule, at: None, report=lambda level, text: None)
        >>> scheduler.start(); scheduler.stop()"""

    def __init__(
        self,
        schedules: list[Schedule],
        fire: Callable[[Schedule, datetime], None],
        *,
        report: Callable[[str, str], None],
    ) -> None:
        self.fire = fire
        self.report = report
        self._timed: list[tuple[Schedule, Timing]] = []
        for schedule in schedules:
            if not schedule.enabled:
                continue
            try:
                self._timed.append((schedule, Timing(schedule.expression)))
            except ScheduleError as exc:
                report("warn", f"schedule {schedule.name}: {exc}; fire it with `sqsjobs local fire {schedule.name}`")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)

    def start(self) -> None:
        """Begin firing schedules."""
        self._thread.start()

    def stop(self) -> None:
        """Stop firing (a run in progress finishes)."""
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        started = time.time()
        last_minute = int(started // 60)
        last_rate: dict[str, float] = {s.logical_id: started for s, _ in self._timed}
        while not self._stop.wait(1.0):
            now = time.time()
            minute = int(now // 60)
            for schedule, timing in self._timed:
                due = False
                if timing.interval_s:
                    if now - last_rate[schedule.logical_id] >= timing.interval_s:
                        last_rate[schedule.logical_id] = now
                        due = True
                elif minute != last_minute and timing.matches(
                    datetime.fromtimestamp(minute * 60, ZoneInfo(schedule.timezone))
                ):
                    due = True
                if due:
                    at = datetime.fromtimestamp(minute * 60, UTC)
                    threading.Thread(target=self.fire, args=(schedule, at), daemon=True).start()
            last_minute = minute
