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
#: the queue a record with a ``group_id`` comes from, unless another ARN is given (group ids order FIFO queues)
DEFAULT_FIFO_ARN = DEFAULT_ARN + ".fifo"


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
    event_source_arn: str | None = None,
    receipt_handle: str | None = None,
    first_receive_ms: int | None = None,
    sent_ms: int | None = None,
    tenant: str | None = None,
) -> dict[str, Any]:
    """One record as Lambda's SQS poller delivers it; ``body`` may be a dict (JSON-encoded) or raw text.

    ``group_id`` makes it a FIFO queue's record (from ``DEFAULT_FIFO_ARN`` unless
    ``event_source_arn`` says otherwise); ``tenant`` is a standard (fair)
    queue's ``MessageGroupId``.

    Example:
        >>> sqs_record({}, tenant="acme")["attributes"]["MessageGroupId"]
        'acme'
        >>> sqs_record({}, group_id="a")["eventSourceARN"].endswith(".fifo")
        True
    """
    if group_id is not None and tenant is not None:
        raise ValueError("a record has either a FIFO group_id or a tenant (a standard queue's group id), not both")
    if event_source_arn is None:
        event_source_arn = DEFAULT_FIFO_ARN if group_id is not None else DEFAULT_ARN
    message_id = message_id or str(uuid.uuid4())
    now_ms = int(time.time() * 1000)
    attrs = {
        "ApproximateReceiveCount": str(attempt),
        "SentTimestamp": str(sent_ms or now_ms),
        "ApproximateFirstReceiveTimestamp": str(first_receive_ms or now_ms),
    }
    if group_id is not None or tenant is not None:
        attrs["MessageGroupId"] = group_id or tenant or ""
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
    every time, so they are held for a moment and then released in batches
    (the one peek: ``sqsjobs.ops._peek``).
    """
    from sqsjobs.ops._peek import peek

    return peek(client, queue_url, max_messages=max_messages)

