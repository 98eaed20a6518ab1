"""What the jobs cost: the prices, the usage they apply to, and the one arithmetic between them (issue 34).

One model for three readers: ``bench/cost.py`` (the cost table of BENCHMARKS.md, from measured figures),
``sqsjobs status`` and the console's overview (from the worker's metrics, :mod:`sqsjobs.ops._cost_reader`).
Whatever they start from, they build a :class:`Usage` (AWS's own units: GB-seconds, requests, write
units...) and :func:`price` it, so the same usage prints the same dollars everywhere.

**Prices** are parameters (:class:`Prices`, every field overridable); the defaults are AWS's on-demand list
prices in us-east-1, first pricing tier, without free tiers (which are per account, not per job).
:data:`PRICE_SOURCES` says where each was read and when.

**From the worker's metrics to usage** (:func:`job_usage`), per job over a window:

- Lambda: ``JobLambdaGbSeconds`` (each delivery's share of its invocation's billed time, times memory:
  ``worker/_batch_metrics.py``); requests: ``WorkerBatches`` (one an invocation), shared by deliveries;
- DynamoDB: ``JobWriteUnits`` and ``JobReadUnits`` (what the worker's requests billed, refused conditional
  writes included: ``_usage.py``);
- SQS: ``JobSqsRequests`` (Lambda's poller and the worker's own calls, per 64 KiB chunk), plus the
  producer's sends, which the worker cannot see: one request per ``sends_per_request`` messages sent
  (1: every ``enqueue`` its own ``SendMessage``; 10: all through ``enqueue_many``), one message a job that
  ended or was delivered again (a duplicate), and one a schedule that fired;
- EventBridge Scheduler: ``JobScheduled``, each schedule billed when it fires;
- CloudWatch: the log bytes of the EMF lines (``WorkerLogBytes``, shared by deliveries), and the custom
  metrics themselves, billed per metric and prorated by the hour (:data:`HOURS_PER_MONTH`): the hours in
  which each of the job's series received data.

A job's *jobs* are the deliveries that ended it (succeeded, dead-lettered, cancelled, expired, superseded);
what retries, duplicates and deferrals cost is in its price per million. The price per million leaves the
metrics' hourly charge out (it does not grow with the jobs); the window's total has it.

Example:
    >>> usage = Usage(lambda_gb_seconds=1_750.0, lambda_requests=100_000, write_units=2_000_000,
    ...               sqs_requests=300_000, log_bytes=51e6)
    >>> cost = price(usage)
    >>> round(cost.lambda_usd, 4), round(cost.dynamodb_usd, 3), round(cost.total_usd, 4)
    (0.0433, 1.25, 1.4388)
    >>> format_jobs(1_234_567), format_jobs(250_000), format_jobs(12_345), format_usd(1.7149), format_usd(0.00042)
    ('1.2 M', '250 k', '12.3 k', '$1.71', '$0.00042')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Final

from sqsjobs import _metrics as m
from sqsjobs._errors import ConfigurationError

#: CloudWatch prorates a custom metric's monthly price by the hour
HOURS_PER_MONTH: Final = 730
#: the window the status and the console price by default
DEFAULT_DAYS: Final = 7
#: the producer's messages per SendMessage(Batch) the view assumes by default: every enqueue on its own
DEFAULT_SENDS_PER_REQUEST: Final = 1.0

#: the counters whose deliveries ended the job
ENDED: Final = (m.SUCCEEDED, m.DEAD_LETTERED, m.CANCELLED, m.EXPIRED, m.SUPERSEDED)
#: one counter per delivery (its final outcome): a delivery's share of what a batch cost is counted by these
DELIVERED: Final = (*ENDED, m.DUPLICATE, m.RETRIED, m.DEFERRED)
#: the counters the cost view reads
COUNTED: Final = (*DELIVERED, m.SCHEDULED)


@dataclass(frozen=True, kw_only=True)
class Prices:
    """USD per unit AWS bills; the defaults are us-east-1's (:data:`PRICE_SOURCES`).

    Example:
        >>> Prices().with_overrides({"lambda_gb_second": "0.0000166667"}).lambda_gb_second  # x86_64
        1.66667e-05
    """

    #: per GB-second of Lambda on arm64 (the template's architecture; x86_64: 0.0000166667)
    lambda_gb_second: float = 0.0000133334
    #: per Lambda invocation
    lambda_request: float = 0.20 / 1e6
    #: per DynamoDB on-demand write request unit, and read request unit
    dynamodb_write_unit: float = 0.625 / 1e6
    dynamodb_read_unit: float = 0.125 / 1e6
    #: per SQS request of a standard queue (64 KiB chunk); FIFO queues: 0.50 per million
    sqs_request: float = 0.40 / 1e6
    #: per EventBridge Scheduler invocation (a schedule firing)
    scheduler_invocation: float = 1.00 / 1e6
    #: per GB of CloudWatch Logs ingested (standard log class)
    logs_gb: float = 0.50
    #: per CloudWatch custom metric and month (the first 10,000 metrics), prorated by the hour
    metric_month: float = 0.30

    def with_overrides(self, overrides: Mapping[str, str | float]) -> Prices:
        """These prices with some replaced (``--price NAME=USD``); a ``ConfigurationError`` names a bad one."""
        names = {f.name for f in fields(self)}
        changed: dict[str, float] = {}
        for name, raw in overrides.items():
            if name not in names:
                raise ConfigurationError(f"unknown price {name!r}; one of: {', '.join(sorted(names))}")
            try:
                value = float(raw)
            except ValueError:
                raise ConfigurationError(f"price {name}={raw!r} is not a number of dollars") from None
            if not math.isfinite(value) or value < 0:
                raise ConfigurationError(f"price {name}={raw!r} must be a dollar amount of 0 or more")
            changed[name] = value
        return replace(self, **changed)


def parse_prices(specs: list[str] | tuple[str, ...]) -> Prices:
    """Prices with ``NAME=USD`` overrides (``--price``), the rest us-east-1's.

    Example:
        >>> parse_prices(["sqs_request=0.0000005"]).sqs_request  # a FIFO queue
        5e-07
    """
    overrides: dict[str, str] = {}
    for spec in specs:
        name, sep, value = spec.partition("=")
        if not sep or not name.strip():
            raise ConfigurationError(f"--price takes NAME=USD, got {spec!r}")
        overrides[name.strip()] = value.strip()
    return Prices().with_overrides(overrides)


@dataclass(frozen=True, kw_only=True)
class CostOptions:
    """How the status and the console price the jobs: the window, the prices, the producer's batching."""

    #: the window, in days up to the end of the current hour (0: no cost view)
    days: int = DEFAULT_DAYS
    prices: Prices = field(default_factory=Prices)
    #: messages the producer sends per SendMessage(Batch): 1 (each ``enqueue``) to 10 (``enqueue_many``)
    sends_per_request: float = DEFAULT_SENDS_PER_REQUEST

    def __post_init__(self) -> None:
        if not 0 <= self.days <= 455:  # CloudWatch keeps hourly data 455 days
            raise ConfigurationError(f"the cost window is 0 to 455 days, got {self.days}")
        if not 0 < self.sends_per_request <= 10:
            raise ConfigurationError(f"sends per request is more than 0 and at most 10 (SendMessageBatch's "
                                     f"limit), got {self.sends_per_request}")


#: us-east-1, on-demand, first tier, free tiers left out: where each price was read (AWS's pricing page, as the
#: dated guide quoting it says) and the guide's date. Read again when a date is a year old.
PRICE_SOURCES: Final = {
    "lambda_gb_second": "aws.amazon.com/lambda/pricing, Arm, first 7.5 billion GB-s a month (wring.co's "
                        "Lambda pricing guide, 2026-03-08)",
    "lambda_request": "aws.amazon.com/lambda/pricing, $0.20 per million requests (wring.co, 2026-03-08)",
    "dynamodb_write_unit": "aws.amazon.com/dynamodb/pricing, on-demand, $0.625 per million write request units "
                           "since the cut of 2024-11-01 (airbyte.com's DynamoDB pricing guide, 2025-07-21)",
    "dynamodb_read_unit": "aws.amazon.com/dynamodb/pricing, on-demand, $0.125 per million read request units "
                          "(airbyte.com, 2025-07-21)",
    "sqs_request": "aws.amazon.com/sqs/pricing, standard queue, first 100 billion requests a month, a request "
                   "per 64 KiB chunk (cloudburn.io's SQS pricing guide, 2026-03-14)",
    "scheduler_invocation": "aws.amazon.com/eventbridge/pricing, Scheduler, $1.00 per million invocations after "
                            "14 million free a month, API calls not billed (cloudburn.io, 2026-03-13)",
    "logs_gb": "aws.amazon.com/cloudwatch/pricing, Logs standard class, $0.50 per GB collected "
               "(cloudburn.io's CloudWatch pricing guide, February 2026)",
    "metric_month": "aws.amazon.com/cloudwatch/pricing, first 10,000 custom metrics, $0.30 per metric-month "
                    "prorated by the hour (signoz.io's CloudWatch pricing guide, 2026-02-15)",
}
#: the dates of those guides: the prices are "as of" these
PRICES_AS_OF: Final = "2025-07-21 to 2026-03-14"


@dataclass(frozen=True, kw_only=True)
class Usage:
    """What AWS bills, in its own units."""

    lambda_gb_seconds: float = 0.0
    lambda_requests: float = 0.0
    write_units: float = 0.0
    read_units: float = 0.0
    sqs_requests: float = 0.0
    #: EventBridge Scheduler invocations (schedules that fire)
    schedules: float = 0.0
    #: bytes ingested by CloudWatch Logs
    log_bytes: float = 0.0
    #: custom metrics times the hours each received data
    metric_hours: float = 0.0

    def __add__(self, other: Usage) -> Usage:
        return Usage(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def scaled(self, factor: float, *, metric_hours: float | None = None) -> Usage:
        """This usage times ``factor`` (a tenant's share of its job's), with its own metric hours if given."""
        values = {f.name: getattr(self, f.name) * factor for f in fields(self)}
        if metric_hours is not None:
            values["metric_hours"] = metric_hours
        return Usage(**values)


@dataclass(frozen=True, kw_only=True)
class Cost:
    """Dollars per service for one usage."""

    lambda_usd: float
    dynamodb_usd: float
    sqs_usd: float
    scheduler_usd: float
    logs_usd: float
    #: the custom metrics' hourly charge: fixed, whatever the number of jobs
    metrics_usd: float

    @property
    def variable_usd(self) -> float:
        """What grows with the jobs: everything but the metrics' hourly charge."""
        return self.lambda_usd + self.dynamodb_usd + self.sqs_usd + self.scheduler_usd + self.logs_usd

    @property
    def total_usd(self) -> float:
        return self.variable_usd + self.metrics_usd


def price(usage: Usage, prices: Prices | None = None) -> Cost:
    """The dollars of ``usage`` at ``prices`` (default: us-east-1's)."""
    p = prices or Prices()
    return Cost(
        lambda_usd=usage.lambda_gb_seconds * p.lambda_gb_second + usage.lambda_requests * p.lambda_request,
        dynamodb_usd=usage.write_units * p.dynamodb_write_unit + usage.read_units * p.dynamodb_read_unit,
        sqs_usd=usage.sqs_requests * p.sqs_request,
        scheduler_usd=usage.schedules * p.scheduler_invocation,
        logs_usd=usage.log_bytes / 1e9 * p.logs_gb,
        metrics_usd=usage.metric_hours * p.metric_month / HOURS_PER_MONTH,
    )


# ---------------------------------------------------------------- from the worker's metrics
@dataclass(frozen=True, kw_only=True)
class JobTotals:
    """One job's (or one tenant's) metric sums over a window, as CloudWatch returns them.

    Example:
        >>> t = JobTotals(job="a", counts={m.SUCCEEDED: 90, m.DEAD_LETTERED: 1, m.RETRIED: 9, m.DUPLICATE: 2})
        >>> t.jobs, t.deliveries, t.sent
        (91.0, 102.0, 93.0)
    """

    job: str
    tenant: str | None = None
    #: counter name (:data:`COUNTED`) → sum
    counts: Mapping[str, float] = field(default_factory=dict)
    #: usage metric (``_metrics.USAGE``) → sum
    usage: Mapping[str, float] = field(default_factory=dict)
    #: the job's (tenant's) custom metrics times the hours each received data
    metric_hours: float = 0.0
    #: the sum of the job's run times, ms (a tenant's share of its job's Lambda time)
    duration_ms: float = 0.0

    @property
    def jobs(self) -> float:
        """Deliveries that ended the job: succeeded, dead-lettered, cancelled, expired, superseded."""
        return float(sum(self.counts.get(name, 0.0) for name in ENDED))

    @property
    def deliveries(self) -> float:
        """Deliveries, each counted once by its final outcome."""
        return float(sum(self.counts.get(name, 0.0) for name in DELIVERED))

    @property
    def sent(self) -> float:
        """Messages the producer sent: one a job that ended, one a duplicate delivered."""
        return self.jobs + self.counts.get(m.DUPLICATE, 0.0)


@dataclass(frozen=True, kw_only=True)
class ServiceTotals:
    """The service-wide sums the jobs share: batches (invocations), EMF bytes, and the service's own metrics."""

    batches: float = 0.0
    log_bytes: float = 0.0
    #: deliveries of every job (the denominator of a job's share)
    deliveries: float = 0.0
    #: the ``{service}``-only metrics times the hours each received data
    metric_hours: float = 0.0


def job_usage(job: JobTotals, service: ServiceTotals, *,
              sends_per_request: float = DEFAULT_SENDS_PER_REQUEST) -> Usage:
    """What ``job``'s deliveries made AWS bill over the window (this module's docstring says how).

    Example (1,000 successes in 100 batches of ten, sent ten a request):
        >>> job = JobTotals(job="a", counts={m.SUCCEEDED: 1000}, usage={
        ...     m.LAMBDA_GB_SECONDS: 1.75, m.WRITE_UNITS: 2000, m.SQS_REQUESTS: 200})
        >>> usage = job_usage(job, ServiceTotals(batches=100, log_bytes=51_000, deliveries=1000), sends_per_request=10)
        >>> usage.lambda_requests, usage.sqs_requests, usage.log_bytes
        (100.0, 300.0, 51000.0)
    """
    if sends_per_request <= 0:
        raise ConfigurationError(f"sends per request must be more than 0, got {sends_per_request}")
    share = job.deliveries / service.deliveries if service.deliveries else 0.0
    schedules = job.counts.get(m.SCHEDULED, 0.0)
    return Usage(
        lambda_gb_seconds=job.usage.get(m.LAMBDA_GB_SECONDS, 0.0),
        lambda_requests=service.batches * share,
        write_units=job.usage.get(m.WRITE_UNITS, 0.0),
        read_units=job.usage.get(m.READ_UNITS, 0.0),
        # The poller's and the worker's own, the producer's sends, and each fired schedule's SendMessage.
        sqs_requests=job.usage.get(m.SQS_REQUESTS, 0.0) + job.sent / sends_per_request + schedules,
        schedules=schedules,
        log_bytes=service.log_bytes * share,
        metric_hours=job.metric_hours,
    )


@dataclass(frozen=True, kw_only=True)
class JobCost:
    """One job's (or tenant's) jobs, usage and dollars over the window."""

    job: str
    tenant: str | None
    jobs: float
    usage: Usage
    cost: Cost

    @property
    def per_million(self) -> float | None:
        """Dollars per million jobs, the metrics' hourly charge left out; None without jobs."""
        return self.cost.variable_usd / self.jobs * 1e6 if self.jobs else None

    def summary(self, days: int) -> str:
        """One line: ``invoice-email: 1.2 M jobs, $1.71 last 7 days, $1.43 per million``.

        Example:
            >>> cost = price(Usage(write_units=2_000_000))
            >>> JobCost(job="invoice-email", tenant=None, jobs=1e6, usage=Usage(), cost=cost).summary(7)
            'invoice-email: 1.0 M jobs, $1.25 last 7 days, $1.25 per million'
        """
        name = self.job if self.tenant is None else f"{self.job} (tenant {self.tenant})"
        per = "-" if self.per_million is None else format_usd(self.per_million)
        return (f"{name}: {format_jobs(self.jobs)} jobs, {format_usd(self.cost.total_usd)} last {days} "
                f"day{'s' if days != 1 else ''}, {per} per million")


def job_cost(job: JobTotals, service: ServiceTotals, *, prices: Prices | None = None,
             sends_per_request: float = DEFAULT_SENDS_PER_REQUEST) -> JobCost:
    """``job``'s usage and its dollars."""
    usage = job_usage(job, service, sends_per_request=sends_per_request)
    return JobCost(job=job.job, tenant=None, jobs=job.jobs, usage=usage, cost=price(usage, prices))


def tenant_cost(tenant: JobTotals, of: JobCost, job: JobTotals, *, prices: Prices | None = None) -> JobCost:
    """A tenant's share of its job's cost: Lambda by its share of the job's run time, the rest by its share
    of the deliveries; its own metrics' hours (the tenant series are the job's too)."""
    by_time = tenant.duration_ms / job.duration_ms if job.duration_ms else 0.0
    by_count = tenant.deliveries / job.deliveries if job.deliveries else 0.0
    usage = replace(of.usage.scaled(by_count, metric_hours=tenant.metric_hours),
                    lambda_gb_seconds=of.usage.lambda_gb_seconds * by_time)
    return JobCost(job=tenant.job, tenant=tenant.tenant, jobs=tenant.jobs, usage=usage, cost=price(usage, prices))


@dataclass(frozen=True, kw_only=True)
class CostReport:
    """What each job cost over a window, and the service's own metrics."""

    days: int
    start: float
    end: float
    prices: Prices
    sends_per_request: float
    #: per job, the costliest first
    jobs: tuple[JobCost, ...] = ()
    #: per tenant of the jobs declared with ``tenant_metrics=True``
    tenants: tuple[JobCost, ...] = ()
    #: the ``{service}``-only metrics' hourly charge (no job's)
    service_metrics_usd: float = 0.0
    notes: tuple[str, ...] = ()

    @property
    def total_usd(self) -> float:
        return sum(j.cost.total_usd for j in self.jobs) + self.service_metrics_usd

    def rows(self) -> list[JobCost]:
        """Each job, the costliest first, each followed by its tenants."""
        return [row for job in self.jobs for row in (job, *(t for t in self.tenants if t.job == job.job))]

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (``sqsjobs status --json``)."""
        def row(j: JobCost) -> dict[str, Any]:
            return {"job": j.job, "tenant": j.tenant, "jobs": j.jobs, "usage": asdict(j.usage),
                    "usd": {**asdict(j.cost), "total": j.cost.total_usd}, "per_million_usd": j.per_million}

        return {"days": self.days, "start": self.start, "end": self.end, "prices": asdict(self.prices),
                "sends_per_request": self.sends_per_request, "jobs": [row(j) for j in self.jobs],
                "tenants": [row(t) for t in self.tenants], "service_metrics_usd": self.service_metrics_usd,
                "total_usd": self.total_usd, "notes": list(self.notes)}


def format_jobs(count: float) -> str:
    """A job count as people read it: ``950``, ``12.3 k``, ``1.2 M``."""
    if count >= 1e6:
        return f"{count / 1e6:,.1f} M"
    if count >= 1e4:
        return f"{count / 1e3:,.{0 if count >= 1e5 else 1}f} k"
    return f"{count:,.0f}"


def format_usd(usd: float) -> str:
    """Dollars with cents, or two significant digits below a cent."""
    if usd == 0 or usd >= 0.01:
        return f"${usd:,.2f}"
    return f"${usd:.2g}"
