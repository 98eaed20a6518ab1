"""The messages a redrive run holds: received from the DLQ, not yet deleted or released.

A held message keeps its receipt handle (renewed when it comes back during a
long scan), its letter, its target and the other DLQ copies of the same
original message. Sizes and the transient-error test decide how
:mod:`sqsjobs.ops._redrive` chunks and when it stops. Nothing here calls AWS.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from sqsjobs.enqueue._batching import SQS_MAX_BYTES, SQS_MAX_ENTRIES, batches
from sqsjobs.ops._dlq_letters import dedup_id, resend_attributes
from sqsjobs.ops._redrive_report import PlannedMove
from sqsjobs.store._lease import expiry
from sqsjobs.worker._dead_letters import redrive_record

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import (
        DeleteMessageBatchRequestEntryTypeDef,
        MessageTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )

    from sqsjobs.ops._dlq_letters import DlqMessage
    from sqsjobs.store._lease import LeaseStore

__all__ = ["BATCH_BYTES", "BATCH_SIZE", "TRANSIENT_CODES", "HeldMessage", "Holding", "entry_bytes", "plan",
           "record_counts", "send_entry", "transient", "with_copies"]

# SQS batch APIs take at most 10 entries.
BATCH_SIZE: Final = SQS_MAX_ENTRIES
# A batch's total payload limit: SendMessageBatch's 1 MiB (each letter is within its DLQ's MaximumMessageSize).
BATCH_BYTES: Final = SQS_MAX_BYTES
# SQS error codes that mean "try later", not "this target is unreachable".
TRANSIENT_CODES: Final = frozenset({"RequestThrottled", "Throttling", "ThrottlingException", "ServiceUnavailable",
                                    "InternalError", "InternalFailure", "RequestTimeout"})


@dataclass
class HeldMessage:
    """A received message this run is responsible for until it is deleted or released."""

    message: MessageTypeDef
    letter: DlqMessage
    target: str | None = None
    #: other DLQ copies of the same original message, deleted once this one is sent
    copies: list[HeldMessage] = field(default_factory=list)
    #: the redrive count the message sent back carries (set when its entry is built)
    count: int = 0


def plan(letter: DlqMessage, action: str, target: str | None) -> PlannedMove:
    return PlannedMove(
        message_id=letter.original_message_id,
        job=letter.job,
        reason=letter.reason,
        error_type=letter.error_type,
        age_seconds=letter.age_seconds,
        redrive_count=letter.redrive_count,
        action=action,
        target=target,
        verified=letter.verified,
    )


def transient(error: Any) -> bool:
    """True for an SQS error that says "later" (throttling, a server fault), not "never to this queue".

    Example:
        >>> from botocore.exceptions import ClientError
        >>> transient(ClientError({"Error": {"Code": "RequestThrottled"}}, "SendMessageBatch"))
        True
        >>> transient(ClientError({"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue"},
        ...                         "ResponseMetadata": {"HTTPStatusCode": 400}}, "SendMessageBatch"))
        False
    """
    response = getattr(error, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return code.rsplit(".", 1)[-1] in TRANSIENT_CODES or (isinstance(status, int) and status >= 500)


def with_copies(entries: Iterable[HeldMessage]) -> list[HeldMessage]:
    """``entries`` and the DLQ copies attached to them (released together when a send fails)."""
    return [item for held in entries for item in (held, *held.copies)]


def entry_bytes(held: HeldMessage) -> int:
    size = len(held.message.get("Body", "").encode())
    for name, value in held.message.get("MessageAttributes", {}).items():
        size += len(name) + len(value.get("DataType", "")) + len(value.get("StringValue", "").encode())
        size += len(value.get("BinaryValue", b""))
    return size + 64  # the redrive count attribute and FIFO ids


def send_entry(entry_id: str, held: HeldMessage, *, fifo: bool,
               max_redrives: int) -> SendMessageBatchRequestEntryTypeDef:
    """The ``SendMessageBatch`` entry that sends ``held`` back; sets ``held.count``, the redrive count it carries.

    An unreadable count moved with ``--force`` starts again at ``max_redrives``:
    the guard stops it next time unless forced once more.

    Example:
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> message = {"MessageId": "m", "Body": '{"job": "a"}'}
        >>> held = HeldMessage(message, DlqMessage.from_message(message, now=0.0))
        >>> entry = send_entry("0", held, fifo=True, max_redrives=3)
        >>> entry["MessageGroupId"], held.count
        ('a', 1)
    """
    message, letter = held.message, held.letter
    count = held.count = max_redrives if letter.redrive_count is None else letter.redrive_count + 1
    entry: SendMessageBatchRequestEntryTypeDef = {
        "Id": entry_id,
        "MessageBody": message.get("Body", ""),
        "MessageAttributes": resend_attributes(message, redrive_count=count),
    }
    if fifo:
        # The group keeps per-entity ordering; a message from a standard DLQ
        # has none, and its job name is the closest stand-in.
        entry["MessageGroupId"] = message.get("Attributes", {}).get("MessageGroupId") or letter.job
        entry["MessageDeduplicationId"] = dedup_id(message, count, original_message_id=letter.copy_of)
    return entry


def record_counts(records: LeaseStore, sent: Sequence[tuple[HeldMessage, str]], *, now: float,
                  record_ttl: float) -> list[tuple[HeldMessage, str | None]]:
    """Write ``redrive#<new message id>`` with each sent message's count (one batched write); each with its error.

    The error is None when the count is kept, else why it was not (the caller
    keeps that letter in the DLQ).

    Example:
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> from sqsjobs.store._memory import InMemoryStore
        >>> message = {"MessageId": "m", "Body": '{"job": "a"}'}
        >>> held = HeldMessage(message, DlqMessage.from_message(message, now=0.0), count=1)
        >>> store = InMemoryStore()
        >>> [(h.count, error) for h, error in record_counts(store, [(held, "new-id")], now=0.0, record_ttl=60.0)]
        [(1, None)]
        >>> store.get("redrive#new-id") is not None
        True
    """
    expires_at = expiry(now, record_ttl)
    written = records.write_many([
        redrive_record(message_id, count=held.count, redriven_from=held.letter.copy_of, job=held.letter.job,
                       now=now, expires_at=expires_at) for held, message_id in sent])
    return [(held, None if answer.ok else (answer.error or "refused"))
            for (held, _), answer in zip(sent, written, strict=True)]


class Holding:
    """The DLQ messages a run holds, by message id: admitted when received, gone once deleted or released.

    ``dlq_url`` is set once the run has resolved its DLQ; before that nothing
    is held, and :meth:`release_all` has nothing to do.

    Example:
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> holding = Holding(sqs_client=None)  # admitting calls no AWS
        >>> message = {"MessageId": "m", "Body": "{}", "ReceiptHandle": "r1"}
        >>> letter = DlqMessage.from_message(message, now=0.0)
        >>> holding.admit(message, letter), holding.admit({**message, "ReceiptHandle": "r2"}, letter)
        (True, False)
        >>> holding["m"].message["ReceiptHandle"]
        'r2'
    """

    def __init__(self, sqs_client: Any) -> None:
        self._sqs = sqs_client
        self.dlq_url = ""
        self._held: dict[str, HeldMessage] = {}
        self._seen: set[str] = set()

    def __getitem__(self, message_id: str) -> HeldMessage:
        return self._held[message_id]

    def admit(self, message: MessageTypeDef, letter: DlqMessage) -> bool:
        """Hold ``message``; True when this run has not seen it before."""
        message_id = message.get("MessageId", "")
        if message_id in self._seen:
            # Its visibility ran out during a long scan and it came back: keep
            # the newest receipt handle so the release at the end still works.
            if message_id in self._held:
                self._held[message_id].message = message
            else:
                self._held[message_id] = HeldMessage(message, letter)
            return False
        self._seen.add(message_id)
        self._held[message_id] = HeldMessage(message, letter)
        return True

    def delete(self, sent: Sequence[HeldMessage]) -> tuple[int, int]:
        """Delete ``sent`` from the DLQ (one batch of at most 10): how many were deleted, how many failed."""
        if not sent:
            return 0, 0
        entries: list[DeleteMessageBatchRequestEntryTypeDef] = [
            {"Id": str(i), "ReceiptHandle": held.message.get("ReceiptHandle", "")} for i, held in enumerate(sent)]
        response = self._sqs.delete_message_batch(QueueUrl=self.dlq_url, Entries=entries)
        deleted = response.get("Successful", [])
        for entry in deleted:
            self._held.pop(sent[int(entry["Id"])].letter.message_id, None)
        return len(deleted), len(response.get("Failed", []))

    def release(self, entries: Iterable[HeldMessage]) -> None:
        """Make ``entries`` visible again at once (batches within SQS's byte limit) and stop holding them."""
        for chunk in batches(entries, max_bytes=BATCH_BYTES, size_of=entry_bytes):
            self._sqs.change_message_visibility_batch(
                QueueUrl=self.dlq_url,
                Entries=[{"Id": str(i), "ReceiptHandle": held.message.get("ReceiptHandle", ""), "VisibilityTimeout": 0}
                         for i, held in enumerate(chunk)],
            )
            for held in chunk:
                self._held.pop(held.letter.message_id, None)

    def release_all(self) -> None:
        """Release every message still held (raises what the release raised: the caller reports it)."""
        if self._held and self.dlq_url:
            self.release(list(self._held.values()))
