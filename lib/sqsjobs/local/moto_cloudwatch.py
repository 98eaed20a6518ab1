"""The local cloud's moto server answers ``GetMetricData`` with :mod:`sqsjobs.local.metric_query`.

The local cloud mirrors every datapoint it collects (the worker's EMF lines,
queue samples, Lambda's invocation metrics) into moto with ``PutMetricData``
(:mod:`sqsjobs.local.telemetry`). moto stores them but answers
``GetMetricData`` without percentiles and with little metric math, so the
moto child process (:mod:`sqsjobs.local._child`) replaces that one method
before it serves: any client of the local cloud, such as ``sqsjobs console``,
then gets the same answer as :meth:`MetricStore.get_metric_data
<sqsjobs.local.metric_store.MetricStore.get_metric_data>` over real HTTP.

Only single values (``Value``/``Values``) are seen; datapoints sent as
``StatisticValues`` carry no raw values to rank and are left out.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from sqsjobs.local.metric_query import Dimensions, MetricQueryError, metric_data


def install() -> None:
    """Replace moto's ``CloudWatchBackend.get_metric_data`` in this process (only the moto child calls it)."""
    from moto.cloudwatch.models import CloudWatchBackend

    CloudWatchBackend.get_metric_data = get_metric_data  # type: ignore[method-assign]


def get_metric_data(self: Any, queries: list[dict[str, Any]], start_time: datetime, end_time: datetime,
                    scan_by: str = "TimestampDescending") -> list[dict[str, Any]]:
    """``CloudWatchBackend.get_metric_data`` computed by :func:`sqsjobs.local.metric_query.metric_data`."""
    from moto.cloudwatch.exceptions import ValidationError
    from moto.cloudwatch.models import MetricDatum

    index: dict[tuple[str, str, Dimensions], list[tuple[float, float]]] = defaultdict(list)
    for datum in self.get_all_metrics():
        if isinstance(datum, MetricDatum):
            dims = frozenset((str(d.name), str(d.value)) for d in datum.dimensions)
            index[(datum.namespace, datum.name, dims)].append((_epoch(datum.timestamp), float(datum.value)))
    try:
        results = metric_data(lambda ns, name, dims: index.get((ns, name, dims), ()), queries,
                              start=_epoch(start_time), end=_epoch(end_time),
                              descending=scan_by != "TimestampAscending")
    except MetricQueryError as error:
        raise ValidationError(str(error)) from error
    return [
        {"id": r.id, "label": r.label, "values": list(r.values),
         "timestamps": [datetime.fromtimestamp(t, UTC).replace(tzinfo=None) for t in r.timestamps],
         "status_code": "Complete"}
        for r in results
    ]


def _epoch(value: datetime) -> float:
    """moto keeps naive datetimes in UTC."""
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
