"""The worker's EMF metrics through CloudWatch ``GetMetricData``: throughput, failure rate, per-job figures.

Read by the console's charts and jobs page, and by ``sqsjobs status`` (the
deliveries acknowledged without running: cancelled and expired, per job).

The worker writes each count and duration with two dimension sets,
``{service}`` and ``{service, Job}`` (:mod:`sqsjobs._metrics`): the charts
read the service-wide set, the per-job table the other. Job names are found
with ``ListMetrics``. The local cloud answers both calls the same way
(:mod:`sqsjobs.local.moto_cloudwatch`).

Example:
    >>> window = Window.last(hours=3, now=1_767_225_725.0)
    >>> (window.start, window.end, window.period)
    (1767214920.0, 1767225780.0, 60)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final

from sqsjobs import _metrics as m

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

#: GetMetricData takes at most 500 queries per call
_QUERIES_PER_CALL: Final = 500
_PER_JOB: Final = (("succeeded", m.SUCCEEDED, "Sum"), ("failed", m.FAILED, "Sum"), ("retried", m.RETRIED, "Sum"),
                   ("dead_lettered", m.DEAD_LETTERED, "Sum"), ("duplicates", m.DUPLICATE, "Sum"),
                   ("cancelled", m.CANCELLED, "Sum"), ("expired", m.EXPIRED, "Sum"),
                   ("p50_ms", m.DURATION, "p50"), ("p95_ms", m.DURATION, "p95"))


@dataclass(frozen=True, kw_only=True)
class Window:
    """A chart window: whole minutes from ``start`` to ``end`` (the current minute included), in ``period`` buckets."""

    start: float
    end: float
    period: int
    hours: int

    @classmethod
    def last(cls, *, hours: int, now: float) -> Window:
        """The last ``hours`` hours up to the end of the current minute; at most ~180 buckets."""
        end = math.floor(now / 60) * 60 + 60.0
        period = max(60, math.ceil(hours * 3600 / 180 / 60) * 60)
        return cls(start=end - hours * 3600 - 60, end=end, period=period, hours=hours)


@dataclass(frozen=True, kw_only=True)
class Throughput:
    """Service-wide series: runs per minute and failure rate (%) per bucket."""

    per_minute: tuple[tuple[float, float], ...]
    failure_rate: tuple[tuple[float, float], ...]


@dataclass(frozen=True, kw_only=True)
class JobFigures:
    """One job's counts and duration percentiles over a window.

    Example:
        >>> JobFigures(job="a", succeeded=9, failed=1, retried=1, dead_lettered=0, duplicates=0,
        ...            cancelled=2, expired=0, p50_ms=12.0, p95_ms=40.0).failure_rate
        10.0
    """

    job: str
    succeeded: int
    failed: int
    retried: int
    dead_lettered: int
    duplicates: int
    #: deliveries acknowledged without running: the key was cancelled (``app.cancel``), or older than ``expires_in``
    cancelled: int
    expired: int
    p50_ms: float | None
    p95_ms: float | None

    @property
    def failure_rate(self) -> float | None:
        """Failed runs as a percentage of runs, or None without runs."""
        runs = self.succeeded + self.failed
        return 100.0 * self.failed / runs if runs else None


def services(cloudwatch: CloudWatchClient, namespace: str) -> list[str]:
    """The ``service`` values the worker's metrics carry in ``namespace`` (usually one)."""
    found = set()
    for dims in _metric_dimensions(cloudwatch, namespace, m.SUCCEEDED) + _metric_dimensions(cloudwatch, namespace,
                                                                                              m.FAILED):
        if set(dims) == {m.DIMENSION_SERVICE}:
            found.add(dims[m.DIMENSION_SERVICE])
    return sorted(found)


def pick_service(cloudwatch: CloudWatchClient, namespace: str, service: str | None, notes: list[str]) -> str | None:
    """``service`` (``--service``) when given, else the only service with metrics (a note says what was chosen)."""
    if service:
        return service
    found = services(cloudwatch, namespace)
    if not found:
        notes.append(f"no job metrics in namespace {namespace!r} yet: they start with the first job")
        return None
    if len(found) > 1:
        notes.append(f"metrics of several services ({', '.join(found)}): showing {found[0]}; pass --service")
    return found[0]


def job_names(cloudwatch: CloudWatchClient, namespace: str, service: str) -> list[str]:
    """Every job of ``service`` that has written a count or a duration."""
    jobs = set()
    for name in (m.SUCCEEDED, m.FAILED, m.DEAD_LETTERED, m.DURATION):
        for dims in _metric_dimensions(cloudwatch, namespace, name):
            if set(dims) == {m.DIMENSION_SERVICE, m.DIMENSION_JOB} and dims[m.DIMENSION_SERVICE] == service:
                jobs.add(dims[m.DIMENSION_JOB])
    return sorted(jobs)


def throughput(cloudwatch: CloudWatchClient, namespace: str, service: str, window: Window) -> Throughput:
    """Runs per minute and the failure rate, the failure-rate alarm's own arithmetic per bucket."""
    dims = {m.DIMENSION_SERVICE: service}
    queries: list[dict[str, Any]] = [
        _stat("ok", namespace, m.SUCCEEDED, dims, "Sum", window.period, returned=False),
        _stat("failed", namespace, m.FAILED, dims, "Sum", window.period, returned=False),
        {"Id": "runs", "Expression": "FILL(ok, 0) + FILL(failed, 0)", "ReturnData": False},
        {"Id": "perminute", "Expression": f"runs * 60 / {window.period}", "Label": "runs per minute"},
        {"Id": "rate", "Expression": "IF(runs > 0, 100 * FILL(failed, 0) / runs, 0)", "Label": "failure rate (%)"},
    ]
    results = _get(cloudwatch, queries, window)
    return Throughput(per_minute=tuple(results.get("perminute", ())), failure_rate=tuple(results.get("rate", ())))


def job_figures(cloudwatch: CloudWatchClient, namespace: str, service: str, jobs: Sequence[str],
                window: Window) -> list[JobFigures]:
    """Counts and p50/p95 durations of each job over the whole window (one bucket per query)."""
    period = int(window.end - window.start)
    queries = [
        _stat(f"{field}{index}", namespace, metric, {m.DIMENSION_SERVICE: service, m.DIMENSION_JOB: job}, stat, period)
        for index, job in enumerate(jobs) for field, metric, stat in _PER_JOB
    ]
    results: dict[str, list[tuple[float, float]]] = {}
    for start in range(0, len(queries), _QUERIES_PER_CALL):
        results.update(_get(cloudwatch, queries[start : start + _QUERIES_PER_CALL], window))

    def total(field: str, index: int) -> float | None:
        points = results.get(f"{field}{index}", [])
        return sum(v for _, v in points) if points else None

    rows = []
    for index, job in enumerate(jobs):
        counts = {field: int(total(field, index) or 0) for field, _, stat in _PER_JOB if stat == "Sum"}
        rows.append(JobFigures(job=job, **counts, p50_ms=total("p50_ms", index), p95_ms=total("p95_ms", index)))
    return rows


@dataclass(frozen=True, kw_only=True)
class SkippedJob:
    """One job's deliveries acknowledged without running over a window: its key was cancelled, or it expired."""

    job: str
    cancelled: int
    expired: int


def skipped_jobs(cloudwatch: CloudWatchClient, namespace: str, window: Window) -> tuple[SkippedJob, ...]:
    """Per job (every service in ``namespace``), the ``JobCancelled`` and ``JobExpired`` totals over ``window``.

    Jobs with neither are left out. ``ListMetrics`` finds the ``{service, Job}``
    series of both metrics; one ``GetMetricData`` call per 500 of them sums them.
    """
    series: list[tuple[str, str, dict[str, str]]] = []
    for field, metric in (("cancelled", m.CANCELLED), ("expired", m.EXPIRED)):
        seen: set[tuple[tuple[str, str], ...]] = set()  # moto lists a series once per datum written
        for dims in _metric_dimensions(cloudwatch, namespace, metric):
            identity = tuple(sorted(dims.items()))
            if set(dims) == {m.DIMENSION_SERVICE, m.DIMENSION_JOB} and identity not in seen:
                seen.add(identity)
                series.append((field, metric, dims))
    if not series:
        return ()
    period = int(window.end - window.start)
    queries = [_stat(f"q{i}", namespace, metric, dims, "Sum", period) for i, (_, metric, dims) in enumerate(series)]
    results: dict[str, list[tuple[float, float]]] = {}
    for start in range(0, len(queries), _QUERIES_PER_CALL):
        results.update(_get(cloudwatch, queries[start : start + _QUERIES_PER_CALL], window))
    totals: dict[str, dict[str, int]] = {}
    for i, (field, _, dims) in enumerate(series):
        count = int(sum(v for _, v in results.get(f"q{i}", [])))
        counts = totals.setdefault(dims[m.DIMENSION_JOB], {"cancelled": 0, "expired": 0})
        counts[field] += count
    return tuple(SkippedJob(job=job, **counts) for job, counts in sorted(totals.items())
                 if counts["cancelled"] or counts["expired"])


def _stat(query_id: str, namespace: str, metric: str, dims: dict[str, str], stat: str, period: int, *,
          returned: bool = True) -> dict[str, Any]:
    return {
        "Id": query_id,
        "MetricStat": {"Metric": {"Namespace": namespace, "MetricName": metric,
                                  "Dimensions": [{"Name": k, "Value": v} for k, v in sorted(dims.items())]},
                       "Period": period, "Stat": stat},
        "ReturnData": returned,
    }


def _get(cloudwatch: CloudWatchClient, queries: list[dict[str, Any]], window: Window) -> dict[str, list[tuple[float,
                                                                                                              float]]]:
    series: dict[str, list[tuple[float, float]]] = {}
    kwargs: dict[str, Any] = {
        "MetricDataQueries": queries,
        "StartTime": datetime.fromtimestamp(window.start, UTC),
        "EndTime": datetime.fromtimestamp(window.end, UTC),
        "ScanBy": "TimestampAscending",
    }
    while True:
        response = cloudwatch.get_metric_data(**kwargs)
        for result in response.get("MetricDataResults", []):
            points = zip(result.get("Timestamps", []), result.get("Values", []), strict=False)
            series.setdefault(result.get("Id", ""), []).extend((t.timestamp(), float(v)) for t, v in points)
        token = response.get("NextToken")
        if not token:
            return series
        kwargs["NextToken"] = token


def _metric_dimensions(cloudwatch: CloudWatchClient, namespace: str, name: str) -> list[dict[str, str]]:
    found = []
    for page in cloudwatch.get_paginator("list_metrics").paginate(Namespace=namespace, MetricName=name):
        for metric in page.get("Metrics", []):
            found.append({d["Name"]: d["Value"] for d in metric.get("Dimensions", [])})
    return found
