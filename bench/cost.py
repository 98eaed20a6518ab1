"""What a million successful jobs cost on AWS, from the measured figures: Lambda, DynamoDB, SQS, CloudWatch.

The inputs are measured by ``bench.figures`` and ``bench.pinned`` for each framework; this module turns them
into the usage AWS bills (:func:`usage`: GB-seconds, requests, write units, log bytes) and prices that with
the runtime's one cost model (``sqsjobs.ops._cost``), the one ``sqsjobs status`` and the console price the
worker's metrics with: the same usage prints the same dollars (tests/unit/console/test_cost.py runs the
benchmark's workload through the worker and the console and compares).

Lambda duration per batch of 10, at ``memory`` MB::

    duration = waits + cpu / share,   share = min(1, memory / 1769)

``cpu`` is the client CPU of a batch over real HTTP (signing, HTTP, parsing included), measured on one
core; ``waits`` is the batch's sequential DynamoDB round trips times ``LATENCY_MS`` (an in-region round
trip). Lambda gives a function ``memory / 1769`` of a vCPU below 1,769 MB, so the CPU stretches by
``1 / share`` and the waits do not. The sum is an upper bound where a framework overlaps its calls
(sqsjobs' claims run in parallel, so their CPU and their waits partly overlap) and about exact where it
makes them one after another. Billing rounds each invocation up to the millisecond and adds the request
charge.

SQS bills each 64 KiB chunk of a request's payload as one request (a batch of ten 1 KB messages is one
request; a 256 KB message is four): ``sqs_requests`` counts them from the messages' size.

Example:
    >>> inputs = Inputs(wait_ms=10.0, cpu_ms=8.0, wcu_per_job=2.0, sqs_per_job=0.3, emf_bytes_per_job=40.0)
    >>> round(duration_ms(inputs, 1769), 1), round(duration_ms(inputs, 128), 1)
    (18.0, 120.6)
    >>> row = price(inputs, 128)
    >>> round(row.lambda_gb_s, 1), round(row.total_usd, 4)
    (1512.5, 1.4302)
    >>> sqs_requests(1_000, per_request=10), sqs_requests(262_144, per_request=1)
    (1, 4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqsjobs import _usage
from sqsjobs.ops._cost import PRICES_AS_OF, Prices, Usage
from sqsjobs.ops._cost import price as price_usage

#: SQS bills a request per 64 KiB chunk of its payload (the rule lives in sqsjobs._usage)
SQS_CHUNK_BYTES = _usage.SQS_CHUNK_BYTES
#: the in-region round trip assumed for each sequential AWS call (not measured here: moto answers locally)
LATENCY_MS = 5.0
#: the prices (the model's us-east-1 defaults; ``sqsjobs.ops._cost.PRICE_SOURCES`` says where each was read)
PRICES = Prices()
PRICES_SOURCE = (f"AWS list prices, us-east-1, on-demand, first pricing tier, as of {PRICES_AS_OF} "
                 "(sqsjobs.ops._cost.PRICE_SOURCES names each source and its date)")
LAMBDA_ARM_GB_SECOND = PRICES.lambda_gb_second  # USD per GB-s, arm64 (the template's Architectures)
LAMBDA_REQUEST = PRICES.lambda_request  # USD per invocation
DYNAMODB_WRITE_UNIT = PRICES.dynamodb_write_unit  # USD per on-demand write request unit
SQS_REQUEST = PRICES.sqs_request  # USD per standard-queue request (each 64 KiB chunk; jobs are smaller)
CLOUDWATCH_LOGS_GB = PRICES.logs_gb  # USD per GB ingested (EMF lines are log events)
FULL_VCPU_MB = 1769
BATCH = 10
JOBS = 1_000_000
MEMORIES = (128, 512, 1769)


@dataclass(frozen=True)
class Inputs:
    """One framework's measured figures for batches of 10 successful jobs."""

    #: the batch's sequential DynamoDB round trips times LATENCY_MS
    wait_ms: float
    #: client CPU of a batch over real HTTP, on one core (all threads)
    cpu_ms: float
    #: DynamoDB write units per job (failed conditional writes included: AWS bills them)
    wcu_per_job: float
    #: SQS requests per job: the producer's sends, Lambda's poller (receive, delete), the framework's own
    sqs_per_job: float
    #: EMF bytes the framework writes per job (CloudWatch Logs ingests them)
    emf_bytes_per_job: float


@dataclass(frozen=True)
class Priced:
    """The cost of a million jobs at one memory size."""

    memory_mb: int
    duration_ms: float
    lambda_gb_s: float
    lambda_usd: float
    dynamodb_usd: float
    sqs_usd: float
    cloudwatch_usd: float

    @property
    def total_usd(self) -> float:
        return self.lambda_usd + self.dynamodb_usd + self.sqs_usd + self.cloudwatch_usd


def vcpu_share(memory_mb: int) -> float:
    """The share of a vCPU Lambda gives ``memory_mb`` (a single-threaded share above 1,769 MB stays 1)."""
    return min(1.0, memory_mb / FULL_VCPU_MB)


def duration_ms(inputs: Inputs, memory_mb: int) -> float:
    """The modelled duration of one batch at ``memory_mb``: the waits, plus the CPU stretched by the share."""
    return inputs.wait_ms + inputs.cpu_ms / vcpu_share(memory_mb)


def sqs_requests(payload_bytes: int, *, per_request: int) -> int:
    """Billed SQS requests for one request carrying ``per_request`` payloads of ``payload_bytes`` each."""
    return _usage.sqs_billed(payload_bytes * per_request)


def usage(inputs: Inputs, memory_mb: int) -> Usage:
    """What AWS bills for a million jobs in batches of 10 at ``memory_mb``: each invocation rounded up to the ms."""
    invocations = JOBS / BATCH
    billed_ms = math.ceil(duration_ms(inputs, memory_mb))
    return Usage(
        lambda_gb_seconds=invocations * billed_ms / 1000 * memory_mb / 1024,
        lambda_requests=invocations,
        write_units=JOBS * inputs.wcu_per_job,
        sqs_requests=JOBS * inputs.sqs_per_job,
        log_bytes=JOBS * inputs.emf_bytes_per_job,
    )


def price(inputs: Inputs, memory_mb: int) -> Priced:
    """A million jobs in batches of 10 at ``memory_mb``, priced by the runtime's cost model."""
    used = usage(inputs, memory_mb)
    cost = price_usage(used, PRICES)
    return Priced(
        memory_mb=memory_mb,
        duration_ms=duration_ms(inputs, memory_mb),
        lambda_gb_s=used.lambda_gb_seconds,
        lambda_usd=cost.lambda_usd,
        dynamodb_usd=cost.dynamodb_usd,
        sqs_usd=cost.sqs_usd,
        cloudwatch_usd=cost.logs_usd,
    )
