"""GetMetricData over stored datapoints: statistics, buckets, metric math, what is returned."""

from __future__ import annotations

import time
from typing import Any

import pytest

from sqsjobs.local.metric_query import MetricQueryError, MetricResult, metric_data, statistic
from sqsjobs.local.metric_store import Datapoint, MetricStore

NS = "sqsjobs"
SERVICE = frozenset({("service", "demo")})
JOB = frozenset({("service", "demo"), ("Job", "invoice-email")})
T0 = 1_767_225_600.0  # a whole minute


def stat(query_id: str, name: str, dims: frozenset[tuple[str, str]], stat_name: str, period: int = 60,
         **extra: Any) -> dict[str, Any]:
    return {"Id": query_id, "MetricStat": {"Metric": {"Namespace": NS, "MetricName": name,
                                                      "Dimensions": [{"Name": k, "Value": v} for k, v in dims]},
                                           "Period": period, "Stat": stat_name}, **extra}


class Points:
    """Datapoints at fixed times (MetricStore itself drops points older than a few hours)."""

    def __init__(self, points: list[tuple[str, frozenset[tuple[str, str]], float, float]]) -> None:
        self.series: dict[tuple[str, str, frozenset[tuple[str, str]]], list[tuple[float, float]]] = {}
        for name, dims, t, v in points:
            self.series.setdefault((NS, name, dims), []).append((t, v))

    def get_metric_data(self, queries: list[dict[str, Any]], *, start: float, end: float,
                        descending: bool = True) -> list[MetricResult]:
        return metric_data(lambda ns, name, dims: self.series.get((ns, name, dims), []), queries,
                           start=start, end=end, descending=descending)


def store_with(points: list[tuple[str, frozenset[tuple[str, str]], float, float]]) -> Points:
    return Points(points)


@pytest.mark.parametrize(("name", "expected"), [
    ("Sum", 5050.0), ("Average", 50.5), ("Minimum", 1.0), ("Maximum", 100.0), ("SampleCount", 100.0),
    ("p50", 50.0), ("p95", 95.0), ("p99.9", 100.0), ("p100", 100.0),
])
def test_statistics_of_one_hundred_values(name: str, expected: float) -> None:
    assert statistic(name, [float(v) for v in range(100, 0, -1)]) == expected


def test_an_unknown_statistic_is_an_error_naming_it() -> None:
    with pytest.raises(MetricQueryError, match="'IQM'"):
        statistic("IQM", [1.0])


def test_values_fall_in_period_buckets_from_the_start_minute_and_empty_buckets_are_absent() -> None:
    store = store_with([("JobSucceeded", SERVICE, T0 + 5, 1.0), ("JobSucceeded", SERVICE, T0 + 50, 2.0),
                        ("JobSucceeded", SERVICE, T0 + 190, 4.0), ("JobSucceeded", SERVICE, T0 + 400, 8.0)])

    [result] = store.get_metric_data([stat("s", "JobSucceeded", SERVICE, "Sum")], start=T0 + 30, end=T0 + 300,
                                     descending=False)

    # StartTime T0+30 is rounded down to T0; T0+400 is past EndTime.
    assert result.points() == [(T0, 3.0), (T0 + 180, 4.0)]


def test_a_metric_is_named_by_its_full_dimension_set() -> None:
    store = store_with([("JobSucceeded", SERVICE, T0 + 1, 1.0), ("JobSucceeded", JOB, T0 + 1, 10.0)])

    [service_wide, per_job] = store.get_metric_data(
        [stat("a", "JobSucceeded", SERVICE, "Sum"), stat("b", "JobSucceeded", JOB, "Sum")], start=T0, end=T0 + 60)

    assert (service_wide.values, per_job.values) == ((1.0,), (10.0,))


def test_newest_first_unless_ascending_is_asked() -> None:
    store = store_with([("JobSucceeded", SERVICE, T0 + 1, 1.0), ("JobSucceeded", SERVICE, T0 + 61, 2.0)])
    query = [stat("s", "JobSucceeded", SERVICE, "Sum")]

    assert store.get_metric_data(query, start=T0, end=T0 + 120)[0].values == (2.0, 1.0)
    assert store.get_metric_data(query, start=T0, end=T0 + 120, descending=False)[0].values == (1.0, 2.0)


def test_the_template_failure_rate_in_any_query_order_with_hidden_inputs() -> None:
    # Minute 0: 9 ok, 1 failed; minute 1: only successes (no JobFailed point at all).
    store = store_with([("JobSucceeded", SERVICE, T0 + 1, 9.0), ("JobFailed", SERVICE, T0 + 2, 1.0),
                        ("JobSucceeded", SERVICE, T0 + 61, 4.0)])
    queries = [
        {"Id": "rate", "Expression": "IF(runs > 0, 100 * failures / runs, 0)", "Label": "Failure rate (%)"},
        {"Id": "runs", "Expression": "FILL(succeeded, 0) + failures", "ReturnData": False},
        {"Id": "failures", "Expression": "FILL(failed, 0)", "ReturnData": False},
        stat("succeeded", "JobSucceeded", SERVICE, "Sum", ReturnData=False),
        stat("failed", "JobFailed", SERVICE, "Sum", ReturnData="false"),
    ]

    [rate] = store.get_metric_data(queries, start=T0, end=T0 + 120, descending=False)

    assert (rate.id, rate.label) == ("rate", "Failure rate (%)")
    assert rate.points() == [(T0, 10.0), (T0 + 60, 0.0)]


def test_percentiles_per_period() -> None:
    durations = [("JobDuration", JOB, T0 + i % 60, float(i)) for i in range(1, 101)]
    store = store_with(durations)

    results = store.get_metric_data([stat("p50", "JobDuration", JOB, "p50", period=3600),
                                     stat("p95", "JobDuration", JOB, "p95", period=3600)], start=T0, end=T0 + 3600)

    assert [r.values for r in results] == [(50.0,), (95.0,)]


@pytest.mark.parametrize(("queries", "message"), [
    ([{"Id": "x", "Expression": "a + s"}, {"Id": "a", "Expression": "x"}, stat("s", "JobSucceeded", SERVICE, "Sum")],
     "refer to each other"),
    ([{"Id": "x"}], "neither MetricStat nor Expression"),
    ([{"Id": "x", "Expression": "ANOMALY_DETECTION_BAND(s)"}, stat("s", "JobSucceeded", SERVICE, "Sum")],
     "not supported"),
])
def test_queries_it_cannot_answer_are_errors(queries: list[dict[str, Any]], message: str) -> None:
    store = store_with([("JobSucceeded", SERVICE, T0 + 1, 1.0)])

    with pytest.raises(MetricQueryError, match=message):
        store.get_metric_data(queries, start=T0, end=T0 + 60)


def test_end_before_start_is_an_error() -> None:
    with pytest.raises(MetricQueryError, match="after StartTime"):
        metric_data(lambda ns, name, dims: [], [], start=T0, end=T0)


def test_the_local_clouds_metric_store_answers_the_same_call() -> None:
    now = time.time()
    store = MetricStore()
    store.add([Datapoint(namespace=NS, name="JobDuration", dimensions=JOB, timestamp=now, value=float(v))
               for v in range(1, 21)])

    [p95] = store.get_metric_data([stat("p95", "JobDuration", JOB, "p95", period=3600)], start=now - 60,
                                  end=now + 60)

    assert p95.values == (19.0,)
