"""The overview page's data: every queue against its alarm limits, alarms, throughput and failure rate.

The queues and alarms come from :func:`sqsjobs.ops._status.collect_status` (the
same report as ``sqsjobs status``); queues that the same alarms watch (for
example the outbox relay's failure queue) join as rows of their own. The
charts read the worker's EMF metrics with ``GetMetricData``
(:mod:`sqsjobs.ops._metrics_reader`); what each job cost is priced from them
too (:mod:`sqsjobs.ops._cost_reader`, cached: :mod:`sqsjobs.console.costs`).

Example:
    >>> from sqsjobs.console.thresholds import AGE_METRIC
    >>> status = QueueStatus(name="jobs", url="u", visible=1, in_flight=0, delayed=0, oldest_age_seconds=150.0,
    ...                      oldest_age_source="cloudwatch")
    >>> limit = QueueLimit(alarm="age", queue="jobs", metric=AGE_METRIC, comparison=">", threshold=300.0,
    ...                    state="OK")
    >>> QueueRow(role="jobs", status=status, limits=(limit,)).age_fraction
    0.5
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from sqsjobs.console.charts import Chart, line_chart
from sqsjobs.console.costs import CostCache
from sqsjobs.console.thresholds import QueueLimit, queue_limits
from sqsjobs.enqueue._addresses import resolve_queue_url
from sqsjobs.ops._cost import CostOptions, CostReport
from sqsjobs.ops._cost_reader import read_costs
from sqsjobs.ops._metrics_reader import Throughput, Window, pick_service, throughput
from sqsjobs.ops._status import collect_status, read_queue_status
from sqsjobs.ops._status_report import QueueStatus, StatusReport

T = TypeVar("T")

if TYPE_CHECKING:
    from sqsjobs.console.config import ConsoleConfig
    from sqsjobs.console.sources import Sources


@dataclass(frozen=True, kw_only=True)
class QueueRow:
    """One queue, what it is for, and the alarm limits on it."""

    role: str
    status: QueueStatus
    limits: tuple[QueueLimit, ...]

    @property
    def age_limit(self) -> QueueLimit | None:
        """The alarm limit on the oldest message's age, if an alarm watches it."""
        return next((limit for limit in self.limits if limit.is_age), None)

    @property
    def age_fraction(self) -> float | None:
        """The oldest age as a fraction of its alarm limit (1.0 and above: the alarm fires)."""
        limit, age = self.age_limit, self.status.oldest_age_seconds
        if limit is None or age is None or limit.threshold <= 0:
            return None
        return age / limit.threshold

    @property
    def other_limits(self) -> tuple[QueueLimit, ...]:
        """Limits on depth and other queue metrics."""
        return tuple(limit for limit in self.limits if not limit.is_age)


@dataclass(frozen=True, kw_only=True)
class Overview:
    """Everything the overview shows."""

    report: StatusReport
    queues: tuple[QueueRow, ...]
    throughput: Chart | None
    failure_rate: Chart | None
    service: str | None
    window: Window
    notes: tuple[str, ...]
    #: what each job cost over the last ``costs.days`` (None: no metrics to price, or ``--cost-days 0``)
    costs: CostReport | None = None
    #: when those figures were read (they are cached a few minutes)
    costs_read_at: float | None = None


def read_overview(sources: Sources, config: ConsoleConfig, *, hours: int, costs: CostCache | None = None) -> Overview:
    """Read queues, alarms, the charts' metrics and (through ``costs``, when given) what each job cost."""
    with sources.dlq_lock:
        # The DLQ's evidence comes from the table the job lookup reads (--table or SQSJOBS_TABLE).
        # Costs are read below, through the cache: not on every refresh.
        report = collect_status(sqs_client=sources.sqs, cloudwatch_client=sources.cloudwatch,
                                records=sources.records,
                                queue=sources.queue_url, dlq=sources.dlq_url, sample=config.sample,
                                alarm_prefix=config.alarm_prefix, namespace=config.namespace, clock=sources.clock,
                                costs=CostOptions(days=0))
    notes = list(report.notes)
    names = [a.name for a in report.alarms]
    no_limits: tuple[QueueLimit, ...] = ()
    limits = _best_effort("the alarms' limits", lambda: queue_limits(sources.cloudwatch, names), no_limits, notes)
    # Every jobs queue (the default one first, then named ones such as the critical queue), then the DLQ.
    jobs_queues = report.queues or ((report.queue,) if report.queue is not None else ())
    roles = [("jobs", status) for status in jobs_queues] + [("dead letters", report.dlq)]
    rows = [QueueRow(role=role, status=status, limits=tuple(x for x in limits if x.queue == status.name))
            for role, status in roles if status is not None]
    known = {row.status.name for row in rows}
    for name in sorted({limit.queue for limit in limits} - known):
        url = resolve_queue_url(sources.sqs, name)
        status = read_queue_status(sources.sqs, url, cloudwatch_client=sources.cloudwatch, clock=sources.clock)
        rows.append(QueueRow(role="watched by an alarm", status=status,
                             limits=tuple(x for x in limits if x.queue == name)))
    window = Window.last(hours=hours, now=sources.clock())
    service = _best_effort("the job metrics",
                           lambda: pick_service(sources.cloudwatch, config.namespace, config.service, notes), None,
                           notes)
    per_minute = rate = None
    series: Throughput | None = None
    if service is not None:
        series = _best_effort("the job metrics",
                              lambda: throughput(sources.cloudwatch, config.namespace, service, window), None, notes)
    if series is not None:
        per_minute = line_chart("jobs per minute", series.per_minute, start=window.start, end=window.end,
                                period=window.period)
        rate = line_chart("failure rate", series.failure_rate, start=window.start, end=window.end,
                          period=window.period, unit="%")
    priced = None
    if service is not None and costs is not None and config.costs.days:
        options = config.costs

        def read() -> CostReport | None:
            return read_costs(sources.cloudwatch, config.namespace, service, now=sources.clock(), days=options.days,
                              prices=options.prices, sends_per_request=options.sends_per_request)

        priced = _best_effort("the job costs", lambda: costs.get(read, now=sources.clock()), None, notes)
    return Overview(report=report, queues=tuple(rows), throughput=per_minute, failure_rate=rate, service=service,
                    window=window, notes=tuple(notes), costs=priced,
                    costs_read_at=costs.read_at if costs is not None and priced is not None else None)



def _best_effort(what: str, read: Callable[[], T], default: T, notes: list[str]) -> T:
    """CloudWatch reads beyond the queues: without those rights the overview still shows the queues."""
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        return read()
    except (BotoCoreError, ClientError) as exc:
        notes.append(f"could not read {what} from CloudWatch: {exc}")
        return default
