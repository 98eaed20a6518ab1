"""One-time schedules apps create at run time (delayed jobs), fired at their time as EventBridge Scheduler would.

moto stores schedules but never runs them. ``local up`` runs this emulator
over the template's schedule groups: once a second it lists their schedules,
and each ``at(...)`` schedule whose time has come is *fired*: its ``Input`` is
sent to its target queue (with ``SqsParameters.MessageGroupId`` on FIFO), and
the schedule deletes itself (``ActionAfterCompletion: DELETE``; with ``NONE``
it stays, and is not fired again). A send the queue refuses goes to the
schedule's ``DeadLetterConfig`` queue as a dead-letter event: the Input, with
the error and the schedule's ARN as message attributes. Scheduler's retries
(up to 24 hours) are not emulated.

``sqsjobs local fire KEY`` fires the schedules of a delayed job early: its
delayed enqueue (``job-<hash>``) and its long retries (``retry-<hash>-...``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqsjobs.enqueue._addresses import resolve_queue_url
from sqsjobs.enqueue._delays import due_of, retry_prefix, schedule_name
from sqsjobs.schedules._one_time import OneTimeSchedules

#: how often the groups are looked at (a schedule fires within about this long of its time)
TICK_S = 1.0


@dataclass(frozen=True, kw_only=True)
class Fired:
    """One schedule fired: where its Input went (or why it went to the DLQ instead).

    Example:
        >>> Fired(group="g", name="job-1", target="arn:aws:sqs:us-east-1:1:q", message_id="m", error=None).ok
        True
    """

    group: str
    name: str
    target: str
    message_id: str | None
    error: str | None

    @property
    def ok(self) -> bool:
        """True when the target queue took the Input."""
        return self.error is None

    def to_dict(self) -> dict[str, Any]:
        """For ``sqsjobs local fire``'s JSON answer."""
        return {"group": self.group, "schedule": self.name, "target": self.target, "message_id": self.message_id,
                "error": self.error}


class OneTimeScheduleRunner:
    """Fires the ``at(...)`` schedules of ``groups`` when due; ``tick(now)`` is one look (tests call it directly)."""

    def __init__(self, clients: Any, *, groups: list[str], report: Callable[[str, str], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.clients = clients
        self.groups = list(groups)
        self.report = report
        self.clock = clock
        #: (group, name) -> (last modification, due): GetSchedule once per version of a schedule
        self._due: dict[tuple[str, str], tuple[Any, datetime | None]] = {}
        #: schedules kept after firing (ActionAfterCompletion NONE): never fired twice
        self._spent: set[tuple[str, str, Any]] = set()
        self._groups: dict[str, OneTimeSchedules] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="one-time-schedules", daemon=True)

    def start(self) -> None:
        """Begin firing due schedules in the background."""
        if self.groups:
            self._thread.start()

    def stop(self) -> None:
        """Stop firing (a send in progress finishes)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(TICK_S):
            try:
                self.tick(self.clock())
            except Exception as exc:  # a failed look must not end the emulation (the server may be stopping)
                self.report("warn", f"one-time schedules: {type(exc).__name__}: {exc}")

    def tick(self, now: float) -> list[Fired]:
        """Fire every schedule of the groups whose time is at or before ``now``."""
        fired = []
        with self._lock:
            for group in self.groups:
                for summary in self._list(group):
                    name, modified = summary["Name"], summary.get("LastModificationDate")
                    if (group, name, modified) in self._spent:
                        continue
                    due = self._due_of(group, name, modified)
                    if due is not None and due.timestamp() <= now:
                        result = self._fire(group, name)
                        if result is not None:
                            fired.append(result)
        return fired

    def fire_key(self, key: str) -> list[Fired]:
        """Fire now every schedule of job key ``key`` (its delayed enqueue, its long retries); [] when none."""
        fired = []
        with self._lock:
            for group in self.groups:
                names = [s["Name"] for s in self._list(group, prefix=schedule_name(key))]
                names += [s["Name"] for s in self._list(group, prefix=retry_prefix(key))]
                for name in names:
                    result = self._fire(group, name)
                    if result is not None:
                        fired.append(result)
        return fired

    def pending(self) -> list[tuple[str, str, datetime | None]]:
        """``(group, name, due)`` of every schedule waiting in the groups."""
        with self._lock:
            return [(group, s["Name"], self._due_of(group, s["Name"], s.get("LastModificationDate")))
                    for group in self.groups for s in self._list(group)]

    # ------------------------------------------------------------ Scheduler, emulated
    def _list(self, group: str, prefix: str | None = None) -> list[dict[str, Any]]:
        schedules = self._groups.get(group)
        if schedules is None:
            schedules = self._groups[group] = OneTimeSchedules(
                group=group, clock=self.clock, client_factory=lambda: self.clients.get("scheduler"))
        return schedules.summaries(prefix)

    def _due_of(self, group: str, name: str, modified: Any) -> datetime | None:
        cached = self._due.get((group, name))
        if cached is not None and cached[0] == modified:
            return cached[1]
        schedule = self._get(group, name)
        due = None if schedule is None else due_of(str(schedule.get("ScheduleExpression", "")),
                                                    str(schedule.get("ScheduleExpressionTimezone") or "UTC"))
        self._due[(group, name)] = (modified, due)
        return due

    def _get(self, group: str, name: str) -> dict[str, Any] | None:
        scheduler = self.clients.get("scheduler")
        try:
            schedule: dict[str, Any] = scheduler.get_schedule(Name=name, GroupName=group)
        except scheduler.exceptions.ResourceNotFoundException:
            return None
        return schedule

    def _fire(self, group: str, name: str) -> Fired | None:
        schedule = self._get(group, name)
        if schedule is None:
            return None
        target = schedule.get("Target") or {}
        arn = str(target.get("Arn", ""))
        body = str(target.get("Input") or "{}")  # Scheduler sends "{}" when a target has no Input
        sqs = self.clients.get("sqs")
        message_id, error = None, None
        try:
            request: dict[str, Any] = {"QueueUrl": resolve_queue_url(sqs, arn), "MessageBody": body}
            group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
            if group_id:
                request["MessageGroupId"] = group_id  # the queue's content-based deduplication does the rest
            message_id = str(sqs.send_message(**request)["MessageId"])
        except Exception as exc:  # whatever the target said, Scheduler would dead-letter the event
            error = f"{type(exc).__name__}: {exc}"
            self._dead_letter(schedule, body, error)
        if schedule.get("ActionAfterCompletion") == "DELETE":
            scheduler = self.clients.get("scheduler")
            with contextlib.suppress(scheduler.exceptions.ResourceNotFoundException):
                scheduler.delete_schedule(Name=name, GroupName=group)
        else:
            self._spent.add((group, name, schedule.get("LastModificationDate")))
        self._due.pop((group, name), None)
        fired = Fired(group=group, name=name, target=arn, message_id=message_id, error=error)
        self.report("info" if fired.ok else "warn",
                    f"one-time schedule {group}/{name} fired -> {arn.rsplit(':', 1)[-1]}"
                    + ("" if fired.ok else f" FAILED ({error}); dead-lettered"))
        return fired

    def _dead_letter(self, schedule: dict[str, Any], body: str, error: str) -> None:
        dead_letter = ((schedule.get("Target") or {}).get("DeadLetterConfig") or {}).get("Arn")
        if not dead_letter:
            self.report("warn", f"one-time schedule {schedule.get('Name')}: no DeadLetterConfig, the event is lost")
            return
        sqs = self.clients.get("sqs")
        attributes = {"ERROR_CODE": error.split(":", 1)[0], "ERROR_MESSAGE": error[:256],
                      "SCHEDULE_ARN": str(schedule.get("Arn", "")),
                      "TARGET_ARN": str((schedule.get("Target") or {}).get("Arn", ""))}
        sqs.send_message(QueueUrl=resolve_queue_url(sqs, dead_letter), MessageBody=body, MessageAttributes={
            k: {"DataType": "String", "StringValue": v or "-"} for k, v in attributes.items()})

