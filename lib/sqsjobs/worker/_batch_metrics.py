"""Step 8 of ``Consumer.run`` (``worker/_consumer.py``): a batch's metrics, one EMF document a job (``_metrics.py``).

Each delivery adds its duration, the counter of its final outcome, a
schedule and a failure. A delivery acknowledged without running (a
duplicate, a cancelled or expired one) is counted only once it is
acknowledged: one that went back is counted on the redelivery that is.

What the batch made AWS bill (:class:`BatchUsage`) is shared out to its jobs
(``JobLambdaGbSeconds``, ``JobWriteUnits``, ``JobReadUnits``, ``JobSqsRequests``):

- **Lambda**: the invocation is billed its duration rounded up to the
  millisecond; a job's run is not that (claims, record writes and the poller's
  share are not in it). Each delivery gets its own run time plus an equal
  share of the rest; when runs overlapped (concurrent jobs) and add up to more
  than the batch took, the batch's time is shared in proportion to the runs.
  Times memory: GB-seconds;
- **DynamoDB and the worker's SQS calls**: what ``_usage.UsageMeter`` counted,
  by the key, body or receipt handle each request named; what named none
  (limiter and group items, follow-up messages) in equal shares;
- **Lambda's poller**: its receives and its delete, shared by message size
  (``_usage.poller_requests``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqsjobs import _metrics as m
from sqsjobs._usage import Metered, message_bytes, poller_requests
from sqsjobs.enqueue._routing import TENANT_METRICS
from sqsjobs.worker._delivery import Delivery, Outcome, State

#: the counter each final outcome adds one to (re-sent records count as what they were: a retry still comes back)
OUTCOME_METRICS = {
    Outcome.SUCCEEDED: m.SUCCEEDED,
    Outcome.DUPLICATE: m.DUPLICATE,
    Outcome.RETRY: m.RETRIED,
    Outcome.DEAD_LETTERED: m.DEAD_LETTERED,
    Outcome.CANCELLED: m.CANCELLED,
    Outcome.EXPIRED: m.EXPIRED,
    Outcome.SUPERSEDED: m.SUPERSEDED,
    Outcome.DEFERRED: m.DEFERRED,
}
#: outcomes of deliveries acknowledged without running: counted only once they are
UNRUN_ACKS = frozenset({Outcome.DUPLICATE, Outcome.CANCELLED, Outcome.EXPIRED, Outcome.SUPERSEDED})


@dataclass(frozen=True, kw_only=True)
class BatchUsage:
    """What one batch's invocation is billed for, before it is shared out to the deliveries."""

    #: the batch's time, from its start to its metrics, in milliseconds
    elapsed_ms: float
    #: the function's memory (None: not on Lambda, no Lambda time to bill)
    memory_mb: int | None
    #: what the runtime's clients sent meanwhile
    metered: Metered = field(default_factory=Metered)

    @property
    def billed_ms(self) -> int:
        """Lambda's billed duration: rounded up to the millisecond, at least one.

        Example:
            >>> BatchUsage(elapsed_ms=20.2, memory_mb=128).billed_ms, BatchUsage(elapsed_ms=0, memory_mb=128).billed_ms
            (21, 1)
        """
        return max(1, math.ceil(self.elapsed_ms))


def write_metrics(deliveries: Sequence[Delivery], *, namespace: str, service: str, emit: Callable[[str], None],
                  usage: BatchUsage | None = None, clock: Callable[[], float] | None = None) -> None:
    """Count every delivery of a batch and write the documents (``emit``: one EMF line each), stamped by ``clock``.

    With ``usage``, each job's share of it too, and the batch's own line (``WorkerBatches``, ``WorkerLogBytes``).
    """
    metrics = m.BatchMetrics(namespace=namespace, service=service, emit=emit)
    if clock is not None:
        metrics.clock = clock
    for d in deliveries:
        count(metrics, d)
    if usage is not None:
        share(metrics, deliveries, usage)
    metrics.flush(batch=usage is not None)


def share(batch: m.BatchMetrics, deliveries: Sequence[Delivery], usage: BatchUsage) -> None:
    """Add each job's share of ``usage`` to the batch's metrics (the rules in this module's docstring).

    Example (two runs of 4 and 6 ms in a batch billed 20 ms at 1,024 MB: each gets 5 ms more):
        >>> from sqsjobs.worker._delivery import Delivery
        >>> lines = []
        >>> batch = m.BatchMetrics(namespace="sqsjobs", service="demo", emit=lines.append)
        >>> ds = [Delivery.parse({"messageId": f"m{i}", "receiptHandle": f"r{i}", "body": "{}"}, i) for i in (0, 1)]
        >>> ds[0].duration_ms, ds[1].duration_ms = 4.0, 6.0
        >>> share(batch, ds, BatchUsage(elapsed_ms=19.3, memory_mb=1024))
        >>> round(batch._usage["?"][m.LAMBDA_GB_SECONDS] * 1000, 3)  # 20 ms at 1 GB, both jobs unnamed here
        20.0
    """
    count = len(deliveries)
    if not count:
        return
    gb_per_ms = usage.memory_mb / 1024 / 1000 if usage.memory_mb else 0.0
    billed = billed_shares([d.duration_ms or 0.0 for d in deliveries], usage.billed_ms) if gb_per_ms else None
    poller = poller_requests([message_bytes(d.body or "", d.message_attributes) for d in deliveries],
                             [d.state is State.ACKED for d in deliveries])
    write, read, sqs = (value / count for value in usage.metered.shared)
    # Summed per job here, written once per job and metric: [GB-s, write units, read units, SQS requests]
    totals: dict[str, list[float]] = {}
    for i, d in enumerate(deliveries):
        job = job_name(d)
        own = totals.get(job)
        if own is None:
            own = totals[job] = [0.0, 0.0, 0.0, 0.0]
        if billed is not None:
            own[0] += billed[i] * gb_per_ms
        own[1] += write
        own[2] += read
        own[3] += sqs + poller[i]
    for job, (own_write, own_read, own_sqs) in usage.metered.by_job.items():
        own = totals.setdefault(job, [0.0, 0.0, 0.0, 0.0])
        own[1] += own_write
        own[2] += own_read
        own[3] += own_sqs
    for job, (gb_s, units_written, units_read, requests) in totals.items():
        batch.usage(job, m.LAMBDA_GB_SECONDS, gb_s)
        batch.usage(job, m.WRITE_UNITS, units_written)
        batch.usage(job, m.READ_UNITS, units_read)
        batch.usage(job, m.SQS_REQUESTS, requests)


def billed_shares(runs_ms: Sequence[float], billed_ms: float) -> list[float]:
    """Each delivery's share of ``billed_ms``: its run plus an equal part of the rest, or (runs overlapping
    to more than the batch took) the batch's time in proportion to the runs.

    Example:
        >>> billed_shares([4.0, 6.0, 0.0], 16), billed_shares([30.0, 10.0], 20)
        ([6.0, 8.0, 2.0], [15.0, 5.0])
    """
    ran = sum(runs_ms)
    if ran > billed_ms:
        return [billed_ms * run / ran for run in runs_ms]
    rest = (billed_ms - ran) / len(runs_ms)
    return [run + rest for run in runs_ms]


def job_name(d: Delivery) -> str:
    """The job a delivery's metrics go under (bodies too broken to name one: ``?``)."""
    return d.job_name if d.job is not None else m.UNKNOWN_JOB


def count(batch: m.BatchMetrics, d: Delivery) -> None:
    """Add ``d`` to the batch's metrics: its duration, its outcome's counter, a schedule, a failure."""
    job = job_name(d)
    tenant = d.tenant if d.job is not None and TENANT_METRICS.of(d.job.options) else None
    dims = {m.DIMENSION_TENANT: tenant} if tenant else {}
    if d.duration_ms is not None:
        # To the microsecond: the digits past it are noise, and bytes CloudWatch Logs bills.
        batch.duration(job, round(d.duration_ms, 3), dimensions=dims)
    name = OUTCOME_METRICS.get(d.outcome) if d.outcome is not None else None
    if d.outcome in UNRUN_ACKS and d.state is not State.ACKED:
        name = None  # withheld: its redelivery is counted when it is acknowledged
    if name is not None:
        limiter = {m.DIMENSION_LIMITER: d.deferred_by} if d.deferred_by else {}
        batch.count(job, name, dimensions={**dims, **limiter})
    if d.schedule_name is not None and d.state is State.ACKED:
        batch.count(job, m.SCHEDULED)
    ran_and_failed = d.error is not None and (d.duration_ms is not None or (
        d.reason is not None and d.reason.value == "malformed"))
    if ran_and_failed and d.outcome in (Outcome.RETRY, Outcome.DEAD_LETTERED):
        batch.count(job, m.FAILED, dimensions=dims)
