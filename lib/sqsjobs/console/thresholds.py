"""Each queue's alarm limits in the queue's own units, read from the alarms' definitions.

The overview shows a queue's oldest age *against the age at which its alarm
fires*. That number is not always the alarm's ``Threshold``: the template's
oldest-message alarm divides the age by ``ExpectedLatencySeconds`` in metric
math (CloudFormation cannot multiply a parameter into a threshold), so it
fires at ``Threshold x ExpectedLatencySeconds`` seconds. A metric-math alarm
whose only input is one queue metric is solved for that input: its
expression is evaluated (by the local cloud's engine, :mod:`sqsjobs.local.metric_query`)
at three values, and a straight line through them gives the limit.
Alarms on anything else are shown by state only.

Example:
    >>> alarm = {"AlarmName": "age", "StateValue": "OK", "Threshold": 5.0,
    ...          "ComparisonOperator": "GreaterThanThreshold", "Metrics": [
    ...     {"Id": "age", "ReturnData": False, "MetricStat": {"Period": 60, "Stat": "Maximum", "Metric": {
    ...         "Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
    ...         "Dimensions": [{"Name": "QueueName", "Value": "jobs"}]}}},
    ...     {"Id": "latencies", "Expression": "age / 60", "ReturnData": True}]}
    >>> limit = queue_limit(alarm)
    >>> (limit.queue, limit.metric, limit.comparison, limit.threshold)
    ('jobs', 'ApproximateAgeOfOldestMessage', '>', 300.0)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

AGE_METRIC: Final = "ApproximateAgeOfOldestMessage"
SQS_NAMESPACE: Final = "AWS/SQS"
_COMPARISONS: Final = {
    "GreaterThanThreshold": ">",
    "GreaterThanOrEqualToThreshold": ">=",
    "LessThanThreshold": "<",
    "LessThanOrEqualToThreshold": "<=",
}
_FLIPPED: Final = {">": "<", ">=": "<=", "<": ">", "<=": ">="}
_NAMES_PER_CALL: Final = 100  # DescribeAlarms takes at most 100 AlarmNames


@dataclass(frozen=True, kw_only=True)
class QueueLimit:
    """An alarm on one queue metric: it fires when ``metric comparison threshold`` (queue units).

    Example:
        >>> QueueLimit(alarm="dlq", queue="jobs-dlq", metric="ApproximateNumberOfMessagesVisible",
        ...            comparison=">", threshold=0.0, state="ALARM").describe()
        'alarm when > 0'
    """

    alarm: str
    queue: str
    metric: str
    comparison: str
    threshold: float
    state: str

    @property
    def is_age(self) -> bool:
        """True for a limit on the oldest message's age (seconds)."""
        return self.metric == AGE_METRIC

    def describe(self) -> str:
        """``alarm when > 300`` (seconds for an age, messages otherwise)."""
        value = f"{self.threshold:g}"
        return f"alarm when {self.comparison} {value}"


def queue_limit(alarm: Mapping[str, Any]) -> QueueLimit | None:
    """The limit ``alarm`` puts on one queue metric, or None when it watches something else."""
    comparison = _COMPARISONS.get(str(alarm.get("ComparisonOperator", "")))
    if comparison is None or "Threshold" not in alarm:
        return None
    threshold = float(alarm["Threshold"])
    name, state = str(alarm.get("AlarmName", "")), str(alarm.get("StateValue", "INSUFFICIENT_DATA"))
    if "MetricName" in alarm:
        queue = _queue_of(alarm.get("Namespace"), alarm.get("Dimensions", []))
        if queue is None:
            return None
        return QueueLimit(alarm=name, queue=queue, metric=str(alarm["MetricName"]), comparison=comparison,
                          threshold=threshold, state=state)
    return _solved(alarm.get("Metrics", []), name=name, state=state, comparison=comparison, threshold=threshold)


def queue_limits(cloudwatch: CloudWatchClient, alarm_names: Sequence[str]) -> tuple[QueueLimit, ...]:
    """The queue limits of the alarms named (those ``sqsjobs status`` found for these queues)."""
    limits: list[QueueLimit] = []
    for start in range(0, len(alarm_names), _NAMES_PER_CALL):
        names = list(alarm_names[start : start + _NAMES_PER_CALL])
        for page in cloudwatch.get_paginator("describe_alarms").paginate(AlarmNames=names,
                                                                            AlarmTypes=["MetricAlarm"]):
            for alarm in page.get("MetricAlarms", []):
                limit = queue_limit(alarm)
                if limit is not None:
                    limits.append(limit)
    return tuple(limits)


def _queue_of(namespace: object, dimensions: Sequence[Mapping[str, Any]]) -> str | None:
    if namespace != SQS_NAMESPACE:
        return None
    names = [str(d["Value"]) for d in dimensions if d.get("Name") == "QueueName"]
    return names[0] if len(names) == 1 else None


def _solved(metrics: Sequence[Mapping[str, Any]], *, name: str, state: str, comparison: str,
            threshold: float) -> QueueLimit | None:
    """Solve a metric-math alarm with one queue-metric input for that input (straight lines only)."""
    from sqsjobs.local.metric_query import MetricQueryError, metric_data

    inputs = [m for m in metrics if "MetricStat" in m]
    if len(inputs) != 1:
        return None
    metric = inputs[0]["MetricStat"]["Metric"]
    queue = _queue_of(metric.get("Namespace"), metric.get("Dimensions", []))
    if queue is None:
        return None
    returned = [m for m in metrics if m.get("ReturnData", True) is not False]
    if len(returned) != 1:
        return None

    def at(x: float) -> float | None:
        try:
            results = metric_data(lambda *_: [(0.0, x)], metrics, start=0.0, end=60.0)
        except MetricQueryError:
            return None
        values = results[0].values if results else ()
        return values[0] if values else None

    y0, y1, y2 = at(0.0), at(1.0), at(2.0)
    if y0 is None or y1 is None or y2 is None or y1 == y0 or abs((y2 - y1) - (y1 - y0)) > 1e-9:
        return None  # not a straight line in the queue metric: show the alarm's state only
    slope = y1 - y0
    return QueueLimit(alarm=name, queue=queue, metric=str(metric["MetricName"]),
                      comparison=comparison if slope > 0 else _FLIPPED[comparison],
                      threshold=(threshold - y0) / slope, state=state)
