"""Step 8 of ``Consumer.run`` (``worker/_consumer.py``): a batch's metrics, one EMF document a job (``_metrics.py``).

Each delivery adds its duration, the counter of its final outcome, a
schedule and a failure. A delivery acknowledged without running (a
duplicate, a cancelled or expired one) is counted only once it is
acknowledged: one that went back is counted on the redelivery that is.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sqsjobs import _metrics as m
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


def write_metrics(deliveries: Sequence[Delivery], *, namespace: str, service: str, emit: Callable[[str], None]) -> None:
    """Count every delivery of a batch and write the documents (``emit``: one EMF line each)."""
    metrics = m.BatchMetrics(namespace=namespace, service=service, emit=emit)
    for d in deliveries:
        count(metrics, d)
    metrics.flush()


def count(batch: m.BatchMetrics, d: Delivery) -> None:
    """Add ``d`` to the batch's metrics: its duration, its outcome's counter, a schedule, a failure."""
    job = d.job_name if d.job is not None else m.UNKNOWN_JOB
    tenant = d.tenant if d.job is not None and TENANT_METRICS.of(d.job.options) else None
    dims = {m.DIMENSION_TENANT: tenant} if tenant else {}
    if d.duration_ms is not None:
        batch.duration(job, d.duration_ms, dimensions=dims)
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
