"""Look at a queue without consuming it: receive, hold a moment, make every message visible again.

The one peek of the code base: ``sqsjobs status`` and the console read the DLQ
with it, ``sqsjobs.testing.messages_in`` and the local cloud's ``peek`` read any
queue. A receive with a zero visibility timeout would hand back the same first
ten messages every time, so each batch is hidden for ``hold_seconds`` (long
enough to finish the scan, short enough that a crash hides nothing for long)
and every message is released at the end, in batches of ten, even when a
receive fails. A message seen twice (its hold ran out during a long scan) is
counted once, under its newest receipt handle; a round that brings nothing
new ends the scan.

What it must never do: delete, or leave a message hidden past the scan.
Every receive counts toward the queue's ``maxReceiveCount``: peek a jobs queue
only in tests and the local cloud, never in production (``sqsjobs status``
peeks only the DLQ). The client is passed in; nothing runs at import.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import MessageTypeDef

__all__ = ["PEEK_VISIBILITY_SECONDS", "make_visible", "peek"]

#: how long a peeked batch stays hidden while the scan goes on
PEEK_VISIBILITY_SECONDS: Final = 30
#: SQS's batch limit (ReceiveMessage, ChangeMessageVisibilityBatch)
_BATCH: Final = 10


def peek(sqs_client: SQSClient, queue_url: str, *, max_messages: int,
         hold_seconds: int = PEEK_VISIBILITY_SECONDS) -> list[MessageTypeDef]:
    """Up to ``max_messages`` distinct messages of the queue (bodies and attributes), all visible again afterwards.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        ...     for i in range(12):
        ...         _ = sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"n": i}))
        ...     peeked = peek(sqs, url, max_messages=100)
        ...     visible = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
        ...     len(peeked), visible["Attributes"]["ApproximateNumberOfMessages"]
        (12, '12')
    """
    received: dict[str, MessageTypeDef] = {}
    try:
        while len(received) < max_messages:
            messages = sqs_client.receive_message(
                QueueUrl=queue_url,
                MaxNumberOfMessages=min(_BATCH, max_messages - len(received)),
                VisibilityTimeout=hold_seconds,
                WaitTimeSeconds=0,
                MessageAttributeNames=["All"],
                AttributeNames=["All"],
            ).get("Messages", [])
            fresh = [m for m in messages if m.get("MessageId", "") not in received]
            for message in messages:
                received[message.get("MessageId", "")] = message  # the newest receipt handle releases it
            if not fresh:
                break
    finally:
        make_visible(sqs_client, queue_url, received.values())
    return list(received.values())


def make_visible(sqs_client: SQSClient, queue_url: str, messages: Iterable[MessageTypeDef]) -> None:
    """Make ``messages`` (received from ``queue_url``) visible at once, ten per call.

    Example:
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        ...     _ = sqs.send_message(QueueUrl=url, MessageBody="{}")
        ...     held = sqs.receive_message(QueueUrl=url, VisibilityTimeout=300)["Messages"]
        ...     make_visible(sqs, url, held)
        ...     len(sqs.receive_message(QueueUrl=url).get("Messages", []))
        1
    """
    handles = [m.get("ReceiptHandle", "") for m in messages]
    for start in range(0, len(handles), _BATCH):
        sqs_client.change_message_visibility_batch(
            QueueUrl=queue_url,
            Entries=[{"Id": str(i), "ReceiptHandle": handle, "VisibilityTimeout": 0}
                     for i, handle in enumerate(handles[start:start + _BATCH])],
        )
