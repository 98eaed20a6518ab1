"""``FakeScheduler``: an in-memory EventBridge Scheduler for delayed jobs, on the test's clock.

It answers the calls ``sqsjobs.schedules._one_time`` makes (``create_schedule``,
``update_schedule``, ``get_schedule``, ``delete_schedule``, ``list_schedules``)
with Scheduler's own error codes (``ConflictException`` for a name taken,
``ResourceNotFoundException``, ``ValidationException``), and has the ``meta`` a
botocore client has. A schedule group exists as soon as it is named. Nothing
fires by itself: ``fire_due()`` sends every ``at(...)`` schedule whose time has
come on the injected clock to its target queue of a ``FakeSQS`` (its ``Input``
as the body, ``SqsParameters.MessageGroupId`` on FIFO, as Scheduler sends
without message attributes) and deletes it (``ActionAfterCompletion: DELETE``).
A send the queue refuses goes to the schedule's ``DeadLetterConfig`` queue, as
Scheduler's dead-letter event. ``app.testing()`` wires one in (``t.advance``).

Example:
    >>> from sqsjobs.testing.fake_sqs import FakeSQS
    >>> now = [1_767_225_600.0]
    >>> sqs = FakeSQS(clock=lambda: now[0])
    >>> scheduler = FakeScheduler(sqs=sqs, clock=lambda: now[0])
    >>> url = sqs.queue_url("jobs")
    >>> _ = scheduler.create_schedule(Name="job-1", GroupName="delayed", ScheduleExpression="at(2026-01-03T00:00:00)",
    ...     FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="DELETE",
    ...     Target={"Arn": sqs.arn(url), "RoleArn": "arn:aws:iam::123456789012:role/r", "Input": '{"v": 1}'})
    >>> [s.name for s in scheduler.fire_due()], len(sqs.messages(url))
    ([], 0)
    >>> now[0] += 2 * 86_400
    >>> [s.name for s in scheduler.fire_due()], [m.body for m in sqs.messages(url)], scheduler.pending()
    (['job-1'], ['{"v": 1}'], [])
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqsjobs.enqueue._delays import ENQUEUE_PREFIX, RETRY_PREFIX, due_of
from sqsjobs.testing._sqs_rules import client_error
from sqsjobs.testing.fake_sqs import DEFAULT_ACCOUNT, DEFAULT_REGION, FakeSQS

#: what Scheduler takes as a schedule's (and a group's) name
_NAME = re.compile(r"[0-9a-zA-Z\-_.]{1,64}")
#: ListSchedules' largest page
MAX_RESULTS = 100


@dataclass(frozen=True, kw_only=True)
class SchedulerCall:
    """One API call the fake answered (or refused), with its parameters as passed."""

    operation: str
    params: dict[str, Any]


@dataclass(kw_only=True)
class FakeSchedule:
    """One schedule of a group, as created (``request``) and as Scheduler describes it."""

    group: str
    name: str
    arn: str
    request: dict[str, Any]
    created_at: float
    modified_at: float
    due: datetime | None = field(default=None)

    @property
    def target(self) -> dict[str, Any]:
        """The schedule's ``Target`` (``Arn``, ``Input``, ``RoleArn``, ``SqsParameters``...)."""
        return dict(self.request.get("Target") or {})

    @property
    def body(self) -> str:
        """What it sends: its ``Input``."""
        return str(self.target.get("Input") or "{}")  # Scheduler sends "{}" when a target has no Input

    @property
    def job(self) -> str | None:
        """The job its envelope names."""
        return self._envelope_text("job")

    @property
    def key(self) -> str | None:
        """The key its envelope names."""
        return self._envelope_text("key")

    @property
    def kind(self) -> str:
        """``"enqueue"`` (a delayed enqueue), ``"retry"`` (a long retry) or ``"other"``."""
        if self.name.startswith(ENQUEUE_PREFIX):
            return "enqueue"
        return "retry" if self.name.startswith(RETRY_PREFIX) else "other"

    def _envelope_text(self, name: str) -> str | None:
        try:
            value = json.loads(self.body).get(name)
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None


@dataclass
class _Meta:
    endpoint_url: str
    region_name: str
    service_model_name: str = "scheduler"


@dataclass
class _Refusal:
    code: str
    times: int


class FakeScheduler:
    """An in-memory EventBridge Scheduler: one-time schedules that ``fire_due`` sends to a ``FakeSQS``."""

    def __init__(self, *, sqs: FakeSQS, clock: Callable[[], float] = time.time, region: str = DEFAULT_REGION,
                 account: str = DEFAULT_ACCOUNT) -> None:
        self.meta = _Meta(endpoint_url=f"https://scheduler.{region}.amazonaws.com", region_name=region)
        self.sqs = sqs
        self.clock = clock
        self.account = account
        #: every call, in order
        self.calls: list[SchedulerCall] = []
        #: every schedule fired, in order
        self.fired: list[FakeSchedule] = []
        self._schedules: dict[tuple[str, str], FakeSchedule] = {}
        self._refusals: dict[str, _Refusal] = {}

    # ------------------------------------------------------------ helpers for tests
    def pending(self, group: str | None = None) -> list[FakeSchedule]:
        """The schedules waiting (of ``group``, when given), soonest first."""
        waiting = [s for s in self._schedules.values() if group is None or s.group == group]
        return sorted(waiting, key=lambda s: (s.due is None, s.due or datetime.max.replace(tzinfo=UTC), s.name))

    def next_due(self) -> float | None:
        """When the soonest schedule is due (epoch seconds), or None when none waits."""
        times = [s.due.timestamp() for s in self._schedules.values() if s.due is not None]
        return min(times) if times else None

    def fire_due(self) -> list[FakeSchedule]:
        """Send every schedule due by the clock to its target, soonest first; the ones fired."""
        now = self.clock()
        fired = [s for s in self.pending() if s.due is not None and s.due.timestamp() <= now]
        for schedule in fired:
            self._fire(schedule)
        return fired

    def refuse(self, operation: str, *, code: str = "ThrottlingException", times: int = 1) -> None:
        """Make the next ``times`` calls of ``operation`` (``"CreateSchedule"``...) fail with ``code``."""
        self._refusals[operation] = _Refusal(code=code, times=times)

    # ------------------------------------------------------------ the API
    def create_schedule(self, **params: Any) -> dict[str, Any]:
        """``CreateSchedule``: ``ConflictException`` when the group already holds the name."""
        self._call("CreateSchedule", params)
        group, name = self._address("CreateSchedule", params)
        if (group, name) in self._schedules:
            raise client_error("CreateSchedule", "ConflictException", f"schedule {name} already exists")
        schedule = self._schedule(group, name, params, created_at=self.clock())
        self._schedules[(group, name)] = schedule
        return {"ScheduleArn": schedule.arn}

    def update_schedule(self, **params: Any) -> dict[str, Any]:
        """``UpdateSchedule``: replaces the whole schedule, as Scheduler does."""
        self._call("UpdateSchedule", params)
        group, name = self._address("UpdateSchedule", params)
        previous = self._find("UpdateSchedule", group, name)
        self._schedules[(group, name)] = self._schedule(group, name, params, created_at=previous.created_at)
        return {"ScheduleArn": previous.arn}

    def get_schedule(self, **params: Any) -> dict[str, Any]:
        """``GetSchedule``."""
        self._call("GetSchedule", params)
        group, name = self._address("GetSchedule", params, full=False)
        schedule = self._find("GetSchedule", group, name)
        return {**copy.deepcopy(schedule.request), "Arn": schedule.arn, "GroupName": group, "Name": name,
                "CreationDate": _when(schedule.created_at), "LastModificationDate": _when(schedule.modified_at)}

    def delete_schedule(self, **params: Any) -> dict[str, Any]:
        """``DeleteSchedule``."""
        self._call("DeleteSchedule", params)
        group, name = self._address("DeleteSchedule", params, full=False)
        self._find("DeleteSchedule", group, name)
        del self._schedules[(group, name)]
        return {}

    def list_schedules(self, **params: Any) -> dict[str, Any]:
        """``ListSchedules`` of a group, by name prefix, in pages of ``MaxResults``."""
        self._call("ListSchedules", params)
        group, prefix = params.get("GroupName", "default"), params.get("NamePrefix") or ""
        names = sorted(n for g, n in self._schedules if g == group and n.startswith(prefix))
        start = int(params.get("NextToken") or 0)
        size = min(int(params.get("MaxResults") or MAX_RESULTS), MAX_RESULTS)
        page = names[start:start + size]
        answer: dict[str, Any] = {"Schedules": [self._summary(self._schedules[(group, n)]) for n in page]}
        if start + size < len(names):
            answer["NextToken"] = str(start + size)
        return answer

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"FakeScheduler has no {name}(): it answers what sqsjobs' delayed jobs call; "
            "for other EventBridge Scheduler operations use moto (moto.mock_aws) and pass its client instead"
        )

    # ------------------------------------------------------------ internals
    def _call(self, operation: str, params: dict[str, Any]) -> None:
        self.calls.append(SchedulerCall(operation=operation, params=copy.deepcopy(params)))
        refusal = self._refusals.get(operation)
        if refusal is not None and refusal.times > 0:
            refusal.times -= 1
            raise client_error(operation, refusal.code, "refused by FakeScheduler.refuse")

    def _address(self, operation: str, params: dict[str, Any], *, full: bool = True) -> tuple[str, str]:
        name, group = params.get("Name"), params.get("GroupName", "default")
        for label, value in (("Name", name), ("GroupName", group)):
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise client_error(operation, "ValidationException", f"{label} {value!r} is not a schedule name")
        if full:
            target = params.get("Target") or {}
            if not target.get("Arn") or not target.get("RoleArn"):
                raise client_error(operation, "ValidationException", "Target needs Arn and RoleArn")
            if (params.get("FlexibleTimeWindow") or {}).get("Mode") not in ("OFF", "FLEXIBLE"):
                raise client_error(operation, "ValidationException", "FlexibleTimeWindow.Mode is OFF or FLEXIBLE")
            if not isinstance(params.get("ScheduleExpression"), str):
                raise client_error(operation, "ValidationException", "ScheduleExpression is required")
        return str(group), str(name)

    def _find(self, operation: str, group: str, name: str) -> FakeSchedule:
        schedule = self._schedules.get((group, name))
        if schedule is None:
            raise client_error(operation, "ResourceNotFoundException", f"schedule {name} does not exist")
        return schedule

    def _schedule(self, group: str, name: str, params: dict[str, Any], *, created_at: float) -> FakeSchedule:
        request = {k: copy.deepcopy(v) for k, v in params.items() if k not in ("Name", "GroupName", "ClientToken")}
        arn = f"arn:aws:scheduler:{self.meta.region_name}:{self.account}:schedule/{group}/{name}"
        due = due_of(str(params["ScheduleExpression"]), str(params.get("ScheduleExpressionTimezone") or "UTC"))
        return FakeSchedule(group=group, name=name, arn=arn, request=request, created_at=created_at,
                            modified_at=self.clock(), due=due)

    def _summary(self, schedule: FakeSchedule) -> dict[str, Any]:
        return {"Name": schedule.name, "GroupName": schedule.group, "Arn": schedule.arn,
                "State": schedule.request.get("State", "ENABLED"), "CreationDate": _when(schedule.created_at),
                "LastModificationDate": _when(schedule.modified_at), "Target": {"Arn": schedule.target.get("Arn")}}

    def _fire(self, schedule: FakeSchedule) -> None:
        target = schedule.target
        group_id = (target.get("SqsParameters") or {}).get("MessageGroupId")
        url = self.sqs.queue_url_of(str(target.get("Arn")))
        try:
            # A FIFO target deduplicates by content (Scheduler sends no deduplication id).
            self.sqs.put(url, schedule.body, group_id=group_id,
                         dedup_id=hashlib.sha256(schedule.body.encode()).hexdigest() if group_id else None)
        except ValueError as error:
            dead = (target.get("DeadLetterConfig") or {}).get("Arn")
            if dead:
                self.sqs.put(self.sqs.queue_url_of(str(dead)), schedule.body, attributes={
                    "ERROR_CODE": {"DataType": "String", "StringValue": "SQS.InvalidParameterValue"},
                    "ERROR_MESSAGE": {"DataType": "String", "StringValue": str(error)[:256]},
                    "SCHEDULE_ARN": {"DataType": "String", "StringValue": schedule.arn},
                    "TARGET_ARN": {"DataType": "String", "StringValue": str(target.get("Arn"))}})
        if schedule.request.get("ActionAfterCompletion", "NONE") == "DELETE":
            self._schedules.pop((schedule.group, schedule.name), None)
        else:
            schedule.due = None  # a one-time schedule fires once; it stays, spent
        self.fired.append(schedule)


def _when(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)
