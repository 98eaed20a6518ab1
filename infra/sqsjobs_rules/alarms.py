"""E9106: every dead-letter queue has an alarm that tells someone.

A DLQ nobody watches is a silent drop with extra steps. The rule looks for an
``AWS::CloudWatch::Alarm`` on ``AWS/SQS`` ``ApproximateNumberOfMessagesVisible``
of that queue (``QueueName`` = ``!GetAtt Dlq.QueueName`` or the queue's literal
name), firing on more than zero messages, with at least one ``AlarmActions``
entry and actions enabled. Both the single-metric form and ``Metrics`` (a
returned ``MetricStat``) are understood.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from pathlib import Path as FilePath
from typing import Any

try:
    from sqsjobs_rules import _base
except ImportError:  # pragma: no cover - loaded by path from a checkout, package not installed
    sys.path.append(str(FilePath(__file__).resolve().parent.parent))
    from sqsjobs_rules import _base

NAMESPACE = "AWS/SQS"
METRIC = "ApproximateNumberOfMessagesVisible"


def _names_queue(dimensions: Any, queue: _base.Queue) -> bool:
    if not isinstance(dimensions, list):
        return False
    for dimension in dimensions:
        if not isinstance(dimension, Mapping) or dimension.get("Name") != "QueueName":
            continue
        value = dimension.get("Value")
        if value in ({"Fn::GetAtt": [queue.logical_id, "QueueName"]}, {"Fn::GetAtt": f"{queue.logical_id}.QueueName"}):
            return True
        name = queue.properties.get("QueueName")
        if isinstance(name, str) and value == name:
            return True
    return False


def _watches(props: Mapping[str, Any], queue: _base.Queue) -> bool:
    """Whether the alarm's (returned) metric is the queue's visible-message count."""
    metrics = props.get("Metrics")
    if isinstance(metrics, list):
        returned = [m for m in metrics if isinstance(m, Mapping) and m.get("ReturnData", True) is not False]
        for entry in returned:
            stat = entry.get("MetricStat")
            metric = stat.get("Metric") if isinstance(stat, Mapping) else None
            if isinstance(metric, Mapping) and _is_queue_metric(metric, queue):
                return True
        return False
    return _is_queue_metric(props, queue)


def _is_queue_metric(metric: Mapping[str, Any], queue: _base.Queue) -> bool:
    return (
        metric.get("Namespace") == NAMESPACE
        and metric.get("MetricName") == METRIC
        and _names_queue(metric.get("Dimensions"), queue)
    )


def _fires_above_zero(props: Mapping[str, Any], wiring: _base.Wiring) -> bool:
    threshold = wiring.resolve.scalar(props.get("Threshold"))
    try:
        value = float(threshold)
    except (TypeError, ValueError):
        return False
    operator = props.get("ComparisonOperator")
    if operator == "GreaterThanThreshold":
        return value < 1
    if operator == "GreaterThanOrEqualToThreshold":
        return 0 < value <= 1
    return False


def _has_actions(value: Any) -> bool:
    """Non-empty actions; with ``Fn::If`` both branches must notify."""
    if isinstance(value, list):
        return len(value) > 0
    if isinstance(value, Mapping) and "Fn::If" in value:
        branches = value["Fn::If"]
        return isinstance(branches, list) and len(branches) == 3 and all(_has_actions(b) for b in branches[1:])
    return isinstance(value, Mapping)  # e.g. a Ref to a list parameter


def _notifies(props: Mapping[str, Any], wiring: _base.Wiring) -> bool:
    enabled = wiring.resolve.scalar(props.get("ActionsEnabled", True))
    if enabled is False or str(enabled).lower() == "false":
        return False
    return _has_actions(props.get("AlarmActions"))


class DeadLetterQueueWithoutAlarm(_base.WiringRule):
    """E9106: a dead-letter queue without an actionable ``> 0`` depth alarm.

    Example:
        >>> DeadLetterQueueWithoutAlarm().id
        'E9106'
    """

    id = "E9106"
    shortdesc = "Dead-letter queue without an alarm on ApproximateNumberOfMessagesVisible > 0"
    description = "Every DLQ needs an alarm on visible messages > 0 with AlarmActions, so a dead letter pages."

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        alarms = list(wiring.alarms())
        reported: set[str] = set()
        for source, dlq in wiring.dead_letter_queues():
            if dlq.logical_id in reported:
                continue
            if any(_watches(p, dlq) and _fires_above_zero(p, wiring) and _notifies(p, wiring) for _, p in alarms):
                continue
            reported.add(dlq.logical_id)
            yield (
                dlq.path,
                f"{dlq.logical_id} is the dead-letter queue of {source.logical_id} but no alarm with actions "
                f"watches it: dead-lettered jobs would wait unseen until they expire. Fix: add an "
                f"AWS::CloudWatch::Alarm with Namespace {NAMESPACE}, MetricName {METRIC}, Dimensions "
                f"[{{Name: QueueName, Value: !GetAtt {dlq.logical_id}.QueueName}}], Statistic Maximum, "
                f"Threshold 0, ComparisonOperator GreaterThanThreshold and AlarmActions [<page topic>].",
            )
