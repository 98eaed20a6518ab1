"""Schedules from the template: ``rate(...)`` and ``cron(...)`` fired on time, or on demand.

Expressions are read by the one parser of AWS's dialect (``sqsjobs.schedules._cron``): every
field, ``L``, ``W`` and ``#`` included, in the schedule's ``ScheduleExpressionTimezone`` with
Scheduler's daylight-saving rule. An expression AWS would refuse is reported and the schedule
fires only with ``sqsjobs local fire``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqsjobs._errors import ConfigurationError
from sqsjobs.local.aws import ACCOUNT_ID
from sqsjobs.local.model import Schedule
from sqsjobs.schedules._cron import ScheduleExpression, parse, zone


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
        self._timed: list[tuple[Schedule, ScheduleExpression]] = []
        for schedule in schedules:
            if not schedule.enabled:
                continue
            try:
                zone(schedule.timezone)  # a bad time zone is reported now, not in the firing thread
                self._timed.append((schedule, parse(schedule.expression)))
            except ConfigurationError as exc:
                report("warn", f"{exc}; fire it with `sqsjobs local fire {schedule.name}`")
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
            at = datetime.fromtimestamp(minute * 60, UTC)
            for schedule, expression in self._timed:
                due = False
                if expression.interval_seconds:
                    if now - last_rate[schedule.logical_id] >= expression.interval_seconds:
                        last_rate[schedule.logical_id] = now
                        due = True
                elif minute != last_minute and expression.fires_at(at, schedule.timezone):
                    due = True
                if due:
                    threading.Thread(target=self.fire, args=(schedule, at), daemon=True).start()
            last_minute = minute
