"""What a million successful jobs cost on AWS, from the measured figures: Lambda, DynamoDB, SQS, CloudWatch.

The inputs are measured by ``bench.figures`` for each framework; this module
only prices them, so the arithmetic can be read (and checked) in one place.

Lambda duration per batch of 10, at ``memory`` MB::

    duration = wall + cpu * (1 / share - 1),   share = min(1, memory / 1769)

``wall`` is the measured wall time of a batch with every AWS call answered
after 5 ms (the Stubber run), on a machine where the batch had a whole core;
``cpu`` is the CPU time of the same batches. Lambda gives a function
``memory / 1769`` of a vCPU below 1,769 MB, so the CPU part stretches by
``1 / share`` and the waiting part does not. Billing rounds each invocation up
to the millisecond and adds the request charge.

Example:
    >>> inputs = Inputs(wall_ms=20.0, cpu_ms=8.0, wcu_per_job=2.0, sqs_per_job=0.3, emf_bytes_per_job=40.0)
    >>> round(duration_ms(inputs, 1769), 1), round(duration_ms(inputs, 128), 1)
    (20.0, 122.6)
    >>> row = price(inputs, 128)
    >>> round(row.lambda_gb_s, 1), round(row.total_usd, 4)
    (1537.5, 1.4305)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: where the prices below come from, and when they were read
PRICES_SOURCE = ("AWS list prices, us-east-1, on-demand, first pricing tier, as of 2025-06-01 "
                 "(unchanged since DynamoDB's on-demand cut of 2024-11-01)")
LAMBDA_ARM_GB_SECOND = 0.0000133334  # USD per GB-s, arm64 (the template's Architectures)
LAMBDA_REQUEST = 0.20 / 1e6  # USD per invocation
DYNAMODB_WRITE_UNIT = 0.625 / 1e6  # USD per on-demand write request unit
SQS_REQUEST = 0.40 / 1e6  # USD per standard-queue request (each 64 KiB chunk; jobs are smaller)
CLOUDWATCH_LOGS_GB = 0.50  # USD per GB ingested (EMF lines are log events)
FULL_VCPU_MB = 1769
BATCH = 10
JOBS = 1_000_000
MEMORIES = (128, 512, 1769)


@dataclass(frozen=True)
class Inputs:
    """One framework's measured figures for batches of 10 successful jobs."""

    #: wall time of a batch, every AWS call answered after 5 ms, with a whole core
    wall_ms: float
    #: CPU time of the same batch (all threads)
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
    """The modelled duration of one batch at ``memory_mb``: waits as measured, CPU stretched by the share."""
    return inputs.wall_ms + inputs.cpu_ms * (1 / vcpu_share(memory_mb) - 1)


def price(inputs: Inputs, memory_mb: int) -> Priced:
    """A million jobs in batches of 10 at ``memory_mb``."""
    invocations = JOBS / BATCH
    billed_ms = math.ceil(duration_ms(inputs, memory_mb))
    gb_s = invocations * billed_ms / 1000 * memory_mb / 1024
    return Priced(
        memory_mb=memory_mb,
        duration_ms=duration_ms(inputs, memory_mb),
        lambda_gb_s=gb_s,
        lambda_usd=gb_s * LAMBDA_ARM_GB_SECOND + invocations * LAMBDA_REQUEST,
        dynamodb_usd=JOBS * inputs.wcu_per_job * DYNAMODB_WRITE_UNIT,
        sqs_usd=JOBS * inputs.sqs_per_job * SQS_REQUEST,
        cloudwatch_usd=JOBS * inputs.emf_bytes_per_job / 1e9 * CLOUDWATCH_LOGS_GB,
    )
