"""Sending job messages to SQS: one at a time, or in full batches.

``send_many`` packs messages into ``SendMessageBatch`` calls of at most 10
entries and 256 KiB, retries the entries a batch reports as failed (with
full-jitter backoff; sender faults are not retried), and returns a report
instead of raising halfway through.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqsjobs.backoff import BackoffPolicy, RandomSource
from sqsjobs.errors import EnqueueError
from sqsjobs.message import JobMessage

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024
#: entries a batch call reported as failed (throttling, service errors) wait this long
SEND_RETRY_BACKOFF = BackoffPolicy(base=0.1, cap=2.0)
#: what SQS takes as a MessageGroupId: 1..128 ASCII letters, digits and punctuation (no spaces)
MESSAGE_GROUP_ID = re.compile(r"[!-~]{1,128}")


@dataclass(frozen=True, kw_only=True)
class FailedEntry:
    """A message SQS did not take: its position in the input, and why."""

    index: int
    key: str
    code: str
    message: str
    sender_fault: bool


@dataclass(frozen=True, kw_only=True)
class EnqueueReport:
    """What ``enqueue_many`` did: message ids by input position, and the failures.

    Example:
        >>> r = EnqueueReport(message_ids={0: "m-1"}, failed=(), calls=1)
        >>> r.ok, r.sent
        (True, 1)
    """

    message_ids: dict[int, str] = field(default_factory=dict)
    failed: tuple[FailedEntry, ...] = ()
    calls: int = 0

    @property
    def ok(self) -> bool:
        """True when every message was sent."""
        return not self.failed

    @property
    def sent(self) -> int:
        """How many messages SQS accepted."""
        return len(self.message_ids)


class Producer:
    """Sends ``JobMessage``s to one queue.

    Example:
        >>> producer = Producer(sqs_client, queue_url)  # doctest: +SKIP
        >>> producer.send(message)  # doctest: +SKIP
        '5fea7756-0ea4-451a-a703-a558b933e274'
    """

    def __init__(
        self,
        client: SQSClient,
        queue_url: str,
        *,
        retries: int = 3,
        backoff: BackoffPolicy = SEND_RETRY_BACKOFF,
        random: RandomSource | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.queue_url = queue_url
        self.fifo = queue_url.endswith(".fifo")
        self.retries = retries
        self.backoff = backoff
        self.random = random
        self.sleep = sleep

    def send(self, message: JobMessage) -> str:
        """Send one message; raises ``EnqueueError`` when SQS refuses it."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response = self.client.send_message(QueueUrl=self.queue_url, **self._entry(message))
        except (ClientError, BotoCoreError) as error:
            raise EnqueueError(f"SQS refused job {message.job!r} (key {message.key!r}): {error}") from error
        return response["MessageId"]

    def send_many(self, messages: Sequence[JobMessage]) -> EnqueueReport:
        """Send in full batches; failed entries are retried, then reported (never raised)."""
        from botocore.exceptions import BotoCoreError, ClientError

        ids: dict[int, str] = {}
        failed: dict[int, FailedEntry] = {}
        calls = 0
        pending = []
        built: dict[int, dict[str, Any]] = {}
        for i, message in enumerate(messages):
            # Refuse what SQS would refuse before sending anything, per entry.
            try:
                if message.size() > MAX_BATCH_BYTES:
                    raise EnqueueError(f"{message.size()} bytes, over SQS's {MAX_BATCH_BYTES}-byte limit")
                built[i] = {"Id": str(i), **self._entry(message)}
            except EnqueueError as error:
                failed[i] = FailedEntry(
                    index=i, key=message.key, code="Invalid", message=str(error), sender_fault=True
                )
                continue
            pending.append(i)
        for attempt in range(1, self.retries + 2):
            retry: list[int] = []
            for chunk in self._chunks(messages, pending) if pending else []:
                calls += 1
                entries = [built[i] for i in chunk]
                try:
                    response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)  # type: ignore[arg-type]
                except (ClientError, BotoCoreError) as error:
                    # The whole call failed (throttled, network): every entry may be retried.
                    for i in chunk:
                        failed[i] = FailedEntry(
                            index=i, key=messages[i].key, code=type(error).__name__, message=str(error),
                            sender_fault=False,
                        )
                    retry.extend(chunk)
                    continue
                for ok in response.get("Successful", []):
                    index = int(ok["Id"])
                    ids[index] = ok["MessageId"]
                    failed.pop(index, None)
                for bad in response.get("Failed", []):
                    index = int(bad["Id"])
                    failed[index] = FailedEntry(
                        index=index, key=messages[index].key, code=bad.get("Code", ""),
                        message=bad.get("Message", ""), sender_fault=bool(bad.get("SenderFault")),
                    )
                    if not bad.get("SenderFault"):
                        retry.append(index)
            if not retry or attempt > self.retries:
                break
            self.sleep(self.backoff.next_delay(attempt, self.random))
            pending = sorted(retry)
        return EnqueueReport(message_ids=ids, failed=tuple(failed[i] for i in sorted(failed)), calls=calls)

    def _entry(self, message: JobMessage) -> dict[str, Any]:
        entry: dict[str, Any] = {"MessageBody": message.body, "MessageAttributes": message.attributes()}
        if self.fifo:
            if message.delay:
                raise EnqueueError(
                    f"job {message.job!r}: FIFO queues take no per-message delay; "
                    "set the queue's DelaySeconds or use a standard queue"
                )
            if message.tenant is not None:
                raise EnqueueError(
                    f"job {message.job!r}: tenant={message.tenant!r} sets a standard queue's MessageGroupId (SQS fair "
                    "queues); on a FIFO queue the group id orders messages: use group= instead"
                )
            # FIFO queues take no per-message delay; the group defaults to the key so
            # unrelated jobs never queue behind each other (one group = one consumer).
            entry["MessageGroupId"] = _group_id(message)
            entry["MessageDeduplicationId"] = message.dedup_id
        else:
            if message.delay:
                entry["DelaySeconds"] = message.delay
            if message.tenant is not None:
                # A fair queue: one tenant's backlog does not hold the others' messages back.
                entry["MessageGroupId"] = message.tenant
        return entry

    def _chunks(self, messages: Sequence[JobMessage], indexes: list[int]) -> list[list[int]]:
        chunks: list[list[int]] = []
        current: list[int] = []
        size = 0
        for i in indexes:
            entry_size = messages[i].size()
            if current and (len(current) == MAX_BATCH_ENTRIES or size + entry_size > MAX_BATCH_BYTES):
                chunks.append(current)
                current, size = [], 0
            current.append(i)
            size += entry_size
        if current:
            chunks.append(current)
        return chunks


def _group_id(message: JobMessage) -> str:
    """The FIFO MessageGroupId: the message's group, else its key (hashed when SQS would refuse it)."""
    if message.group is not None:
        if not MESSAGE_GROUP_ID.fullmatch(message.group):
            raise EnqueueError(
                f"job {message.job!r}: group {message.group!r} is not a valid MessageGroupId: use 1..128 ASCII "
                "letters, digits or punctuation (no spaces), e.g. an account id"
            )
        return message.group
    key = message.key[:128]
    if MESSAGE_GROUP_ID.fullmatch(key):
        return key
    # Spaces or non-ASCII in the key: its digest is a stable group of the same key.
    return hashlib.sha256(message.key.encode("utf-8")).hexdigest()
