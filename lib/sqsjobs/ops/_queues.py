"""Reading queues from the operator tools (redrive, status): ARN, depth, dead-letter wiring.

Queue references may be URLs, ARNs or names (``sqsjobs.enqueue._addresses``
resolves them). The clients are passed in: the operator tools make theirs with
``sqsjobs._clients.operator_client`` (AWS, or the local cloud on
``--endpoint-url`` / ``AWS_ENDPOINT_URL``). Nothing here runs at import.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from sqsjobs.enqueue._addresses import resolve_queue_url

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_sqs import SQSClient


def queue_arn(sqs_client: SQSClient, url: str) -> str:
    """The queue's ARN (``GetQueueAttributes``).

    Example:
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     queue_arn(sqs, sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"])
        'arn:aws:sqs:eu-west-1:123456789012:jobs-dlq'
    """
    attrs = sqs_client.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]
    return attrs["QueueArn"]


def queue_depth(sqs_client: SQSClient, url: str) -> int:
    """Approximate messages in the queue: visible + in flight + delayed.

    Example:
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        ...     ids = [sqs.send_message(QueueUrl=url, MessageBody="{}", DelaySeconds=d) for d in (0, 0, 60)]
        ...     queue_depth(sqs, url)
        3
    """
    attrs = sqs_client.get_queue_attributes(
        QueueUrl=url,
        AttributeNames=[
            "ApproximateNumberOfMessages",
            "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed",
        ],
    ).get("Attributes", {})
    return sum(int(value) for value in attrs.values())


def dead_letter_queue_of(sqs_client: SQSClient, queue_url: str) -> str | None:
    """The URL of the DLQ that ``queue_url``'s redrive policy names, or None.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     policy = {"deadLetterTargetArn": "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq", "maxReceiveCount": 5}
        ...     _ = sqs.create_queue(QueueName="jobs-dlq")
        ...     jobs = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": json.dumps(policy)})
        ...     dead_letter_queue_of(sqs, jobs["QueueUrl"])
        'https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq'
    """
    attrs = sqs_client.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["RedrivePolicy"])
    policy = attrs.get("Attributes", {}).get("RedrivePolicy")
    if not policy:
        return None
    return resolve_queue_url(sqs_client, json.loads(policy)["deadLetterTargetArn"])


def dead_letter_sources(sqs_client: SQSClient, dlq_url: str) -> Iterator[str]:
    """The queues whose redrive policy names ``dlq_url`` (``ListDeadLetterSourceQueues``).

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        ...     policy = {"deadLetterTargetArn": queue_arn(sqs, dlq_url), "maxReceiveCount": 5}
        ...     _ = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": json.dumps(policy)})
        ...     list(dead_letter_sources(sqs, dlq_url))
        ['https://sqs.eu-west-1.amazonaws.com/123456789012/jobs']
    """
    paginator = sqs_client.get_paginator("list_dead_letter_source_queues")
    for page in paginator.paginate(QueueUrl=dlq_url):
        yield from page.get("queueUrls", [])
