"""Cutting what goes to SQS into batch calls: at most 10 entries, and at most 1 MiB, per call.

``SendMessageBatch``, ``DeleteMessageBatch`` and ``ChangeMessageVisibilityBatch``
take 10 entries; a ``SendMessageBatch`` also takes at most 1 MiB in all (the sum
of its entries; each entry is also within its queue's ``MaximumMessageSize``).
The producer, redrive and the worker cut their entries with ``batches``; the
worker sends its dead letters and re-sent messages with ``send_entries``, which
falls back to one call per entry when SQS refuses a batch as a whole and
returns the id SQS gave each message it took.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

T = TypeVar("T")

#: entries per SQS batch call
SQS_MAX_ENTRIES = 10
#: bytes per SendMessageBatch call (every message's body and attributes together): SQS's request limit
SQS_MAX_BYTES = 1024 * 1024


def entry_size(entry: dict[str, Any]) -> int:
    """Bytes SQS counts for a send entry: the body plus every attribute's name, type and value.

    Example:
        >>> entry_size({"MessageBody": "abc", "MessageAttributes": {"a": {"DataType": "String", "StringValue": "x"}}})
        11
    """
    size = len(str(entry.get("MessageBody", "")).encode("utf-8", "surrogatepass"))
    for name, attr in entry.get("MessageAttributes", {}).items():
        size += len(name.encode("utf-8", "surrogatepass")) + len(str(attr.get("DataType") or "").encode())
        size += len(str(attr.get("StringValue") or "").encode("utf-8", "surrogatepass"))
    return size


def batches(
    items: Iterable[T],
    *,
    max_items: int = SQS_MAX_ENTRIES,
    max_bytes: int | None = None,
    size_of: Callable[[T], int] | None = None,
) -> Iterator[list[T]]:
    """Consecutive batches of ``items``, in order: at most ``max_items`` each and, with ``size_of``, ``max_bytes``.

    An item bigger than ``max_bytes`` on its own still gets a batch (alone): callers refuse such items first.

    Example:
        >>> list(batches(range(5), max_items=2))
        [[0, 1], [2, 3], [4]]
        >>> list(batches(["aaaa", "bb", "cc", "d"], max_bytes=5, size_of=len))
        [['aaaa'], ['bb', 'cc', 'd']]
    """
    if max_items < 1:
        raise ValueError(f"max_items must be at least 1, got {max_items}")
    batch: list[T] = []
    total = 0
    for item in items:
        size = size_of(item) if size_of is not None else 0
        full = len(batch) >= max_items or (max_bytes is not None and total + size > max_bytes)
        if batch and full:
            yield batch
            batch, total = [], 0
        batch.append(item)
        total += size
    if batch:
        yield batch


@dataclass(frozen=True, kw_only=True)
class Sent:
    """What SQS said about one ``SendMessageBatch`` entry: the id it gave the message, or why it refused it.

    The id is what the worker keys its DLQ evidence by (``sqsjobs.worker._dead_letters``):
    SQS makes it up, so nothing a sender writes can name it in advance.

    Example:
        >>> Sent(message_id="4f0c...").ok, Sent(error="InvalidParameterValue: too big").ok
        (True, False)
    """

    message_id: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when SQS accepted the entry."""
        return self.error is None


def send_entries(sqs: SQSClient, queue_url: str, entries: Sequence[dict[str, Any]]) -> dict[str, Sent]:
    """Send ``SendMessageBatch`` entries (a unique ``Id`` each); returns what SQS said of each Id.

    A call SQS refuses as a whole (``BatchRequestTooLong``, a throttle) is
    retried entry by entry, so one oversized or unlucky entry never holds back
    the others. An Id missing from the answer was not answered: treat it as not sent.
    """
    from botocore.exceptions import BotoCoreError, ClientError

    outcome: dict[str, Sent] = {}
    for chunk in batches(entries, max_bytes=SQS_MAX_BYTES, size_of=entry_size):
        try:
            response = sqs.send_message_batch(QueueUrl=queue_url, Entries=chunk)  # type: ignore[arg-type]
        except (ClientError, BotoCoreError) as error:
            if len(chunk) == 1:
                outcome[chunk[0]["Id"]] = Sent(error=str(error))
                continue
            for entry in chunk:  # the batch as a whole was refused: each entry on its own
                outcome.update(send_entries(sqs, queue_url, [entry]))
            continue
        for ok in response.get("Successful", []):
            outcome[ok["Id"]] = Sent(message_id=ok.get("MessageId"))
        for bad in response.get("Failed", []):
            outcome[bad["Id"]] = Sent(error=f"{bad.get('Code')}: {bad.get('Message')}")
    return outcome
