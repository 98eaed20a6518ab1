"""Local alarm evaluation: windows, statistics, missing data, transitions."""

from __future__ import annotations

import json
from typing import Any

from sqsjobs.local.alarms import AlarmEvaluator, AlarmTransition, actions_for, statistic
from sqsjobs.local.metric_store import Datapoint, MetricStore, parse_emf
from sqsjobs.local.model import AlarmSpec

NOW = 1_800_000_000.0  # every clock here reads NOW: the store's horizon too, or its points expire with the years


def dlq_alarm(**overrides: Any) -> AlarmSpec:
    properties = {
        "Namespace": "AWS/SQS", "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": "dlq"}], "Statistic": "Maximum", "Period": 60,
        "EvaluationPeriods": 1, "Threshold": 0, "ComparisonOperator": "GreaterThanThreshold",
        "TreatMissingData": "notBreaching", "AlarmActions": ["arn:aws:sns:us-east-1:1:page"],
        **overrides,
    }
    return AlarmSpec(logical_id="Dlq", name="dlq-alarm", properties=properties, severity="PAGE")


def point(value: float, at: float, name: str = "ApproximateNumberOfMessagesVisible") -> Datapoint:
    return Datapoint(namespace="AWS/SQS", name=name, dimensions=frozenset({("QueueName", "dlq")}),
                     timestamp=at, value=value)


def evaluator(alarm: AlarmSpec, store: MetricStore, seen: list[AlarmTransition]) -> AlarmEvaluator:
    return AlarmEvaluator([alarm], store, on_transition=lambda _, change: seen.append(change), clock=lambda: NOW)


def test_a_breaching_sample_moves_the_alarm_to_alarm_once() -> None:
    store, seen = MetricStore(clock=lambda: NOW), []
    store.add([point(0, NOW - 30), point(2, NOW - 5)])
    e = evaluator(dlq_alarm(), store, seen)

    e.evaluate_all()
    e.evaluate_all()

    assert [(c.old, c.new) for c in seen] == [("INSUFFICIENT_DATA", "ALARM")]


def test_no_data_follows_treat_missing_data() -> None:
    for treat, expected in (("notBreaching", "OK"), ("breaching", "ALARM"), ("missing", "INSUFFICIENT_DATA")):
        seen: list[AlarmTransition] = []
        e = evaluator(dlq_alarm(TreatMissingData=treat), MetricStore(clock=lambda: NOW), seen)
        e.evaluate_all()
        assert e.states["dlq-alarm"] == expected


def test_m_out_of_n_datapoints_to_alarm() -> None:
    store, seen = MetricStore(clock=lambda: NOW), []
    store.add([point(1, NOW - 10), point(0, NOW - 70), point(1, NOW - 130)])
    alarm = dlq_alarm(EvaluationPeriods=3, DatapointsToAlarm=2)

    state, reason = evaluator(alarm, store, seen).state_of(alarm)

    assert state == "ALARM"
    assert "2 of 3 breaching" in reason


def test_metric_math_alarm_reads_emf_metrics() -> None:
    store, seen = MetricStore(clock=lambda: NOW), []
    line = json.dumps({
        "_aws": {"Timestamp": int((NOW - 1) * 1000), "CloudWatchMetrics": [
            {"Namespace": "sqsjobs", "Dimensions": [["service"]],
             "Metrics": [{"Name": "JobSucceeded"}, {"Name": "JobFailed"}]}]},
        "service": "s", "JobSucceeded": 9, "JobFailed": 1,
    })
    store.add(parse_emf(line))
    metric = {"Namespace": "sqsjobs", "Dimensions": [{"Name": "service", "Value": "s"}]}
    alarm = AlarmSpec(logical_id="Rate", name="rate", properties={
        "EvaluationPeriods": 1, "Threshold": 5, "ComparisonOperator": "GreaterThanThreshold",
        "Metrics": [
            {"Id": "ok", "MetricStat": {"Metric": {**metric, "MetricName": "JobSucceeded"}, "Period": 600,
                                        "Stat": "Sum"}, "ReturnData": False},
            {"Id": "failed", "MetricStat": {"Metric": {**metric, "MetricName": "JobFailed"}, "Period": 600,
                                            "Stat": "Sum"}, "ReturnData": False},
            {"Id": "rate", "Expression": "IF(ok + failed > 0, 100 * failed / (ok + failed), 0)"},
        ]})

    evaluator(alarm, store, seen).evaluate_all()

    assert [c.new for c in seen] == ["ALARM"]
    assert "[10]" in seen[0].reason


def test_statistics_and_actions() -> None:
    assert statistic([1.0, 2.0, 3.0], "Sum") == 6.0
    assert statistic([1.0, 2.0, 3.0], "SampleCount") == 3.0
    assert statistic([5.0, 1.0], "Minimum") == 1.0
    assert actions_for(dlq_alarm(), "ALARM") == ["arn:aws:sns:us-east-1:1:page"]
    assert actions_for(dlq_alarm(), "OK") == []


def test_emf_lines_with_both_dimension_sets_give_two_points_each() -> None:
    line = ('{"_aws": {"Timestamp": 1000, "CloudWatchMetrics": [{"Namespace": "n",'
            ' "Dimensions": [["service", "Job"], ["service"]], "Metrics": [{"Name": "JobDuration"}]}]},'
            ' "service": "s", "Job": "j", "JobDuration": [1.5, 2.5]}')

    points = parse_emf(line)

    assert len(points) == 4
    assert {p.dimensions for p in points} == {frozenset({("service", "s"), ("Job", "j")}),
                                              frozenset({("service", "s")})}
    assert parse_emf("plain log line") == []
    assert parse_emf('{"_aws": "broken"}') == []


def test_a_transition_is_notified_inside_its_evaluation() -> None:
    """Another evaluation (a test's ``evaluate_alarms`` beside the cloud's tick) or ``SetAlarmState`` waits for
    the notification: whoever finds the state already changed returns only once its page is published."""
    store, held = MetricStore(clock=lambda: NOW), []
    store.add([point(2, NOW - 5)])

    def notify(_: AlarmSpec, change: AlarmTransition) -> None:
        free = e._evaluating.acquire(blocking=False)
        held.append(not free)
        if free:
            e._evaluating.release()

    e = AlarmEvaluator([dlq_alarm()], store, on_transition=notify, clock=lambda: NOW)
    e.evaluate_all()
    e.set_state("dlq-alarm", "OK")
    e.evaluate_all()

    assert held == [True, True] and e.states["dlq-alarm"] == "ALARM"
