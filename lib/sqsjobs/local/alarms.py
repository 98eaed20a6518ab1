"""Evaluate the template's alarms locally: moto stores them but never does.

Each alarm is evaluated over sliding windows ending now (CloudWatch uses
closed periods): the last ``EvaluationPeriods`` windows of ``Period`` seconds,
``DatapointsToAlarm`` of them breaching, missing data treated as the alarm
says. A state change is written back with ``SetAlarmState``; a change to
ALARM publishes the CloudWatch notification to the alarm's SNS topics and
prints a PAGE or WARN line.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqsjobs.local.aws import ACCOUNT_ID
from sqsjobs.local.metric_math import Value, evaluate
from sqsjobs.local.metric_store import MetricStore, dimensions
from sqsjobs.local.model import AlarmSpec

_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "GreaterThanThreshold": lambda v, t: v > t,
    "GreaterThanOrEqualToThreshold": lambda v, t: v >= t,
    "LessThanThreshold": lambda v, t: v < t,
    "LessThanOrEqualToThreshold": lambda v, t: v <= t,
}


@dataclass(frozen=True, kw_only=True)
class AlarmTransition:
    """One alarm state change, as printed and published.

    Example:
        >>> AlarmTransition(alarm="dlq", severity="PAGE", old="OK", new="ALARM", reason="1 > 0", at=0.0).new
        'ALARM'
    """

    alarm: str
    severity: str
    old: str
    new: str
    reason: str
    at: float


def statistic(values: list[float], stat: str) -> Value:
    """CloudWatch statistic ``stat`` of ``values`` (``None`` when there are none).

    Example:
        >>> statistic([1.0, 3.0], "Average"), statistic([], "Sum"), statistic([1.0, 2.0, 3.0, 4.0], "p50")
        (2.0, None, 2.0)
    """
    if not values:
        return None
    if stat == "Sum":
        return sum(values)
    if stat == "Average":
        return sum(values) / len(values)
    if stat == "Maximum":
        return max(values)
    if stat == "Minimum":
        return min(values)
    if stat == "SampleCount":
        return float(len(values))
    if stat.lower().startswith("p"):
        ordered = sorted(values)
        rank = max(0, math.ceil(float(stat[1:]) / 100 * len(ordered)) - 1)
        return ordered[rank]
    raise ValueError(f"statistic {stat} is not supported locally")


class AlarmEvaluator:
    """Evaluates alarms against a :class:`MetricStore` and reports transitions."""

    def __init__(
        self,
        alarms: list[AlarmSpec],
        store: MetricStore,
        *,
        on_transition: Callable[[AlarmSpec, AlarmTransition], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.alarms = alarms
        self.store = store
        self.on_transition = on_transition
        self.clock = clock
        self.states: dict[str, str] = {a.name: "INSUFFICIENT_DATA" for a in alarms}
        self.history: list[AlarmTransition] = []
        #: one evaluation at a time, its notifications included: whoever calls ``evaluate_all`` (a test, after
        #: the cloud's own tick changed a state) returns only once every transition so far is published
        self._evaluating = threading.Lock()

    def set_state(self, name: str, state: str) -> None:
        """Put ``name`` in ``state`` until the next evaluation (``SetAlarmState``), between evaluations."""
        with self._evaluating:
            self.states[name] = state

    def evaluate_all(self) -> list[AlarmTransition]:
        """Evaluate every alarm once; return (and report) the transitions."""
        with self._evaluating:
            return self._evaluate_all()

    def _evaluate_all(self) -> list[AlarmTransition]:
        changes: list[AlarmTransition] = []
        for alarm in self.alarms:
            new, reason = self.state_of(alarm)
            old = self.states[alarm.name]
            if new is None or new == old:
                continue
            self.states[alarm.name] = new
            change = AlarmTransition(
                alarm=alarm.name, severity=alarm.severity, old=old, new=new, reason=reason, at=self.clock()
            )
            self.history.append(change)
            changes.append(change)
            self.on_transition(alarm, change)
        return changes

    def state_of(self, alarm: AlarmSpec) -> tuple[str | None, str]:
        """The state ``alarm`` should be in now (``None``: keep the current one) and why."""
        p = alarm.properties
        periods = int(p.get("EvaluationPeriods", 1))
        to_alarm = int(p.get("DatapointsToAlarm", periods))
        threshold = float(p.get("Threshold", 0))
        compare = _COMPARISONS[str(p.get("ComparisonOperator", "GreaterThanThreshold"))]
        missing = str(p.get("TreatMissingData", "missing"))
        points = [self._value(alarm, i) for i in range(periods)]
        present = [v for v in points if v is not None]
        if not present:
            if missing == "breaching":
                return "ALARM", "no data (treated as breaching)"
            if missing == "notBreaching":
                return "OK", "no data (treated as not breaching)"
            if missing == "ignore":
                return None, ""
            return "INSUFFICIENT_DATA", "no data"
        breaching = sum(1 for v in present if compare(v, threshold))
        if missing == "breaching":
            breaching += len(points) - len(present)
        shown = ", ".join("-" if v is None else f"{v:.4g}" for v in points)
        op = str(p.get("ComparisonOperator", "GreaterThanThreshold"))
        reason = f"[{shown}] {op} {threshold:g}: {breaching} of {len(points)} breaching (alarm at {to_alarm})"
        return ("ALARM" if breaching >= to_alarm else "OK"), reason

    def _value(self, alarm: AlarmSpec, index: int) -> Value:
        """The alarm's value in the ``index``-th window back from now."""
        p = alarm.properties
        now = self.clock()
        if "Metrics" not in p:
            period = int(p.get("Period", 60))
            end = now - index * period
            values = self.store.values(
                str(p["Namespace"]), str(p["MetricName"]), dimensions(p.get("Dimensions", [])),
                start=end - period, end=end + 0.001,
            )
            return statistic(values, str(p.get("Statistic") or p.get("ExtendedStatistic")))
        bound: dict[str, Value] = {}
        queries = list(p["Metrics"])
        for query in queries:
            stat = query.get("MetricStat")
            if stat is None:
                continue
            metric = stat["Metric"]
            period = int(stat.get("Period", p.get("Period", 60)))
            end = now - index * period
            values = self.store.values(
                str(metric["Namespace"]), str(metric["MetricName"]), dimensions(metric.get("Dimensions", [])),
                start=end - period, end=end + 0.001,
            )
            bound[str(query["Id"])] = statistic(values, str(stat["Stat"]))
        # Expressions may build on each other: evaluate until all are bound.
        pending = [q for q in queries if "Expression" in q]
        while pending:
            progressed = False
            for query in list(pending):
                try:
                    bound[str(query["Id"])] = evaluate(str(query["Expression"]), bound)
                except ValueError:
                    continue
                pending.remove(query)
                progressed = True
            if not progressed:
                evaluate(str(pending[0]["Expression"]), bound)  # raises with the reason
        returned = [q for q in queries if q.get("ReturnData", True)]
        return bound.get(str(returned[0]["Id"])) if returned else None


def notification(alarm: AlarmSpec, change: AlarmTransition, region: str) -> str:
    """The JSON message CloudWatch publishes to an alarm's SNS topic.

    Example:
        >>> spec = AlarmSpec(logical_id="A", name="a", properties={"Threshold": 0})
        >>> change = AlarmTransition(alarm="a", severity="WARN", old="OK", new="ALARM", reason="r", at=0.0)
        >>> json.loads(notification(spec, change, "us-east-1"))["NewStateValue"]
        'ALARM'
    """
    p = alarm.properties
    return json.dumps(
        {
            "AlarmName": alarm.name,
            "AlarmDescription": p.get("AlarmDescription"),
            "AWSAccountId": ACCOUNT_ID,
            "NewStateValue": change.new,
            "NewStateReason": change.reason,
            "StateChangeTime": time.strftime("%Y-%m-%dT%H:%M:%S.000+0000", time.gmtime(change.at)),
            "Region": region,
            "AlarmArn": f"arn:aws:cloudwatch:{region}:{ACCOUNT_ID}:alarm:{alarm.name}",
            "OldStateValue": change.old,
            "Trigger": {k: p[k] for k in ("MetricName", "Namespace", "Statistic", "Period",
                                           "EvaluationPeriods", "ComparisonOperator", "Threshold") if k in p},
        }
    )


def actions_for(alarm: AlarmSpec, state: str) -> list[str]:
    """The SNS topic ARNs to notify when ``alarm`` enters ``state``.

    Example:
        >>> spec = AlarmSpec(logical_id="A", name="a", properties={"AlarmActions": ["arn:aws:sns:us-east-1:1:page"]})
        >>> actions_for(spec, "ALARM"), actions_for(spec, "OK")
        (['arn:aws:sns:us-east-1:1:page'], [])"""
    key = {"ALARM": "AlarmActions", "OK": "OKActions", "INSUFFICIENT_DATA": "InsufficientDataActions"}[state]
    actions: list[Any] = alarm.properties.get(key, [])
    return [str(a) for a in actions if ":sns:" in str(a)]
