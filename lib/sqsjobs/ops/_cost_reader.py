"""The cost view's figures from CloudWatch: each job's metric sums over a window, priced by :mod:`sqsjobs.ops._cost`.

Read by ``sqsjobs status`` and the console's overview, against AWS or the local cloud (whose moto server
answers ``GetMetricData`` from the datapoints it mirrors: :mod:`sqsjobs.local.moto_cloudwatch`). Three
kinds of call:

- one ``ListMetrics`` walk of the namespace: every series of the service, which is also what CloudWatch
  bills per metric (moto lists a series once per datum: they are counted once);
- ``GetMetricData`` sums over the whole window, one bucket each: per job (``{service, Job}``) its counters
  and usage metrics, per tenant (``{service, Job, Tenant}``) its counters and run time, and the service's
  batches and log bytes (``{service}``);
- ``GetMetricData`` sample counts by the hour, one query per series: the hours in which each received data,
  which is how CloudWatch prorates a custom metric's monthly price.

The window ends with the current hour, so its hours are CloudWatch's. Only series that exist are asked for:
CloudWatch lists a series that received data in the last two weeks (:data:`LISTED_DAYS`), so a longer window
misses what stopped before that, and the report says so in a note (the local cloud lists every series it holds).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from sqsjobs import _metrics as m
from sqsjobs.ops._cost import (
    COUNTED,
    DEFAULT_DAYS,
    DEFAULT_SENDS_PER_REQUEST,
    CostReport,
    JobCost,
    JobTotals,
    Prices,
    ServiceTotals,
    Usage,
    job_cost,
    price,
    tenant_cost,
)
from sqsjobs.ops._metrics_reader import Window, _get, _stat

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient

#: GetMetricData takes at most 500 queries per call
QUERIES_PER_CALL: Final = 500
#: ListMetrics leaves out a series that received no data in the last two weeks (CloudWatch's API reference)
LISTED_DAYS: Final = 14
#: a series' identity: its metric name and its dimensions, sorted
Series = tuple[str, tuple[tuple[str, str], ...]]


def read_costs(cloudwatch: CloudWatchClient, namespace: str, service: str, *, now: float, days: int = DEFAULT_DAYS,
               prices: Prices | None = None, sends_per_request: float = DEFAULT_SENDS_PER_REQUEST) -> CostReport:
    """What each job of ``service`` cost over the ``days`` up to the end of the current hour."""
    end = math.floor(now / 3600) * 3600 + 3600.0
    start = end - days * 86400
    window = Window(start=start, end=end, period=int(end - start), hours=days * 24)
    listed = [s for s in _listed(cloudwatch, namespace) if dict(s[1]).get(m.DIMENSION_SERVICE) == service]
    known = set(listed)
    wanted: list[tuple[str, Series]] = []  # (what it is for, series) of the sums
    for name, dims in listed:
        d = dict(dims)
        if set(d) == {m.DIMENSION_SERVICE, m.DIMENSION_JOB} and name in (*COUNTED, *m.USAGE, m.DURATION):
            wanted.append(("job", (name, dims)))
        elif set(d) == {m.DIMENSION_SERVICE, m.DIMENSION_JOB, m.DIMENSION_TENANT} and name in (*COUNTED, m.DURATION):
            wanted.append(("tenant", (name, dims)))
        elif set(d) == {m.DIMENSION_SERVICE} and name in m.SERVICE_USAGE:
            wanted.append(("service", (name, dims)))
    sums = _values(cloudwatch, namespace, [series for _, series in wanted], "Sum", window.period, window)
    hours_of = _values(cloudwatch, namespace, sorted(known), "SampleCount", 3600, window)

    counts: dict[str, dict[str, float]] = defaultdict(dict)
    usage: dict[str, dict[str, float]] = defaultdict(dict)
    durations: dict[str, float] = defaultdict(float)
    tenant_counts: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)
    tenant_durations: dict[tuple[str, str], float] = defaultdict(float)
    service_sums: dict[str, float] = {}
    for kind, series in wanted:
        name, dims = series
        d = dict(dims)
        total = sum(v for _, v in sums.get(series, ()))
        if kind == "service":
            service_sums[name] = total
            continue
        job = d[m.DIMENSION_JOB]
        if kind == "job":
            if name == m.DURATION:
                durations[job] = total
            elif name in m.USAGE:
                usage[job][name] = total
            else:
                counts[job][name] = total
        else:
            pair = (job, d[m.DIMENSION_TENANT])
            if name == m.DURATION:
                tenant_durations[pair] = total
            else:
                tenant_counts[pair][name] = total

    hours: dict[str | None, float] = defaultdict(float)  # per job (None: the service's own)
    tenant_hours: dict[tuple[str, str], float] = defaultdict(float)
    for series in known:
        d = dict(series[1])
        busy = sum(1 for _, v in hours_of.get(series, ()) if v > 0)
        hours[d.get(m.DIMENSION_JOB)] += busy
        if m.DIMENSION_TENANT in d and m.DIMENSION_JOB in d:
            tenant_hours[(d[m.DIMENSION_JOB], d[m.DIMENSION_TENANT])] += busy

    jobs = sorted(set(counts) | set(usage))
    totals = {job: JobTotals(job=job, counts=counts[job], usage=usage[job], metric_hours=hours[job],
                             duration_ms=durations[job]) for job in jobs}
    shared = ServiceTotals(batches=service_sums.get(m.BATCHES, 0.0), log_bytes=service_sums.get(m.LOG_BYTES, 0.0),
                           deliveries=sum(t.deliveries for t in totals.values()), metric_hours=hours[None])
    rows = [job_cost(t, shared, prices=prices, sends_per_request=sends_per_request) for t in totals.values()]
    by_job = {row.job: row for row in rows}
    tenants = []
    for (job, tenant), tcounts in sorted(tenant_counts.items()):
        if job in by_job:
            own = JobTotals(job=job, tenant=tenant, counts=tcounts, metric_hours=tenant_hours[(job, tenant)],
                            duration_ms=tenant_durations[(job, tenant)])
            tenants.append(tenant_cost(own, by_job[job], totals[job], prices=prices))
    return CostReport(
        days=days, start=start, end=end, prices=prices or Prices(), sends_per_request=sends_per_request,
        jobs=tuple(sorted(rows, key=lambda r: (-r.cost.total_usd, r.job))),
        tenants=tuple(sorted(tenants, key=lambda r: (-r.cost.total_usd, r.job, r.tenant or ""))),
        service_metrics_usd=price(Usage(metric_hours=hours[None]), prices).metrics_usd,
        notes=tuple(_notes(rows, usage, sends_per_request, days)),
    )


def _notes(rows: Sequence[JobCost], usage: dict[str, dict[str, float]], sends_per_request: float,
           days: int) -> list[str]:
    notes = []
    if days > LISTED_DAYS:
        notes.append(f"CloudWatch lists only the series that received data in the last {LISTED_DAYS} days: a job "
                     f"(or tenant) that stopped before that is missing from these {days} days")
    unmetered = [row.job for row in rows if row.jobs and not usage[row.job].get(m.LAMBDA_GB_SECONDS)]
    if unmetered:
        notes.append(f"no Lambda time for {', '.join(unmetered)}: its workers did not write {m.LAMBDA_GB_SECONDS} "
                     "(older than this version, not on Lambda, or SQSJOBS_COST_METRICS=false)")
    if sends_per_request == DEFAULT_SENDS_PER_REQUEST:
        notes.append("the producer's sends are priced one SendMessage a job; pass --sends-per-request 10 when "
                     "jobs are enqueued ten at a time (enqueue_many)")
    return notes


def _listed(cloudwatch: CloudWatchClient, namespace: str) -> list[Series]:
    """Every series of ``namespace``, once each (moto lists a series once per datum written)."""
    found: set[Series] = set()
    for page in cloudwatch.get_paginator("list_metrics").paginate(Namespace=namespace):
        for metric in page.get("Metrics", []):
            dims = tuple(sorted((d["Name"], d["Value"]) for d in metric.get("Dimensions", [])))
            found.add((metric.get("MetricName", ""), dims))
    return sorted(found)


def _values(cloudwatch: CloudWatchClient, namespace: str, series: Sequence[Series], stat: str, period: int,
            window: Window) -> dict[Series, list[tuple[float, float]]]:
    """``stat`` of each series by ``period`` over ``window``, 500 queries a call."""
    queries = [_stat(f"q{i}", namespace, name, dict(dims), stat, period) for i, (name, dims) in enumerate(series)]
    results: dict[str, list[tuple[float, float]]] = {}
    for first in range(0, len(queries), QUERIES_PER_CALL):
        results.update(_get(cloudwatch, queries[first:first + QUERIES_PER_CALL], window))
    return {s: results.get(f"q{i}", []) for i, s in enumerate(series)}
