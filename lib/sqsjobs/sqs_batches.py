"""Sending many messages to one queue: batches of at most 10 entries and 256 KiB.

The worker sends dead letters and re-sent messages this way. A batch call
that fails as a whole (``BatchRequestTooLong``, a throttle) is retried entry
by entry, so one oversized or unlucky entry never holds back the others.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from sqsjobs.dead_letter import entry_size

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024

T = TypeVar("T")


def chunked(items: Iterable[T], *, count: int = MAX_BATCH_ENTRIES, max_bytes: int | None = None,
            size: Callable[[T], int] = lambda _: 0) -> list[list[T]]:
    """``items`` in order, cut into lists of at most ``count`` items and ``max_bytes`` in all.

    An item larger than ``max_bytes`` on its own gets a list of its own.

    Example:
        >>> chunked(range(5), count=2)
        [[0, 1], [2, 3], [4]]
        >>> chunked(["aaaa", "bb", "cc", "d"], max_bytes=5, size=len)
        [['aaaa'], ['bb', 'cc', 'd']]
    """
    chunks: list[list[T]] = []
    current: list[T] = []
    used = 0
    for item in items:
        weight = size(item)
        if current and (len(current) == count or (max_bytes is not None and used + weight > max_bytes)):
            chunks.append(current)
            current, used = [], 0
        current.append(item)
        used += weight
    if current:
        chunks.append(current)
    return chunks


def send_entries(sqs: SQSClient, queue_url: str, entries: Sequence[dict[str, Any]]) -> dict[str, str | None]:
    """Send ``SendMessageBatch`` entries (unique ``Id`` each); returns each Id's error, or None when sent."""
    from botocore.exceptions import BotoCoreError, ClientError

    outcome: dict[str, str | None] = {}
    for chunk in chunked(entries, max_bytes=MAX_BATCH_BYTES, size=entry_size):
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=chunk)  # type: ignore[arg-type]
        except (ClientError, BotoCoreError) as error:
            if len(chunk) == 1:
                outcome[chunk[0]["Id"]] = str(error)
                continue
            for entry in chunk:  # the batch as a whole was refused: each entry on its own
                outcome.update(send_entries(sqs, queue_url, [entry]))
            continue
        for ok in response.get("Successful", []):
            outcome[ok["Id"]] = None
        for bad in response.get("Failed", []):
            outcome[bad["Id"]] = f"{bad.get('Code')}: {bad.get('Message')}"
    return outcome
