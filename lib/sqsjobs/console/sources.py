"""Where the console reads from: AWS clients, the resolved queues and table, a clock.

Resolved once at start, so a misspelt queue is a one-line error before the
port opens, not a broken page.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

from sqsjobs._clients import operator_client
from sqsjobs.enqueue._addresses import resolve_queue_url
from sqsjobs.ops._queues import dead_letter_queue_of

if TYPE_CHECKING:
    from mypy_boto3_cloudwatch import CloudWatchClient
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.console.config import ConsoleConfig
    from sqsjobs.store._lease import LeaseStore


@dataclass(frozen=True, kw_only=True)
class Sources:
    """The injected clients and what the options resolved to."""

    sqs: SQSClient
    cloudwatch: CloudWatchClient
    dynamodb: DynamoDBClient
    queue_url: str | None
    dlq_url: str | None
    table: str | None
    clock: Callable[[], float] = time.time
    #: where delayed jobs wait (the job lookup shows one that has no record yet as scheduled)
    schedule_group: str | None = None
    scheduler: EventBridgeSchedulerClient | None = None
    #: held while this console peeks at or redrives the DLQ: a peek hides letters for a moment,
    #: and a redrive that received nothing because of it would stop early
    dlq_lock: threading.Lock = field(default_factory=threading.Lock, compare=False, repr=False)

    @cached_property
    def records(self) -> LeaseStore | None:
        """The idempotency table as a store (the DLQ's evidence, job records); None without ``table``."""
        if self.table is None:
            return None
        from sqsjobs.store._dynamodb import DynamoDBStore

        return DynamoDBStore(self.dynamodb, self.table)

    @classmethod
    def connect(cls, config: ConsoleConfig, *, clock: Callable[[], float] = time.time) -> Sources:
        """Build clients for AWS or the local cloud and resolve the queues (QueueNotFoundError if one is not there)."""
        sqs = operator_client("sqs", endpoint_url=config.endpoint_url, region=config.region)
        queue_url = resolve_queue_url(sqs, config.queue) if config.queue else None
        if config.dlq:
            dlq_url: str | None = resolve_queue_url(sqs, config.dlq)
        else:
            dlq_url = dead_letter_queue_of(sqs, queue_url) if queue_url else None
        return cls(
            sqs=sqs,
            cloudwatch=operator_client("cloudwatch", endpoint_url=config.endpoint_url, region=config.region),
            dynamodb=operator_client("dynamodb", endpoint_url=config.endpoint_url, region=config.region),
            queue_url=queue_url,
            dlq_url=dlq_url,
            table=config.table,
            clock=clock,
            schedule_group=config.schedule_group,
            scheduler=(operator_client("scheduler", endpoint_url=config.endpoint_url, region=config.region)
                       if config.schedule_group else None),
        )
