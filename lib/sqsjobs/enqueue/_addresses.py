"""Queue addresses: a queue's URL from a URL, an ARN or a name, its name, its ``(account, name)`` identity.

Every side uses these: the producer's one-time schedules (an ARN from a URL),
the operator tools (``sqsjobs.ops``) and the local cloud. They live here, on
the runtime's side, so that nothing the worker, relay or scheduler imports
reaches into ``sqsjobs.ops`` (tests/unit/test_handler_imports.py). The client is
passed in; nothing runs at import.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlparse

from sqsjobs._errors import QueueNotFoundError

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

__all__ = ["queue_identity", "queue_name", "resolve_queue_url"]


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
