"""Metric names and dimensions, and the per-batch EMF emitter.

The template's alarms and dashboard name exactly these metrics; a test reads
both and fails when they drift apart. This module must never call AWS: metrics
leave the function as Embedded Metric Format lines on stdout, which CloudWatch
Logs turns into metrics for free (no PutMetricData round trip per batch).

The lines are written here, once per batch, straight from the counts
(CloudWatch's "Specification: Embedded metric format": an ``_aws`` member with
the ``Timestamp`` in epoch milliseconds and ``CloudWatchMetrics``, a list of
directives naming the ``Namespace``, the ``Dimensions`` (lists of root member
names, at most 30 each) and the ``Metrics`` (``Name`` and ``Unit``, at most 100);
the root holds each dimension's value and each metric's values, at most 100 per
metric). They are the documents Powertools' metrics provider would write for
the same counts, key for key (tests/unit/test_emf.py compares them), without
its per-value validation and objects: about 24 µs a message less (bench/).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final

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
#: a debounced delivery whose burst a later enqueue replaced: acknowledged without running (worker)
SUPERSEDED: Final = "JobSuperseded"
#: a deduplicated enqueue refused at the producer: its key was queued or running (enqueue/_debounce.py)
DEDUPLICATED: Final = "JobDeduplicated"
#: a job now waits in a one-time schedule: a delayed enqueue (producer) or a retry beyond 12 hours (worker)
SCHEDULED: Final = "JobScheduled"

#: a job over one of its limiters went back without using an attempt (dimension ``Limiter``)
DEFERRED: Final = "JobDeferred"

COUNTS: Final = (SUCCEEDED, FAILED, RETRIED, DEAD_LETTERED, DUPLICATE, CANCELLED, EXPIRED, SCHEDULED, DEFERRED,
                 SUPERSEDED, DEDUPLICATED)

# What a job's deliveries made AWS bill (worker/_batch_metrics.py attributes each batch's to its jobs; ops/_cost.py
# prices them). In the counters' directive ({service, Job} and {service}), only where not zero: every series is a
# metric CloudWatch bills by the hour, and every byte a log byte.
#: Lambda's billed time of the job's deliveries, in GB-seconds (their share of the batch's invocation)
LAMBDA_GB_SECONDS: Final = "JobLambdaGbSeconds"
#: DynamoDB write units and read units sent for the job's deliveries (refused conditional writes included)
WRITE_UNITS: Final = "JobWriteUnits"
READ_UNITS: Final = "JobReadUnits"
#: SQS requests billed for the job's deliveries (per 64 KiB chunk): Lambda's poller's, and the worker's own
SQS_REQUESTS: Final = "JobSqsRequests"
USAGE: Final = (LAMBDA_GB_SECONDS, WRITE_UNITS, READ_UNITS, SQS_REQUESTS)
# Once a batch, in its first document, on {service} only: the batch (one Lambda invocation) and the bytes of its
# EMF lines.
BATCHES: Final = "WorkerBatches"
LOG_BYTES: Final = "WorkerLogBytes"
SERVICE_USAGE: Final = (BATCHES, LOG_BYTES)

ALL_METRICS: Final = (DURATION, *COUNTS, *USAGE, *SERVICE_USAGE)
# The failure-rate alarm divides FAILED by (SUCCEEDED + FAILED) on {service}.
FAILURE_RATE_INPUTS: Final = (SUCCEEDED, FAILED)
# Bodies too broken to name a job are still counted, under this job name.
UNKNOWN_JOB: Final = "?"

#: extra dimensions of one measurement, as sorted (name, value) pairs
Extra = tuple[tuple[str, str], ...]


class Unit(StrEnum):
    """The CloudWatch units these metrics use (EMF's ``Unit``)."""

    COUNT = "Count"
    MILLISECONDS = "Milliseconds"
    BYTES = "Bytes"
    NONE = "None"


#: the unit of each usage metric (the counters are ``Count``, the duration ``Milliseconds``)
USAGE_UNITS: Final = {LAMBDA_GB_SECONDS: Unit.NONE, WRITE_UNITS: Unit.COUNT, READ_UNITS: Unit.COUNT,
                      SQS_REQUESTS: Unit.COUNT, BATCHES: Unit.COUNT, LOG_BYTES: Unit.BYTES}
_USAGE_UNIT_NAMES: Final = {name: unit.value for name, unit in USAGE_UNITS.items()}


#: EMF allows at most this many values per metric in one document; more go in the next document
MAX_VALUES_PER_METRIC: Final = 100


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
    #: epoch seconds, for the documents' ``Timestamp``
    clock: Callable[[], float] = time.time
    _counts: dict[tuple[str, Extra], dict[str, int]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(int)))
    _durations: dict[tuple[str, Extra], list[float]] = field(default_factory=lambda: defaultdict(list))
    _usage: dict[str, dict[str, float]] = field(default_factory=lambda: defaultdict(lambda: defaultdict(float)))

    def count(self, job: str, name: str, value: int = 1, *, dimensions: Mapping[str, str] | None = None) -> None:
        """Add ``value`` to counter ``name`` of ``job`` (with extra ``dimensions``, if any)."""
        if name not in COUNTS:
            raise ValueError(f"unknown counter {name!r}; use one of {COUNTS}")
        self._counts[(job, _extra(dimensions))][name] += value

    def duration(self, job: str, milliseconds: float, *, dimensions: Mapping[str, str] | None = None) -> None:
        """Record one run of ``job`` that took ``milliseconds``."""
        self._durations[(job, _extra(dimensions))].append(milliseconds)

    def usage(self, job: str, name: str, value: float) -> None:
        """Add ``value`` to usage metric ``name`` of ``job`` (``{service, Job}``, ``{service}``; zero: nothing)."""
        if name not in USAGE:
            raise ValueError(f"unknown usage metric {name!r}; use one of {USAGE}")
        if value:
            self._usage[job][name] += value

    def snapshot(self) -> dict[str, dict[str, int]]:
        """The counters so far, per job, whatever their extra dimensions (for tests and the demo report)."""
        totals: dict[str, dict[str, int]] = {}
        for (job, _), counts in self._counts.items():
            for name, value in counts.items():
                totals.setdefault(job, {})[name] = totals.get(job, {}).get(name, 0) + value
        return totals

    def flush(self, *, batch: bool = False) -> None:
        """Write one EMF line per job (and set of extra dimensions) seen in this batch, then forget them.

        ``batch``: these are a worker batch's metrics: the first line also counts the batch
        (``WorkerBatches``) and the bytes of every line written here, its own included (``WorkerLogBytes``).
        """
        timestamp = int(self.clock() * 1000)
        lines: list[str] = []
        for job, extra in sorted(set(self._counts) | set(self._durations) | {(job, ()) for job in self._usage}):
            counts = self._counts.get((job, extra), {})
            durations = self._durations.get((job, extra), [])
            usage = self._usage.get(job, {}) if not extra else {}
            lines += emf_lines(namespace=self.namespace, service=self.service, job=job, extra=extra,
                               counts=counts, durations=durations, timestamp=timestamp, usage=usage,
                               batch=batch and not lines)
        if batch and lines:
            lines[0] = with_log_bytes(lines[0], other_bytes=sum(len(line) + 1 for line in lines[1:]))
        for line in lines:
            self.emit(line)
        self._counts.clear()
        self._durations.clear()
        self._usage.clear()


def dimension_sets(extra: Extra) -> list[list[str]]:
    """The dimension sets of a document: all its dimensions, then ``{service, Job, <each extra>}``, then
    ``{service, Job}`` (when there are extras) and ``{service}``.

    Example:
        >>> dimension_sets((("Limiter", "ses"), ("Tenant", "t1")))
        [['Job', 'Limiter', 'Tenant', 'service'], ['Job', 'Limiter', 'service'], ['Job', 'Tenant', 'service'], \
['Job', 'service'], ['service']]
    """
    sets = [[DIMENSION_JOB, *(name for name, _ in extra), DIMENSION_SERVICE]]
    if len(extra) > 1:
        sets += [[DIMENSION_JOB, name, DIMENSION_SERVICE] for name, _ in extra]
    if extra:
        sets.append([DIMENSION_JOB, DIMENSION_SERVICE])
    sets.append([DIMENSION_SERVICE])
    return sets


def emf_lines(*, namespace: str, service: str, job: str, extra: Extra, counts: Mapping[str, int],
              durations: list[float], timestamp: int, usage: Mapping[str, float] | None = None,
              batch: bool = False) -> list[str]:
    """The EMF documents of one job's measurements: one, or more when a metric has over 100 values.

    ``usage`` goes with the counters (``_metrics.USAGE``); ``batch`` adds to the first document a directive
    on ``{service}`` with ``WorkerBatches`` 1 and ``WorkerLogBytes``, last, for :func:`with_log_bytes` to fill.

    Example:
        >>> emf_lines(namespace="sqsjobs", service="demo", job="invoice-email", extra=(),
        ...           counts={SUCCEEDED: 2}, durations=[12.5], timestamp=1)  # doctest: +NORMALIZE_WHITESPACE
        ['{"_aws":{"Timestamp":1,"CloudWatchMetrics":[{"Namespace":"sqsjobs","Dimensions":[["Job","service"],\
["service"]],"Metrics":[{"Name":"JobSucceeded","Unit":"Count"},{"Name":"JobDuration","Unit":"Milliseconds"}]}]},\
"Job":"invoice-email","service":"demo","JobSucceeded":[2.0],"JobDuration":[12.5]}']
    """
    dimensions: dict[str, Any] = {DIMENSION_JOB: job, **dict(extra), DIMENSION_SERVICE: service}
    sets = dimension_sets(extra)
    lines = []
    chunks = max(1, -(-len(durations) // MAX_VALUES_PER_METRIC))
    for chunk in range(chunks):
        metrics: list[dict[str, str]] = []
        values: dict[str, list[float]] = {}
        if chunk == 0:
            for name, count in counts.items():
                metrics.append({"Name": name, "Unit": Unit.COUNT.value})
                values[name] = [float(count)]
        part = durations[chunk * MAX_VALUES_PER_METRIC:(chunk + 1) * MAX_VALUES_PER_METRIC]
        if part:
            metrics.append({"Name": DURATION, "Unit": Unit.MILLISECONDS.value})
            values[DURATION] = [float(ms) for ms in part]
        if chunk == 0 and usage:
            for name, value in usage.items():
                metrics.append({"Name": name, "Unit": _USAGE_UNIT_NAMES[name]})
                # Ten significant digits: sums of shares carry float noise (1.9999999999999996) the log would bill.
                values[name] = [float(f"{value:.10g}")]
        directives = [{"Namespace": namespace, "Dimensions": sets, "Metrics": metrics}] if metrics else []
        if chunk == 0 and batch:
            directives.append({"Namespace": namespace, "Dimensions": [[DIMENSION_SERVICE]], "Metrics": [
                {"Name": BATCHES, "Unit": Unit.COUNT.value}, {"Name": LOG_BYTES, "Unit": Unit.BYTES.value}]})
            values[BATCHES] = [1.0]
            values[LOG_BYTES] = [0.0]  # last: with_log_bytes writes the total there
        if not directives:
            continue
        document = {"_aws": {"Timestamp": timestamp, "CloudWatchMetrics": directives}, **dimensions, **values}
        lines.append(json.dumps(document, separators=(",", ":")))
    return lines


#: how a batch's first document ends before :func:`with_log_bytes` fills in the total
_NO_LOG_BYTES: Final = f'"{LOG_BYTES}":[0.0]}}'


def with_log_bytes(line: str, *, other_bytes: int) -> str:
    """``line`` (ending with ``WorkerLogBytes``) with the batch's bytes: ``other_bytes`` (the other lines', a
    newline each) plus this line's own, its own digits included.

    Example:
        >>> [line] = emf_lines(namespace="sqsjobs", service="demo", job="a", extra=(), counts={SUCCEEDED: 1},
        ...                    durations=[], timestamp=1, batch=True)
        >>> line = with_log_bytes(line, other_bytes=1000)
        >>> json.loads(line)[LOG_BYTES] == [1000.0 + len(line) + 1]
        True
    """
    if not line.endswith(_NO_LOG_BYTES):
        raise ValueError("not a batch's first document: WorkerLogBytes must come last")
    head = line[:-len(_NO_LOG_BYTES)] + f'"{LOG_BYTES}":['
    total = float(other_bytes)
    for _ in range(4):  # the total's own digits: settles in two rounds
        text = f"{head}{total!r}]}}"
        if other_bytes + len(text) + 1 == total:
            break
        total = float(other_bytes + len(text) + 1)
    return text


def _extra(dimensions: Mapping[str, str] | None) -> Extra:
    return tuple(sorted((dimensions or {}).items()))
