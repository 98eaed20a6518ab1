"""AWS resources for tests, shaped like the template's (imported by conftests and tests)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

MAX_ATTEMPTS = 3


@dataclass
class Aws:
    sqs: Any
    dynamodb: Any
    queue_url: str
    dlq_url: str
    table: str


def create_table(dynamodb: Any, name: str) -> None:
    # The same key schema and TTL attribute as the template's idempotency table.
    dynamodb.create_table(
        TableName=name,
        KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
        BillingMode="PAY_PER_REQUEST",
    )
    dynamodb.update_time_to_live(
        TableName=name, TimeToLiveSpecification={"Enabled": True, "AttributeName": "expires_at"}
    )


def create_queues(sqs: Any, name: str, *, fifo: bool = False, max_attempts: int = MAX_ATTEMPTS) -> tuple[str, str]:
    suffix = ".fifo" if fifo else ""
    extra = {"FifoQueue": "true"} if fifo else {}
    dlq_url = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes={**extra})["QueueUrl"]
    dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    # As the template: SQS's redrive is the backstop, one receive after the worker's last attempt.
    queue_url = sqs.create_queue(
        QueueName=f"{name}{suffix}",
        Attributes={
            **extra,
            "VisibilityTimeout": "120",
            "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(max_attempts + 1)}),
        },
    )["QueueUrl"]
    return queue_url, dlq_url




class Serialized:
    """A boto3 client whose calls run one at a time, as real DynamoDB requests are atomic.

    moto's in-process mock is not: a transaction snapshots the table and a
    cancelled one restores its snapshot, undoing what a concurrent request
    wrote meanwhile. The worker's writes run on a thread pool, so tests that
    race transactions on one item (a group's counter) wrap the client in this
    (the local cloud's server serializes DynamoDB the same way:
    ``sqsjobs.local.serial_moto``).
    """

    def __init__(self, client: Any) -> None:
        import threading

        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._client, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attribute(*args, **kwargs)

        return call
