"""CloudWatch's ``GetMetricData`` over stored datapoints: how the local cloud answers that call.

moto's own ``GetMetricData`` knows Sum/Average/Minimum/Maximum/SampleCount and
little metric math; the operator console (``sqsjobs console``) asks for job
duration percentiles and a failure rate. This module computes the same answer
from raw datapoints, for :meth:`MetricStore.get_metric_data
<sqsjobs.local.metric_store.MetricStore.get_metric_data>` in-process and for
the local cloud's moto server (:mod:`sqsjobs.local.moto_cloudwatch`), so a
``boto3`` client pointed at the local cloud gets it over HTTP.

What it follows from CloudWatch:

- a ``MetricStat`` query names one metric exactly (namespace, name, the full
  dimension set); its datapoints fall in buckets of ``Period`` seconds from
  ``StartTime`` rounded down to the minute; empty buckets give no datapoint;
- statistics: ``Sum``, ``Average``, ``Minimum``, ``Maximum``, ``SampleCount``
  and percentiles ``pNN`` / ``pNN.N`` (exact nearest-rank over the raw values,
  where CloudWatch's are approximate);
- ``Expression`` queries are metric math (:mod:`sqsjobs.local.metric_math`)
  evaluated per timestamp over the timestamps of the series they can see; a
  missing value is ``None`` (``FILL`` replaces it);
- ``ReturnData: false`` hides a query from the answer, not from expressions;
- results are newest first unless ``ScanBy`` is ``TimestampAscending``.

Example:
    >>> points = {("n", "JobDuration", frozenset()): [(0.0, 10.0), (1.0, 30.0), (2.0, 20.0)]}
    >>> query = {"Id": "p50", "MetricStat": {"Metric": {"Namespace": "n", "MetricName": "JobDuration"},
    ...                                       "Period": 60, "Stat": "p50"}}
    >>> [r.values for r in metric_data(lambda ns, name, dims: points.get((ns, name, dims), []), [query],
    ...                                start=0.0, end=60.0)]
    [(20.0,)]
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqsjobs.local.metric_math import MathError, evaluate

Dimensions = frozenset[tuple[str, str]]
#: ``(namespace, metric name, dimensions) -> [(epoch seconds, value)]``
Lookup = Callable[[str, str, Dimensions], Sequence[tuple[float, float]]]

_PERCENTILE = re.compile(r"^p(\d{1,2}(?:\.\d+)?|100)$")
_UNKNOWN_ID = re.compile(r"unknown metric id '([^']+)'")
_BASIC = ("Sum", "Average", "Minimum", "Maximum", "SampleCount")


class MetricQueryError(ValueError):
    """Raised when a query asks for what this engine (or CloudWatch) cannot answer."""


@dataclass(frozen=True, kw_only=True)
class MetricResult:
    """One ``MetricDataResults`` entry: a query's id, label and datapoints.

    Example:
        >>> MetricResult(id="a", label="a", timestamps=(60.0,), values=(1.0,)).points()
        [(60.0, 1.0)]
    """

    id: str
    label: str
    timestamps: tuple[float, ...]
    values: tuple[float, ...]

    def points(self) -> list[tuple[float, float]]:
        """``(timestamp, value)`` pairs, in the answer's order."""
        return list(zip(self.timestamps, self.values, strict=True))


def statistic(name: str, values: Sequence[float]) -> float:
    """One CloudWatch statistic of a non-empty list of raw values.

    Example:
        >>> statistic("p95", [float(v) for v in range(1, 101)]), statistic("SampleCount", [3.0, 4.0])
        (95.0, 2.0)
    """
    if name == "Sum":
        return float(sum(values))
    if name == "Average":
        return float(sum(values)) / len(values)
    if name == "Minimum":
        return float(min(values))
    if name == "Maximum":
        return float(max(values))
    if name == "SampleCount":
        return float(len(values))
    match = _PERCENTILE.match(name)
    if match is None:
        raise MetricQueryError(f"statistic {name!r} is not supported locally; use one of {_BASIC} or pNN")
    ordered = sorted(values)
    rank = max(1, math.ceil(float(match.group(1)) / 100 * len(ordered)))
    return float(ordered[rank - 1])


def metric_data(lookup: Lookup, queries: Sequence[Mapping[str, Any]], *, start: float, end: float,
                descending: bool = True) -> list[MetricResult]:
    """Answer ``GetMetricData`` for ``queries`` between ``start`` and ``end`` (epoch seconds).

    ``queries`` have the request's shape (``Id``, ``MetricStat`` or
    ``Expression``, ``Label``, ``ReturnData``).
    """
    if end <= start:
        raise MetricQueryError("EndTime must be after StartTime")
    first = math.floor(start / 60) * 60  # CloudWatch rounds a recent StartTime down to the minute
    computed: dict[str, list[tuple[float, float]]] = {}
    labels: dict[str, str] = {}
    expressions: dict[str, str] = {}
    for query in queries:
        query_id = str(query["Id"])
        if "MetricStat" in query:
            computed[query_id] = _stat_series(lookup, query["MetricStat"], first=first, end=end)
            labels[query_id] = str(query.get("Label") or query["MetricStat"]["Metric"]["MetricName"])
        elif "Expression" in query:
            expressions[query_id] = str(query["Expression"])
            labels[query_id] = str(query.get("Label") or query_id)
        else:
            raise MetricQueryError(f"query {query_id!r} has neither MetricStat nor Expression")
    _evaluate_expressions(expressions, computed)
    results = []
    for query in queries:
        if not _returned(query):
            continue
        query_id = str(query["Id"])
        points = sorted(computed[query_id], reverse=descending)
        results.append(MetricResult(id=query_id, label=labels[query_id],
                                    timestamps=tuple(t for t, _ in points), values=tuple(v for _, v in points)))
    return results


def _stat_series(lookup: Lookup, stat: Mapping[str, Any], *, first: float, end: float) -> list[tuple[float, float]]:
    metric = stat["Metric"]
    dims: Dimensions = frozenset((str(d["Name"]), str(d["Value"])) for d in metric.get("Dimensions", []))
    period = int(stat["Period"])
    if period < 1:
        raise MetricQueryError(f"Period must be a positive number of seconds, got {period}")
    buckets: dict[float, list[float]] = {}
    for timestamp, value in lookup(str(metric["Namespace"]), str(metric["MetricName"]), dims):
        if first <= timestamp < end:
            bucket = first + (timestamp - first) // period * period
            buckets.setdefault(bucket, []).append(value)
    name = str(stat["Stat"])
    return [(bucket, statistic(name, values)) for bucket, values in sorted(buckets.items())]


def _evaluate_expressions(expressions: dict[str, str], computed: dict[str, list[tuple[float, float]]]) -> None:
    """Evaluate expressions in dependency order (an expression may use another's id)."""
    pending = dict(expressions)
    while pending:
        progressed = False
        for query_id, expression in list(pending.items()):
            try:
                computed[query_id] = _evaluate_series(expression, computed)
            except MathError as error:
                unknown = _UNKNOWN_ID.search(str(error))
                if unknown is not None and unknown.group(1) in pending:
                    continue  # it uses an expression not evaluated yet
                raise MetricQueryError(f"expression {query_id!r}: {error}") from error
            del pending[query_id]
            progressed = True
        if not progressed:
            raise MetricQueryError(f"expressions {sorted(pending)} refer to each other or to unknown ids")


def _evaluate_series(expression: str, computed: Mapping[str, list[tuple[float, float]]]) -> list[tuple[float, float]]:
    by_id = {query_id: dict(points) for query_id, points in computed.items()}
    timestamps = sorted({t for points in by_id.values() for t in points})
    series = []
    for timestamp in timestamps:
        value = evaluate(expression, {query_id: points.get(timestamp) for query_id, points in by_id.items()})
        if value is not None:
            series.append((timestamp, value))
    return series


def _returned(query: Mapping[str, Any]) -> bool:
    value = query.get("ReturnData", True)
    return value if isinstance(value, bool) else str(value).lower() != "false"
