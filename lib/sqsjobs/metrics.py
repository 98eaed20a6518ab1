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
    from collections.abc import Callable

DEFAULT_NAMESPACE: Final = "sqsjobs"
DIMENSION_SERVICE: Final = "service"
DIMENSION_JOB: Final = "Job"

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

COUNTS: Final = (SUCCEEDED, FAILED, RETRIED, DEAD_LETTERED, DUPLICATE, CANCELLED, EXPIRED, SCHEDULED)
ALL_METRICS: Final = (DURATION, *COUNTS)
# The failure-rate alarm divides FAILED by (SUCCEEDED + FAILED) on {service}.
FAILURE_RATE_INPUTS: Final = (SUCCEEDED, FAILED)
# Bodies too broken to name a job are still counted, under this job name.
UNKNOWN_JOB: Final = "?"


@dataclass
class BatchMetrics:
    """Collects one batch's measurements and writes them as EMF lines.

    One EMF document per job carries two dimension sets, ``{service, Job}``
    and ``{service}``, so the per-job dashboard and the service-wide
    failure-rate alarm read the same numbers.

    Example:
        >>> m = BatchMetrics(namespace="sqsjobs", service="demo", emit=lambda line: None)
        >>> m.count("invoice-email", SUCCEEDED)
        >>> m.duration("invoice-email", 12.5)
        >>> m.flush()
    """

    namespace: str
    service: str
    emit: Callable[[str], None] = print
    _counts: dict[str, dict[str, int]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    _durations: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))

    def count(self, job: str, name: str, value: int = 1) -> None:
        """Add ``value`` to counter ``name`` of ``job``."""
        if name not in COUNTS:
            raise ValueError(f"unknown counter {name!r}; use one of {COUNTS}")
        self._counts[job][name] += value

    def duration(self, job: str, milliseconds: float) -> None:
        """Record one run of ``job`` that took ``milliseconds``."""
        self._durations[job].append(milliseconds)

    def snapshot(self) -> dict[str, dict[str, int]]:
        """The counters so far, per job (for tests and the demo report)."""
        return {job: dict(counts) for job, counts in self._counts.items()}

    def flush(self) -> None:
        """Write one EMF line per job seen in this batch, then forget them."""
        # Imported here: Powertools' provider costs ~70 ms to import, which a
        # cold start pays only once a batch actually has metrics to write.
        import json

        from aws_lambda_powertools.metrics import MetricUnit
        from aws_lambda_powertools.metrics.provider.cloudwatch_emf.cloudwatch import (
            AmazonCloudWatchEMFProvider,
        )

        jobs = set(self._counts) | set(self._durations)
        for job in sorted(jobs):
            provider = AmazonCloudWatchEMFProvider(namespace=self.namespace, service=self.service)
            provider.add_dimension(name=DIMENSION_JOB, value=job)
            provider.add_dimensions(**{DIMENSION_SERVICE: self.service})
            for name, value in self._counts.get(job, {}).items():
                provider.add_metric(name=name, unit=MetricUnit.Count, value=value)
            for ms in self._durations.get(job, []):
                provider.add_metric(name=DURATION, unit=MetricUnit.Milliseconds, value=ms)
            provider.timestamp = int(time.time() * 1000)
            self.emit(json.dumps(provider.serialize_metric_set(), separators=(",", ":")))
        self._counts.clear()
        self._durations.clear()
