"""The local cloud's own copy of metric datapoints, fed by EMF lines and samples.

moto stores PutMetricData but answers metric math with nothing, so alarms are
evaluated from this store (the same points are also published to moto, where
``GetMetricStatistics`` and the CLI can see them).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqsjobs.local.metric_query import MetricResult

Dimensions = frozenset[tuple[str, str]]

_MAX_AGE_S = 3 * 3600  # alarms here look back at most a few periods


@dataclass(frozen=True, kw_only=True)
class Datapoint:
    """One value of one metric at one time.

    Example:
        >>> Datapoint(namespace="sqsjobs", name="JobFailed", dimensions=frozenset(), timestamp=0.0, value=1.0).value
        1.0
    """

    namespace: str
    name: str
    dimensions: Dimensions
    timestamp: float
    value: float
    unit: str = "None"


def dimensions(pairs: Mapping[str, Any] | Iterable[Mapping[str, Any]]) -> Dimensions:
    """Dimensions from ``{"k": "v"}`` or CloudWatch's ``[{"Name": k, "Value": v}]``.

    Example:
        >>> sorted(dimensions([{"Name": "service", "Value": "demo"}]))
        [('service', 'demo')]
    """
    if isinstance(pairs, Mapping):
        return frozenset((str(k), str(v)) for k, v in pairs.items())
    return frozenset((str(d["Name"]), str(d["Value"])) for d in pairs)


def parse_emf(line: str) -> list[Datapoint]:
    """The datapoints of one Embedded Metric Format log line (none if it is not EMF).

    Example:
        >>> line = ('{"_aws": {"Timestamp": 1000, "CloudWatchMetrics": [{"Namespace": "n",'
        ...         ' "Dimensions": [["service"]], "Metrics": [{"Name": "JobFailed"}]}]},'
        ...         ' "service": "s", "JobFailed": 2}')
        >>> [(p.name, p.value) for p in parse_emf(line)]
        [('JobFailed', 2.0)]
    """
    text = line.strip()
    if not text.startswith("{") or '"_aws"' not in text:
        return []
    try:
        document = json.loads(text)
        meta = document["_aws"]
        timestamp = float(meta.get("Timestamp", time.time() * 1000)) / 1000
        points: list[Datapoint] = []
        for directive in meta["CloudWatchMetrics"]:
            namespace = str(directive["Namespace"])
            for dimension_set in directive.get("Dimensions", [[]]):
                dims = frozenset((str(k), str(document[k])) for k in dimension_set)
                for metric in directive["Metrics"]:
                    raw = document.get(metric["Name"])
                    values = raw if isinstance(raw, list) else [raw]
                    for value in values:
                        if isinstance(value, (int, float)):
                            points.append(
                                Datapoint(namespace=namespace, name=str(metric["Name"]), dimensions=dims,
                                          timestamp=timestamp, value=float(value),
                                          unit=str(metric.get("Unit", "None")))
                            )
        return points
    except (ValueError, KeyError, TypeError, AttributeError):
        return []  # not EMF after all: it stays an ordinary log line


class MetricStore:
    """Thread-safe datapoints with a query by metric identity and time window.

    Example:
        >>> store, now = MetricStore(), time.time()
        >>> store.add([Datapoint(namespace="n", name="m", dimensions=frozenset(), timestamp=now, value=1.0)])
        >>> store.values("n", "m", frozenset(), start=now - 60, end=now + 1)
        [1.0]
    """

    def __init__(self, *, clock: Callable[[], float] = time.time) -> None:
        self._points: dict[tuple[str, str, Dimensions], list[tuple[float, float]]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def add(self, points: Iterable[Datapoint]) -> None:
        """Store ``points``; points older than a few hours (by ``clock``) are dropped as new ones arrive."""
        horizon = self._clock() - _MAX_AGE_S
        with self._lock:
            for p in points:
                series = self._points.setdefault((p.namespace, p.name, p.dimensions), [])
                series.append((p.timestamp, p.value))
                if series[0][0] < horizon:
                    series[:] = [(t, v) for t, v in series if t >= horizon]

    def values(self, namespace: str, name: str, dims: Dimensions, *, start: float, end: float) -> list[float]:
        """Values of the exact metric ``(namespace, name, dims)`` with ``start <= t < end``."""
        with self._lock:
            series = list(self._points.get((namespace, name, dims), ()))
        return [v for t, v in series if start <= t < end]

    def series(self) -> dict[tuple[str, str, Dimensions], list[tuple[float, float]]]:
        """A copy of every series: ``(namespace, name, dimensions) -> [(timestamp, value)]``."""
        with self._lock:
            return {key: list(points) for key, points in self._points.items()}

    def get_metric_data(self, queries: list[dict[str, Any]], *, start: float, end: float,
                        descending: bool = True) -> list[MetricResult]:
        """CloudWatch's ``GetMetricData`` over this store (percentiles and metric math included).

        The local cloud's moto server answers the same call the same way
        (:mod:`sqsjobs.local.moto_cloudwatch`).

        Example:
            >>> store, now = MetricStore(), time.time()
            >>> store.add([Datapoint(namespace="n", name="m", dimensions=frozenset(), timestamp=now, value=v)
            ...            for v in (1.0, 5.0)])
            >>> query = {"Id": "top", "MetricStat": {"Metric": {"Namespace": "n", "MetricName": "m"},
            ...                                       "Period": 3600, "Stat": "Maximum"}}
            >>> [r.values for r in store.get_metric_data([query], start=now - 60, end=now + 60)]
            [(5.0,)]
        """
        from sqsjobs.local.metric_query import metric_data

        series = self.series()
        return metric_data(lambda ns, name, dims: series.get((ns, name, dims), ()), queries,
                           start=start, end=end, descending=descending)

    def total(self, namespace: str, name: str) -> float:
        """Sum of every value of ``name`` across its dimension sets without a ``Job`` split (for reports)."""
        with self._lock:
            return sum(v for (ns, n, _), series in self._points.items() if ns == namespace and n == name
                       for _, v in series)
