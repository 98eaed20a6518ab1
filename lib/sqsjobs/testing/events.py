"""Lambda-shaped SQS events and contexts, and reading real (moto) queues as Lambda's poller would.

    >>> event = sqs_event([{"v": 1, "job": "invoice-email", "key": "invoice-email:42", "args": {"invoice_id": 42}}])
    >>> len(event["Records"])
    1
    >>> FakeContext(remaining_ms=30_000, clock=lambda: 0.0).get_remaining_time_in_millis()
    30000

This module must not import moto or pytest at import time: it is part of the
installed package.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

DEFAULT_ARN = "arn:aws:sqs:us-east-1:123456789012:sqsjobs-jobs"


@dataclass
class FakeContext:
    """A Lambda context whose remaining time follows a clock (real or injected).

    ``remaining_ms`` is the time left when the context is created.
    """

    remaining_ms: int = 60_000
    function_name: str = "sqsjobs-worker"
    aws_request_id: str = field(default_factory=lambda: str(uuid.uuid4()))
    clock: Callable[[], float] = time.monotonic
    memory_limit_in_mb: int = 512
    invoked_function_arn: str = "arn:aws:lambda:us-east-1:123456789012:function:sqsjobs-worker"
    _started: float = field(default=0.0, init=False)

    def __post_init__(self) -> None:
        self._started = self.clock()

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left, never below zero."""
        return max(0, int(self.remaining_ms - (self.clock() - self._started) * 1000))


def sqs_record(
    body: Any,
    *,
    message_id: str | None = None,
    attempt: int = 1,
    group_id: str | None = None,
    attributes: dict[str, str] | None = None,
    event_source_arn: str = DEFAULT_ARN,
    receipt_handle: str | None = None,
    first_receive_ms: int | None = None,
    sent_ms: int | None = None,
) -> dict[str, Any]:
    """One record as Lambda's SQS poller delivers it; ``body`` may be a dict (JSON-encoded) or raw text."""
    message_id = message_id or str(uuid.uuid4())
    now_ms = int(time.time() * 1000)
    attrs = {
        "ApproximateReceiveCount": str(attempt),
        "SentTimestamp": str(sent_ms or now_ms),
        "ApproximateFirstReceiveTimestamp": str(first_receive_ms or now_ms),
    }
    if group_id is not None:
        attrs["MessageGroupId"] = group_id
    return {
        "messageId": message_id,
        "receiptHandle": receipt_handle or f"rh-{message_id}",
        "body": body if isinstance(body, str) else json.dumps(body),
        "attributes": attrs,
        "messageAttributes": {
            name: {"stringValue": value, "dataType": "String"} for name, value in (attributes or {}).items()
        },
        "md5OfBody": "",
        "eventSource": "aws:sqs",
        "eventSourceARN": event_source_arn,
        "awsRegion": event_source_arn.split(":")[3],
    }


def sqs_event(bodies: Iterable[Any], **record_options: Any) -> dict[str, Any]:
    """An SQS event with one record per body."""
    return {"Records": [sqs_record(body, **record_options) for body in bodies]}


def receive_event(client: SQSClient, queue_url: str, *, max_messages: int = 10, wait: int = 0,
                  visibility_timeout: int | None = None) -> dict[str, Any]:
    """Receive real messages from a (moto) queue and shape them as Lambda's poller does.

    Returns an event with no records when the queue gave nothing.
    """
    kwargs: dict[str, Any] = {}
    if visibility_timeout is not None:
        kwargs["VisibilityTimeout"] = visibility_timeout
    response = client.receive_message(
        QueueUrl=queue_url, MaxNumberOfMessages=max_messages, WaitTimeSeconds=wait,
        AttributeNames=["All"], MessageAttributeNames=["All"], **kwargs,
    )
    arn = queue_arn(client, queue_url)
    return {"Records": [record_from_message(message, arn) for message in response.get("Messages", [])]}


def queue_arn(client: SQSClient, queue_url: str) -> str:
    """The queue's ARN (asked once per call; tests only)."""
    attrs = client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["QueueArn"])["Attributes"]
    return attrs["QueueArn"]


def record_from_message(message: Any, arn: str) -> dict[str, Any]:
    """A received SQS message (boto3's shape) as the record Lambda's poller puts in the event."""
    attributes = {k: str(v) for k, v in message.get("Attributes", {}).items()}
    message_attributes: dict[str, Any] = {}
    for name, attr in message.get("MessageAttributes", {}).items():
        converted: dict[str, Any] = {"dataType": attr["DataType"]}
        if "StringValue" in attr:
            converted["stringValue"] = attr["StringValue"]
        if "BinaryValue" in attr:
            converted["binaryValue"] = attr["BinaryValue"]
        message_attributes[name] = converted
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": attributes,
        "messageAttributes": message_attributes,
        "md5OfBody": message.get("MD5OfBody", ""),
        "eventSource": "aws:sqs",
        "eventSourceARN": arn,
        "awsRegion": arn.split(":")[3],
    }


def drain_queue(client: SQSClient, queue_url: str, handle: Callable[[dict[str, Any]], Any],
                *, rounds: int = 50, visibility_timeout: int | None = None) -> int:
    """Receive-and-handle until the queue gives nothing; returns how many batches were handled.

    A stand-in for Lambda's poller in integration tests (the local cloud has the real emulation).
    """
    batches = 0
    for _ in range(rounds):
        event = receive_event(client, queue_url, visibility_timeout=visibility_timeout)
        if not event["Records"]:
            return batches
        handle(event)
        batches += 1
    return batches


def messages_in(client: SQSClient, queue_url: str, *, max_messages: int = 1000) -> Sequence[Any]:
    """Every message currently visible in a queue; all of them are visible again afterwards.

    Each message is received once (its receive count goes up by one). Receiving
    with a zero visibility timeout instead would hand back the same first ten
    every time, so they are held for a moment and then released in batches.
    """
    seen: dict[str, Any] = {}
    while len(seen) < max_messages:
        response = client.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=30,
                                          AttributeNames=["All"], MessageAttributeNames=["All"])
        batch = response.get("Messages", [])
        if not batch:
            break
        seen.update({m["MessageId"]: m for m in batch})
    held = [m["ReceiptHandle"] for m in seen.values()]
    for i in range(0, len(held), 10):
        client.change_message_visibility_batch(QueueUrl=queue_url, Entries=[
            {"Id": str(j), "ReceiptHandle": handle, "VisibilityTimeout": 0} for j, handle in enumerate(held[i:i + 10])
        ])
    return list(seen.values())
