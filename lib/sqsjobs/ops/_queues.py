"""Finding and reaching queues from the operator tools (redrive, status).

Queue references may be URLs, ARNs or names. The clients are passed in: the
operator tools make theirs with ``sqsjobs._clients.operator_client`` (AWS, or
the local cloud on ``--endpoint-url`` / ``AWS_ENDPOINT_URL``). Nothing here
runs at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sqsjobs._errors import QueueNotFoundError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from mypy_boto3_sqs import SQSClient



def resolve_queue_url(sqs_client: SQSClient, ref: str) -> str:
    """A queue URL from a URL, an ARN or a name.

    Example:
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     _ = sqs.create_queue(QueueName="jobs-dlq")
        ...     resolve_queue_url(sqs, "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq")
        'https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq'
    """
    if ref.startswith(("https://", "http://")):
        return ref
    from botocore.exceptions import ClientError

    try:
        if ref.startswith("arn:"):
            parts = ref.split(":")
            if len(parts) != 6 or parts[2] != "sqs":
                raise QueueNotFoundError(f"not an SQS queue ARN: {ref}")
            return sqs_client.get_queue_url(QueueName=parts[5], QueueOwnerAWSAccountId=parts[4])["QueueUrl"]
        return sqs_client.get_queue_url(QueueName=ref)["QueueUrl"]
    except ClientError as exc:
        raise QueueNotFoundError(f"queue {ref!r} not found: {exc}") from exc


def queue_name(url_or_name: str) -> str:
    """The queue name at the end of a URL or ARN.

    Example:
        >>> queue_name("http://127.0.0.1:5000/123456789012/jobs-dlq")
        'jobs-dlq'
    """
    if url_or_name.startswith("arn:"):
        return url_or_name.rsplit(":", 1)[-1]
    return urlparse(url_or_name).path.rstrip("/").rsplit("/", 1)[-1] or url_or_name


def queue_identity(ref: str) -> tuple[str, str] | None:
    """``(account, name)`` of a queue URL or ARN, the same for both forms; None for anything else.

    A DLQ and its source queues share an account and region, so this is
    enough to tell whether two references name the same queue, whatever host
    (AWS or the local cloud) a URL was written with.

    Example:
        >>> queue_identity("http://127.0.0.1:5000/123456789012/jobs")
        ('123456789012', 'jobs')
        >>> queue_identity("arn:aws:sqs:us-east-1:123456789012:jobs")
        ('123456789012', 'jobs')
        >>> queue_identity("jobs") is None
        True
    """
    if ref.startswith("arn:"):
        parts = ref.split(":")
        return (parts[4], parts[5]) if len(parts) == 6 and parts[2] == "sqs" and parts[5] else None
    if ref.startswith(("https://", "http://")):
        path = [p for p in urlparse(ref).path.split("/") if p]
        return (path[0], path[1]) if len(path) == 2 else None
    return None


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
    import json

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
