"""Telemetry of the local cloud: metrics in, alarms evaluated, notifications out.

Collects datapoints (EMF lines, queue samples, Lambda's own invocation
metrics), mirrors them into moto with ``PutMetricData``, evaluates the
template's alarms on every tick and, on a state change, calls
``SetAlarmState``, publishes to the alarm's topics and reports a PAGE/WARN line.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from sqsjobs.local.alarms import AlarmEvaluator, AlarmTransition, actions_for, notification
from sqsjobs.local.aws import Clients
from sqsjobs.local.invoker import InvocationResult
from sqsjobs.local.metric_store import Datapoint, MetricStore
from sqsjobs.local.model import AlarmSpec, Deployment, FunctionSpec

_QUEUE_METRICS = (
    ("ApproximateNumberOfMessagesVisible", "ApproximateNumberOfMessages"),
    ("ApproximateNumberOfMessagesNotVisible", "ApproximateNumberOfMessagesNotVisible"),
    ("ApproximateNumberOfMessagesDelayed", "ApproximateNumberOfMessagesDelayed"),
)
_MIRROR_SAMPLES_EVERY_S = 10.0
QUEUE_DEPTH_ATTRIBUTES = tuple(attribute for _, attribute in _QUEUE_METRICS)


class Telemetry:
    """Metrics and alarms of one deployment."""

    def __init__(self, deployment: Deployment, clients: Clients, *, report: Callable[[str, str], None]) -> None:
        self.deployment = deployment
        self.clients = clients
        self.report = report
        self.metrics = MetricStore()
        self.alarms = AlarmEvaluator(deployment.alarms, self.metrics, on_transition=self._on_alarm)
        self._unpublished: list[Datapoint] = []
        self._lock = threading.Lock()
        self._last_mirrored = 0.0

    def tick(self, *, oldest_sent: Mapping[str, float | None]) -> list[AlarmTransition]:
        """Sample the queues, mirror new datapoints into moto, evaluate every alarm."""
        self.sample_queues(oldest_sent)
        self.publish()
        return self.alarms.evaluate_all()

    def sample_queues(self, oldest_sent: Mapping[str, float | None]) -> None:
        """One sample of every queue's depth (and the oldest age the pollers know) as AWS/SQS metrics."""
        sqs = self.clients.get("sqs")
        now = time.time()
        points = []
        for queue in self.deployment.queues.values():
            attributes = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=["All"])["Attributes"]
            dims = frozenset({("QueueName", queue.name)})
            for metric, attribute in _QUEUE_METRICS:
                points.append(Datapoint(namespace="AWS/SQS", name=metric, dimensions=dims, timestamp=now,
                                        value=float(attributes.get(attribute, 0)), unit="Count"))
            sent = oldest_sent.get(queue.url)
            age = max(0.0, now - sent) if sent is not None else 0.0
            points.append(Datapoint(namespace="AWS/SQS", name="ApproximateAgeOfOldestMessage", dimensions=dims,
                                    timestamp=now, value=age, unit="Seconds"))
        # Alarms here read every sample; moto gets one per interval, as
        # CloudWatch has SQS metrics per minute, so a long session stays light.
        mirror = now - self._last_mirrored >= _MIRROR_SAMPLES_EVERY_S
        if mirror:
            self._last_mirrored = now
        self.record(points, mirror=mirror)

    def record(self, points: list[Datapoint], *, mirror: bool = True) -> None:
        """Keep ``points`` for alarms and, when ``mirror``, for the next ``publish()`` to moto."""
        self.metrics.add(points)
        if mirror:
            with self._lock:
                self._unpublished.extend(points)

    def publish(self) -> None:
        """Mirror the datapoints into moto, so GetMetricStatistics and dashboards see them."""
        with self._lock:
            points, self._unpublished = self._unpublished, []
        by_namespace: dict[str, list[dict[str, Any]]] = {}
        for p in points:
            by_namespace.setdefault(p.namespace, []).append(
                {"MetricName": p.name, "Dimensions": [{"Name": k, "Value": v} for k, v in sorted(p.dimensions)],
                 "Timestamp": p.timestamp, "Value": p.value, "Unit": p.unit if p.unit else "None"}
            )
        cloudwatch = self.clients.get("cloudwatch")
        for namespace, data in by_namespace.items():
            for start in range(0, len(data), 500):
                cloudwatch.put_metric_data(Namespace=namespace, MetricData=data[start : start + 500])

    def invoked(self, spec: FunctionSpec, result: InvocationResult) -> None:
        """Lambda's own metrics for one invocation (the worker errors alarm reads them)."""
        dims = frozenset({("FunctionName", spec.name)})
        now = time.time()
        self.record(
            [
                Datapoint(namespace="AWS/Lambda", name="Invocations", dimensions=dims, timestamp=now, value=1.0,
                          unit="Count"),
                Datapoint(namespace="AWS/Lambda", name="Errors", dimensions=dims, timestamp=now,
                          value=float(result.failed), unit="Count"),
                Datapoint(namespace="AWS/Lambda", name="Duration", dimensions=dims, timestamp=now,
                          value=result.duration_ms, unit="Milliseconds"),
            ]
        )

    def lambda_metric(self, function_name: str, metric: str, value: float, *, unit: str) -> None:
        """One ``AWS/Lambda`` datapoint of ``function_name`` (e.g. IteratorAge)."""
        dims = frozenset({("FunctionName", function_name)})
        self.record([Datapoint(namespace="AWS/Lambda", name=metric, dimensions=dims, timestamp=time.time(),
                                value=value, unit=unit)])

    def _on_alarm(self, alarm: AlarmSpec, change: AlarmTransition) -> None:
        self.clients.get("cloudwatch").set_alarm_state(
            AlarmName=alarm.name, StateValue=change.new, StateReason=change.reason[:1000]
        )
        sns = self.clients.get("sns")
        for topic in actions_for(alarm, change.new):
            sns.publish(TopicArn=topic, Subject=f"{change.new}: {alarm.name}"[:100],
                        Message=notification(alarm, change, self.clients.region))
        if change.new == "ALARM":
            level = "page" if alarm.severity == "PAGE" else "alarm-warn"
            self.report(level, f"alarm {alarm.name} is in ALARM: {change.reason}")
        elif change.old == "ALARM":
            self.report("ok", f"alarm {alarm.name} is back to {change.new}")
