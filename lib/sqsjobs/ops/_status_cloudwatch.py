"""What ``sqsjobs status`` reads from CloudWatch: the oldest message's age and the alarms that concern the queues.

Best effort (:class:`Watch`): an operator without CloudWatch rights still sees
the queues, with one note saying what could not be read. The clients are
passed in; nothing runs at import.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from sqsjobs.ops._status_report import AlarmState

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_cloudwatch.type_defs import CompositeAlarmTypeDef, MetricAlarmTypeDef

    from sqsjobs.ops._cost import CostOptions, CostReport
    from sqsjobs.ops._metrics_reader import SkippedJob

__all__ = ["Watch", "oldest_age"]

_T = TypeVar("_T")


class Watch:
    """CloudWatch, best effort: an operator without CloudWatch rights still sees the queues."""

    def __init__(self, client: CloudWatchClient | None, notes: list[str]) -> None:
        self.client = client
        self.notes = notes

    def oldest_age(self, name: str, *, now: float) -> float | None:
        if self.client is None:
            return None
        return self._guard("the oldest-age metric", lambda c: oldest_age(c, name, now=now), None)

    def alarms(self, *, prefix: str | None, queue_names: set[str], namespace: str) -> tuple[AlarmState, ...]:
        if self.client is None:
            return ()
        return self._guard(
            "alarms",
            lambda c: tuple(_alarms(c, prefix=prefix, queue_names=queue_names, namespace=namespace)),
            (),
        )

    def skipped(self, *, namespace: str, hours: int, now: float) -> tuple[SkippedJob, ...]:
        if self.client is None:
            return ()
        from sqsjobs.ops._metrics_reader import Window, skipped_jobs

        window = Window.last(hours=hours, now=now)
        return self._guard("the cancelled and expired counts", lambda c: skipped_jobs(c, namespace, window), ())

    def costs(self, *, namespace: str, service: str | None, options: CostOptions, now: float) -> CostReport | None:
        """What each job cost over ``options.days`` (``ops/_cost_reader.py``); None without metrics to price."""
        if self.client is None or not options.days:
            return None

        def read(client: CloudWatchClient) -> CostReport | None:
            from sqsjobs.ops._cost_reader import read_costs
            from sqsjobs.ops._metrics_reader import services

            chosen = service
            if chosen is None:
                found = services(client, namespace)
                if not found:
                    return None
                if len(found) > 1:
                    self.notes.append(f"job costs of service {found[0]} (metrics of {', '.join(found)}): "
                                      "pass --service")
                chosen = found[0]
            return read_costs(client, namespace, chosen, now=now, days=options.days, prices=options.prices,
                              sends_per_request=options.sends_per_request)

        return self._guard("the job costs", read, None)

    def _guard(self, what: str, read: Callable[[CloudWatchClient], _T], default: _T) -> _T:
        from botocore.exceptions import BotoCoreError, ClientError

        if self.client is None:
            return default
        try:
            return read(self.client)
        except (BotoCoreError, ClientError) as exc:
            self.notes.append(f"could not read {what} from CloudWatch: {exc}")
            self.client = None  # one note, not one per queue
            return default


def oldest_age(cloudwatch_client: CloudWatchClient, name: str, *, now: float) -> float | None:
    end = datetime.fromtimestamp(now, tz=UTC)
    response = cloudwatch_client.get_metric_statistics(
        Namespace="AWS/SQS",
        MetricName="ApproximateAgeOfOldestMessage",
        Dimensions=[{"Name": "QueueName", "Value": name}],
        StartTime=end - timedelta(minutes=15),
        EndTime=end,
        Period=60,
        Statistics=["Maximum"],
    )
    points = sorted(response.get("Datapoints", []), key=lambda p: p["Timestamp"])
    if not points or "Maximum" not in points[-1]:
        return None
    return float(points[-1]["Maximum"])


def _alarms(
    cloudwatch_client: CloudWatchClient, *, prefix: str | None, queue_names: set[str], namespace: str
) -> Iterable[AlarmState]:
    """Alarms named with ``prefix``; without one, the alarms that concern these queues.

    Those are the alarms on the queues or on the sqsjobs metrics, plus every
    alarm that notifies the same SNS topics (the worker's Lambda errors and
    throttles alarms name a function, not a queue, but page the same people).
    """
    paginator = cloudwatch_client.get_paginator("describe_alarms")
    kwargs: dict[str, Any] = {"AlarmTypes": ["MetricAlarm", "CompositeAlarm"]}
    if prefix:
        kwargs["AlarmNamePrefix"] = prefix
    metric_alarms: list[MetricAlarmTypeDef] = []
    composites: list[CompositeAlarmTypeDef] = []
    for page in paginator.paginate(**kwargs):
        metric_alarms.extend(page.get("MetricAlarms", []))
        composites.extend(page.get("CompositeAlarms", []))
    ours = [a for a in metric_alarms if prefix or _concerns(a, queue_names, namespace)]
    topics = {arn for a in ours for arn in a.get("AlarmActions", []) if ":sns:" in arn}
    for alarm in metric_alarms:
        if alarm in ours or topics & set(alarm.get("AlarmActions", [])):
            yield _alarm_state(alarm, _metric_label(alarm))
    for composite in composites:
        if prefix or topics & set(composite.get("AlarmActions", [])):
            yield AlarmState(
                name=composite.get("AlarmName", ""),
                state=composite.get("StateValue", "INSUFFICIENT_DATA"),
                reason=composite.get("StateReason", ""),
                metric=composite.get("AlarmRule", ""),
                updated_at=_ts(composite.get("StateUpdatedTimestamp")),
            )


def _alarm_state(alarm: MetricAlarmTypeDef, metric: str) -> AlarmState:
    return AlarmState(
        name=alarm.get("AlarmName", ""),
        state=alarm.get("StateValue", "INSUFFICIENT_DATA"),
        reason=alarm.get("StateReason", ""),
        metric=metric,
        updated_at=_ts(alarm.get("StateUpdatedTimestamp")),
    )


def _concerns(alarm: MetricAlarmTypeDef, queue_names: set[str], namespace: str) -> bool:
    """True when the alarm watches one of our queues or our metric namespace."""
    metrics: list[tuple[str, dict[str, str]]] = []
    if "MetricName" in alarm:
        dims = {d["Name"]: d["Value"] for d in alarm.get("Dimensions", [])}
        metrics.append((alarm.get("Namespace", ""), dims))
    for query in alarm.get("Metrics", []):
        stat = query.get("MetricStat")
        if stat is not None:
            m = stat["Metric"]
            metrics.append((m.get("Namespace", ""), {d["Name"]: d["Value"] for d in m.get("Dimensions", [])}))
    for ns, dims in metrics:
        if ns == namespace:
            return True
        if ns == "AWS/SQS" and dims.get("QueueName") in queue_names:
            return True
    return False


def _metric_label(alarm: MetricAlarmTypeDef) -> str:
    if "MetricName" in alarm:
        return f"{alarm.get('Namespace', '')}/{alarm['MetricName']}"
    queries = alarm.get("Metrics", [])
    names = [q["MetricStat"]["Metric"].get("MetricName", "") for q in queries if "MetricStat" in q]
    return "math(" + ", ".join(names) + ")" if names else ""


def _ts(value: datetime | None) -> float | None:
    return value.timestamp() if value is not None else None
