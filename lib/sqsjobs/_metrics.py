"""Metric names and dimensions, and the per-batch EMF emitter.

The template's alarms and dashboard name exactly these metrics; a test reads
both and fails when they drift apart. This module must never call AWS: metrics
leave the function as Embedded Metric Format lines on stdout, which CloudWatch
Logs turns into metrics for free (no PutMetricData round trip per batch).
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

DEFAULT_NAMESPACE: Final = "sqsjobs"
DIMENSION_SERVICE: Final = "service"
DIMENSION_JOB: Final = "Job"
#: the enqueue's ``tenant=``, on the metrics of jobs declared with ``tenant_metrics=True``
DIMENSION_TENANT: Final = "Tenant"
#: the limiter that deferred a job (``JobDeferred``)
DIMENSION_LIMITER: Final = "Limiter"

DURATION: Final = "JobDuration"
SUCCEEDED: Final = "JobSucceeded"
FAILED: Final = "JobFailed"
RETRIED: Final = "JobRetried"
DEAD_LETTERED: Final = "JobDeadLettered"
DUPLICATE: Final = "JobDuplicate"
CANCELLED: Final = "JobCancelled"
EXPIRED: Final = "JobExpired"
#: a job now waits in a one-time schedule: a delayed enqueue (producer) or a retry beyond 12 hours (worker)
SCHEDULED: Final = "JobScheduled"

#: a job over one of its limiters went back without using an attempt (dimension ``Limiter``)
DEFERRED: Final = "JobDeferred"

COUNTS: Final = (SUCCEEDED, FAILED, RETRIED, DEAD_LETTERED, DUPLICATE, CANCELLED, EXPIRED, SCHEDULED, DEFERRED)
ALL_METRICS: Final = (DURATION, *COUNTS)
# The failure-rate alarm divides FAILED by (SUCCEEDED + FAILED) on {service}.
FAILURE_RATE_INPUTS: Final = (SUCCEEDED, FAILED)
# Bodies too broken to name a job are still counted, under this job name.
UNKNOWN_JOB: Final = "?"

#: extra dimensions of one measurement, as sorted (name, value) pairs
Extra = tuple[tuple[str, str], ...]


@dataclass
class BatchMetrics:
    """Collects one batch's measurements and writes them as EMF lines.

    One EMF document per job carries two dimension sets, ``{service, Job}``
    and ``{service}``, so the per-job dashboard and the service-wide
    failure-rate alarm read the same numbers. A measurement with extra
    dimensions (``Tenant``, ``Limiter``) gets its own document, which adds
    ``{service, Job, <each extra>}`` (and all extras together) to those two:
    every datum is counted once in each set.

    Example:
        >>> lines = []
        >>> m = BatchMetrics(namespace="sqsjobs", service="demo", emit=lines.append)
        >>> m.count("invoice-email", SUCCEEDED)
        >>> m.duration("invoice-email", 12.5)
        >>> m.count("invoice-email", DEFERRED, dimensions={"Limiter": "ses"})
        >>> m.flush()
        >>> import json
        >>> [json.loads(line)["_aws"]["CloudWatchMetrics"][0]["Dimensions"] for line in lines]
        [[['Job', 'service'], ['service']], [['Job', 'Limiter', 'service'], ['Job', 'service'], ['service']]]
    """

    namespace: str
    service: str
    emit: Callable[[str], None] = print
    _counts: dict[tuple[str, Extra], dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    _durations: dict[tuple[str, Extra], list[float]] = field(default_factory=lambda: defaultdict(list))

    def count(self, job: str, name: str, value: int = 1, *, dimensions: Mapping[str, str] | None = None) -> None:
        """Add ``value`` to counter ``name`` of ``job`` (with extra ``dimensions``, if any)."""
        if name not in COUNTS:
            raise ValueError(f"unknown counter {name!r}; use one of {COUNTS}")
        self._counts[(job, _extra(dimensions))][name] += value

    def duration(self, job: str, milliseconds: float, *, dimensions: Mapping[str, str] | None = None) -> None:
        """Record one run of ``job`` that took ``milliseconds``."""
        self._durations[(job, _extra(dimensions))].append(milliseconds)

    def snapshot(self) -> dict[str, dict[str, int]]:
        """The counters so far, per job, whatever their extra dimensions (for tests and the demo report)."""
        totals: dict[str, dict[str, int]] = {}
        for (job, _), counts in self._counts.items():
            for name, value in counts.items():
                totals.setdefault(job, {})[name] = totals.get(job, {}).get(name, 0) + value
        return totals

    def flush(self) -> None:
        """Write one EMF line per job seen in this batch, then forget them."""
        # Imported here: Powertools' provider costs ~70 ms to import, which a
        # cold start pays only once a batch actually has metrics to write.
        import json

        from aws_lambda_powertools.metrics import MetricUnit
        from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
            AmazonCloudWatchEMFProvider,
        )

        documents = set(self._counts) | set(self._durations)
        for job, extra in sorted(documents):
            provider = AmazonCloudWatchEMFProvider(namespace=self.namespace, service=self.service)
            provider.add_dimension(name=DIMENSION_JOB, value=job)
            for name, value in extra:
                provider.add_dimension(name=name, value=value)
            if len(extra) > 1:
                for name, value in extra:
                    provider.add_dimensions(**{DIMENSION_JOB: job, name: value, DIMENSION_SERVICE: self.service})
            if extra:
                provider.add_dimensions(**{DIMENSION_JOB: job, DIMENSION_SERVICE: self.service})
            provider.add_dimensions(**{DIMENSION_SERVICE: self.service})
            for name, count in self._counts.get((job, extra), {}).items():
                provider.add_metric(name=name, unit=MetricUnit.Count, value=count)
            for ms in self._durations.get((job, extra), []):
                provider.add_metric(name=DURATION, unit=MetricUnit.Milliseconds, value=ms)
            provider.timestamp = int(time.time() * 1000)
            self.emit(json.dumps(provider.serialize_metric_set(), separators=(",", ":")))
        self._counts.clear()
        self._durations.clear()


def _extra(dimensions: Mapping[str, str] | None) -> Extra:
    return tuple(sorted((dimensions or {}).items()))
