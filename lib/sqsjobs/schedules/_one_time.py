"""Delayed jobs as one-time EventBridge Scheduler schedules: create, move, read, delete, list.

A job due more than 900 s from now (or a retry more than 12 hours away)
cannot wait on SQS. It waits as a one-time schedule in the app's schedule
group instead::

    Name                  job-<hash of the key>   (a retry: retry-<hash of the key>-<hash of the message id>)
    ScheduleExpression    at(2026-01-01T02:00:00), UTC
    FlexibleTimeWindow    OFF                     ActionAfterCompletion  DELETE
    Target                the jobs queue's ARN, Input = the message body (the envelope),
                          SqsParameters.MessageGroupId on FIFO, RetryPolicy (24 h, 185 retries),
                          DeadLetterConfig = the DLQ (standard queues: Scheduler takes no FIFO DLQ)

At its time Scheduler sends the envelope to the queue, exactly as a producer
would have (without message attributes: the worker reads everything from the
body), and deletes the schedule. The name is derived from the key, so a second
enqueue of a pending key meets Scheduler's ``ConflictException``: nothing
changes and the caller learns it was ``already_scheduled`` (``replace=True``
moves the pending schedule to the new time instead).

Every call goes through the injected client (created on first use otherwise);
nothing here runs at import. Example with botocore's Stubber:

    >>> import boto3
    >>> from botocore.stub import ANY, Stubber
    >>> client = boto3.client("scheduler", region_name="eu-west-1")
    >>> schedules = OneTimeSchedules(group="jobs-delayed", client=client, clock=lambda: 1_767_225_600.0,
    ...                              role_arn="arn:aws:iam::123456789012:role/delivery")
    >>> arn = "arn:aws:scheduler:eu-west-1:123456789012:schedule/jobs-delayed/job-1"
    >>> with Stubber(client) as stub:
    ...     stub.add_response("create_schedule", {"ScheduleArn": arn}, {
    ...         "Name": "job-1", "GroupName": "jobs-delayed", "ScheduleExpression": "at(2026-01-01T02:00:00)",
    ...         "ScheduleExpressionTimezone": "UTC", "FlexibleTimeWindow": {"Mode": "OFF"},
    ...         "ActionAfterCompletion": "DELETE", "State": "ENABLED", "Description": ANY, "Target": ANY})
    ...     scheduled = schedules.create(DelayedMessage(
    ...         name="job-1", job="reminder", key="reminder:7", body="{}", due_at=1_767_232_800.0,
    ...         queue_arn="arn:aws:sqs:eu-west-1:123456789012:jobs"))
    >>> scheduled == arn, scheduled.outcome.value, scheduled.due.isoformat()
    (True, 'scheduled', '2026-01-01T02:00:00+00:00')
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from sqsjobs._errors import ConfigurationError, ScheduleError
from sqsjobs._settings import ENV_NAMES
from sqsjobs.enqueue._delays import ENQUEUE_PREFIX, RETRY_PREFIX, at_expression, due_of
from sqsjobs.schedules._receipt import ScheduledJob, ScheduleOutcome

if TYPE_CHECKING:
    from mypy_boto3_scheduler import EventBridgeSchedulerClient

    from sqsjobs._settings import Settings

#: how long and how often Scheduler retries a send that failed (its maximums) before the DLQ gets it
RETRY_POLICY = {"MaximumEventAgeInSeconds": 86_400, "MaximumRetryAttempts": 185}
#: ListSchedules' largest page
LIST_PAGE = 100


@dataclass(frozen=True, kw_only=True)
class DelayedMessage:
    """One message to hold back in a schedule until ``due_at`` (epoch seconds)."""

    name: str
    job: str
    key: str
    body: str
    due_at: float
    queue_arn: str
    #: FIFO queues: the message's group
    message_group_id: str | None = None
    replace: bool = False
    #: what the schedule is for, shown in Scheduler's console
    purpose: str = "delayed enqueue"


@dataclass(frozen=True, kw_only=True)
class PendingSchedule:
    """A schedule of the group, as ``GetSchedule`` tells it."""

    name: str
    arn: str
    due: datetime | None
    target_arn: str
    body: str
    message_group_id: str | None = None

    @property
    def job(self) -> str | None:
        """The job its envelope names (None for a body that is not an envelope)."""
        return self._envelope_text("job")

    @property
    def key(self) -> str | None:
        """The key its envelope names."""
        return self._envelope_text("key")

    def _envelope_text(self, name: str) -> str | None:
        try:
            value = json.loads(self.body).get(name)
        except (ValueError, AttributeError):
            return None
        return value if isinstance(value, str) else None

    @property
    def kind(self) -> str:
        """``"enqueue"`` (a delayed enqueue), ``"retry"`` (a long retry) or ``"other"`` (not sqsjobs')."""
        if self.name.startswith(ENQUEUE_PREFIX):
            return "enqueue"
        return "retry" if self.name.startswith(RETRY_PREFIX) else "other"


@dataclass(frozen=True, kw_only=True)
class PendingSummary:
    """The schedule group's pending delayed jobs (``sqsjobs status``).

    ``count`` is every schedule of the group (``ListSchedules``); their times
    need one ``GetSchedule`` each, so ``sampled`` holds at most the sample
    asked for, soonest first, and ``next_due`` is exact only when ``complete``.

    Example:
        >>> PendingSummary(group="g", count=0, sampled=()).next_due is None
        True
    """

    group: str
    count: int
    sampled: tuple[PendingSchedule, ...]

    @property
    def complete(self) -> bool:
        """True when every pending schedule was read."""
        return len(self.sampled) >= self.count

    @property
    def next_due(self) -> datetime | None:
        """The soonest due time read."""
        times = [s.due for s in self.sampled if s.due is not None]
        return min(times) if times else None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``sqsjobs status --json``)."""
        return {
            "group": self.group, "count": self.count, "sampled": len(self.sampled), "complete": self.complete,
            "next_due": None if self.next_due is None else self.next_due.isoformat(),
            "soonest": [{"name": s.name, "kind": s.kind, "job": s.job, "key": s.key,
                         "due": None if s.due is None else s.due.isoformat()} for s in self.sampled[:10]],
        }


class OneTimeSchedules:
    """The schedule group's one-time schedules, through EventBridge Scheduler's API.

    ``role_arn`` (the role Scheduler assumes to send to the queue) is needed
    to create schedules, and ``dead_letter_url`` gives them their DLQ; reading
    and deleting need only the group. ``calls`` counts the API calls made (for reports and
    round-trip tests).
    """

    def __init__(
        self,
        *,
        group: str,
        clock: Callable[[], float],
        role_arn: str | None = None,
        dead_letter_url: str | None = None,
        client: EventBridgeSchedulerClient | None = None,
        client_factory: Callable[[], EventBridgeSchedulerClient] | None = None,
    ) -> None:
        self.group = group
        self.role_arn = role_arn
        self.dead_letter_url = dead_letter_url
        self.clock = clock
        self._client = client
        self._client_factory = client_factory
        self.calls = 0

    @classmethod
    def of_settings(cls, settings: Settings, *, clock: Callable[[], float],
                    client_factory: Callable[[], EventBridgeSchedulerClient]) -> OneTimeSchedules:
        """The app's schedules; ``ConfigurationError`` naming the setting when no group is configured."""
        missing = missing_settings(settings, to_create=False)
        if missing:
            raise ConfigurationError(f"delayed jobs wait in an EventBridge Scheduler schedule group; "
                                     f"missing: {missing}")
        assert settings.schedule_group is not None
        return cls(group=settings.schedule_group, role_arn=settings.scheduler_role_arn,
                   dead_letter_url=settings.dlq_url, clock=clock, client_factory=client_factory)

    @property
    def client(self) -> EventBridgeSchedulerClient:
        """The Scheduler client (created on first use unless injected)."""
        if self._client is None:
            if self._client_factory is None:
                from sqsjobs._clients import scheduler_client

                self._client = scheduler_client()
            else:
                self._client = self._client_factory()
        return self._client

    @property
    def region(self) -> str:
        """The client's region (the queues' region: a schedule sends within its own)."""
        return str(self.client.meta.region_name)

    def queue_arn(self, url: str) -> str:
        """The ARN of the queue at ``url`` (a schedule's target is an ARN; apps know URLs)."""
        return queue_arn(url, default_region=self.region, role_arn=self.role_arn)

    # ------------------------------------------------------------ writing
    def create(self, message: DelayedMessage) -> ScheduledJob:
        """Hold ``message`` back until its time; a pending schedule of the same name is kept (or moved).

        Raises ``ScheduleError`` when Scheduler refuses (permissions, quotas...).
        """
        due = datetime.fromtimestamp(math.ceil(message.due_at), UTC)  # as at_expression rounds it
        for _ in range(3):  # a pending schedule may fire or vanish between two calls: look again
            request = self._request(message)
            code, answer = self._call("create_schedule", message, **request)
            if code is None:
                return self._scheduled(answer["ScheduleArn"], message, due, ScheduleOutcome.SCHEDULED)
            if code != "ConflictException":
                raise self._refused("create the schedule of", message, code, answer)
            if message.replace:
                code, answer = self._call("update_schedule", message, **request)
                if code is None:
                    return self._scheduled(answer["ScheduleArn"], message, due, ScheduleOutcome.MOVED)
                if code != "ResourceNotFoundException":
                    raise self._refused("move the schedule of", message, code, answer)
                continue  # it fired meanwhile: create it again
            pending = self.get(message.name)
            if pending is None:
                continue
            if pending.due is not None and pending.due.timestamp() <= self.clock():
                # It has fired and waits to be deleted (ActionAfterCompletion): it holds nothing back any more.
                self.delete(message.name)
                continue
            return self._scheduled(pending.arn, message, pending.due or due, ScheduleOutcome.ALREADY_SCHEDULED)
        raise ScheduleError(f"the schedule of {message.key!r} ({message.job}) kept changing while it was created; "
                            "enqueue it again")

    def delete(self, name: str) -> bool:
        """Delete schedule ``name``; False when there was none (it fired, or never existed)."""
        code, answer = self._call("delete_schedule", None, Name=name, GroupName=self.group)
        if code is None:
            return True
        if code == "ResourceNotFoundException":
            return False
        raise ScheduleError(f"EventBridge Scheduler refused to delete schedule {name} of group {self.group}: "
                            f"{code}: {_message(answer)}{_hint(code)}")

    # ------------------------------------------------------------ reading
    def get(self, name: str) -> PendingSchedule | None:
        """Schedule ``name`` of the group, or None."""
        code, answer = self._call("get_schedule", None, Name=name, GroupName=self.group)
        if code == "ResourceNotFoundException":
            return None
        if code is not None:
            raise ScheduleError(f"EventBridge Scheduler refused to read schedule {name} of group {self.group}: "
                                f"{code}: {_message(answer)}{_hint(code)}")
        target = answer.get("Target") or {}
        return PendingSchedule(
            name=answer.get("Name", name), arn=answer.get("Arn", ""),
            due=due_of(answer.get("ScheduleExpression", ""), answer.get("ScheduleExpressionTimezone") or "UTC"),
            target_arn=target.get("Arn", ""), body=target.get("Input", ""),
            message_group_id=(target.get("SqsParameters") or {}).get("MessageGroupId"),
        )

    def names(self, prefix: str | None = None) -> list[str]:
        """The names of the group's schedules (``ListSchedules``, every page), optionally by name prefix."""
        return [s["Name"] for s in self.summaries(prefix) if "Name" in s]

    def summaries(self, prefix: str | None = None) -> list[dict[str, Any]]:
        """``ListSchedules``' summaries of the group's schedules (name, state, times), every page."""
        found: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"GroupName": self.group, "MaxResults": LIST_PAGE}
        if prefix:
            kwargs["NamePrefix"] = prefix
        while True:
            code, answer = self._call("list_schedules", None, **kwargs)
            if code is not None:
                raise ScheduleError(f"EventBridge Scheduler refused to list schedule group {self.group}: "
                                    f"{code}: {_message(answer)}{_hint(code)}")
            found.extend(dict(s) for s in answer.get("Schedules", []))
            if not answer.get("NextToken"):
                return found
            kwargs["NextToken"] = answer["NextToken"]

    def pending(self, *, sample: int = 100) -> PendingSummary:
        """How many schedules wait in the group, and (for up to ``sample`` of them) when they are due."""
        names = self.names()
        read = [p for p in (self.get(name) for name in names[:max(sample, 0)]) if p is not None]
        read.sort(key=lambda p: (p.due is None, p.due or datetime.max.replace(tzinfo=UTC)))
        return PendingSummary(group=self.group, count=len(names), sampled=tuple(read))

    # ------------------------------------------------------------ helpers
    def _request(self, message: DelayedMessage) -> dict[str, Any]:
        if not self.role_arn:
            raise ConfigurationError(
                f"job {message.job!r} is due in more than 900 s, so it waits in an EventBridge Scheduler "
                "schedule, which needs the role Scheduler sends it with; missing: scheduler_role_arn"
            )
        target: dict[str, Any] = {"Arn": message.queue_arn, "RoleArn": self.role_arn, "Input": message.body,
                                  "RetryPolicy": dict(RETRY_POLICY)}
        if self.dead_letter_url and not self.dead_letter_url.endswith(".fifo"):
            # Scheduler takes no FIFO queue as a DLQ; on FIFO the RetryPolicy is all there is.
            target["DeadLetterConfig"] = {"Arn": self.queue_arn(self.dead_letter_url)}
        if message.message_group_id is not None:
            target["SqsParameters"] = {"MessageGroupId": message.message_group_id}
        return {
            "Name": message.name, "GroupName": self.group, "ScheduleExpression": at_expression(message.due_at),
            "ScheduleExpressionTimezone": "UTC", "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE", "State": "ENABLED",
            "Description": f"sqsjobs: {message.purpose} of job {message.job}"[:512],
            "Target": target,
        }

    def _call(self, operation: str, message: DelayedMessage | None, **kwargs: Any) -> tuple[str | None, Any]:
        """Call ``operation``; ``(None, response)`` or ``(error code, error response)``."""
        from botocore.exceptions import BotoCoreError, ClientError

        self.calls += 1
        try:
            return None, getattr(self.client, operation)(**kwargs)
        except ClientError as error:
            return str(error.response.get("Error", {}).get("Code", "ClientError")), error.response
        except BotoCoreError as error:
            what = f" for {message.key!r}" if message is not None else ""
            raise ScheduleError(f"EventBridge Scheduler could not be reached{what}: {error}") from error

    def _scheduled(self, arn: str, message: DelayedMessage, due: datetime,
                   outcome: ScheduleOutcome) -> ScheduledJob:
        return ScheduledJob(arn, key=message.key, job=message.job, name=message.name, due=due, outcome=outcome)

    def _refused(self, what: str, message: DelayedMessage, code: str, answer: Any) -> ScheduleError:
        return ScheduleError(f"EventBridge Scheduler refused to {what} {message.key!r} (job {message.job}, "
                             f"group {self.group}): {code}: {_message(answer)}{_hint(code)}")


def missing_settings(settings: Settings, *, to_create: bool) -> str:
    """The settings a schedule group needs that ``settings`` lacks, and how to give them ("" when none).

    Reading and deleting schedules needs the group; creating them needs the
    role Scheduler sends with and the DLQ it dead-letters to as well.

    Example:
        >>> from sqsjobs._settings import Settings
        >>> missing_settings(Settings(schedule_group="g"), to_create=True)  # doctest: +NORMALIZE_WHITESPACE
        'scheduler_role_arn (pass scheduler_role_arn= to JobApp or set SQSJOBS_SCHEDULER_ROLE_ARN) and dlq_url
        (pass dlq_url= to JobApp or set SQSJOBS_DLQ_URL)'
    """
    from sqsjobs._env_names import did_you_mean

    names = ["schedule_group", "scheduler_role_arn", "dlq_url"] if to_create else ["schedule_group"]
    missing = [f"{name} (pass {name}= to JobApp or set {ENV_NAMES[name]}{did_you_mean(ENV_NAMES[name])})"
               for name in names if not getattr(settings, name)]
    return " and ".join(missing)


def queue_arn(url: str, *, default_region: str, role_arn: str | None) -> str:
    """The ARN of the queue at ``url``: its account and name from the URL, the partition from ``role_arn``.

    The region is the URL's host (``sqs.<region>.amazonaws.com``), else ``default_region``.

    Example:
        >>> queue_arn("https://sqs.eu-west-1.amazonaws.com/123456789012/jobs", default_region="us-east-1",
        ...           role_arn=None)
        'arn:aws:sqs:eu-west-1:123456789012:jobs'
        >>> queue_arn("http://127.0.0.1:5000/123456789012/jobs", default_region="us-east-1",
        ...           role_arn="arn:aws-cn:iam::123456789012:role/r")
        'arn:aws-cn:sqs:us-east-1:123456789012:jobs'
    """
    from sqsjobs.enqueue._addresses import queue_identity

    identity = queue_identity(url)
    if identity is None:
        raise ConfigurationError(f"{url!r} is not a queue URL (https://sqs.<region>.amazonaws.com/<account>/<name>)")
    account, name = identity
    parts = (urlparse(url).hostname or "").split(".")
    region = parts[1] if len(parts) > 2 and parts[0] == "sqs" else default_region
    partition = role_arn.split(":")[1] if role_arn and role_arn.count(":") >= 5 else "aws"
    return f"arn:{partition}:sqs:{region}:{account}:{name}"


def _message(answer: Any) -> str:
    return str((answer.get("Error") or {}).get("Message", "")) if isinstance(answer, dict) else ""


def _hint(code: str) -> str:
    if code in ("AccessDeniedException", "AccessDenied"):
        return (" (the caller needs scheduler:CreateSchedule/UpdateSchedule/GetSchedule/DeleteSchedule on the group's "
                "schedules and iam:PassRole on the delivery role: `sqsjobs check` rule E9108)")
    return ""
