"""``FakeSQS``: an in-memory SQS that records every call, for testing an app's jobs without AWS.

It answers the calls sqsjobs' runtime makes (``send_message``,
``send_message_batch``, ``change_message_visibility[_batch]``, and the
poller's ``receive_message`` / ``delete_message[_batch]``), plus
``get_queue_attributes``/``get_queue_url``, and has the ``meta`` a botocore
client has (``meta.endpoint_url``, ``meta.region_name``). Queues exist as soon
as a URL is used. Time is the injected ``clock``: a visibility timeout or a
delay ends when the clock says so, so tests never sleep. Anything else raises
``AttributeError`` naming moto as the tool for it.

Example:
    >>> sqs = FakeSQS(clock=lambda: 100.0)
    >>> url = sqs.queue_url("jobs")
    >>> message_id = sqs.send_message(QueueUrl=url, MessageBody='{"v": 1}')["MessageId"]
    >>> [m.body for m in sqs.messages(url)], [c.operation for c in sqs.calls]
    (['{"v": 1}'], ['SendMessage'])
    >>> sqs.refuse("SendMessage", code="ThrottlingException")
    >>> sqs.send_message(QueueUrl=url, MessageBody="{}")
    Traceback (most recent call last):
    ...
    botocore.exceptions.ClientError: An error occurred (ThrottlingException) when calling the SendMessage operation: \
refused by FakeSQS.refuse
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqsjobs.testing._sqs_rules import (
    MAX_BATCH_BYTES,
    MAX_DELAY_SECONDS,
    MAX_VISIBILITY_SECONDS,
    EntryError,
    check_batch,
    client_error,
    entry_bytes,
    md5,
    per_entry,
    single,
)

DEFAULT_REGION = "us-east-1"
DEFAULT_ACCOUNT = "123456789012"
#: a new queue's MaximumMessageSize when none is given (SQS's own default; ``queue_url(..., maximum_message_size=)``)
DEFAULT_MAXIMUM_MESSAGE_SIZE = 1024 * 1024
DEFAULT_VISIBILITY_SECONDS = 30


@dataclass(frozen=True, kw_only=True)
class SqsCall:
    """One API call the fake answered (or refused), with its parameters as passed."""

    operation: str
    params: dict[str, Any]


@dataclass(kw_only=True)
class QueuedMessage:
    """A message on a fake queue: what was sent, and where it is in its life."""

    message_id: str
    queue_url: str
    body: str
    attributes: dict[str, dict[str, str]]
    sent_at: float
    group_id: str | None = None
    dedup_id: str | None = None
    visible_at: float = 0.0
    receive_count: int = 0
    first_received_at: float | None = None
    receipt_handle: str | None = None

    def attribute(self, name: str) -> str | None:
        """The string value of message attribute ``name``, if present."""
        value = self.attributes.get(name, {})
        return value.get("StringValue")

    def to_wire(self) -> dict[str, Any]:
        """The message as ``ReceiveMessage`` returns it (``Body``, ``Attributes``, ``MessageAttributes``)."""
        attributes = {
            "ApproximateReceiveCount": str(self.receive_count),
            "SentTimestamp": str(int(self.sent_at * 1000)),
            "ApproximateFirstReceiveTimestamp": str(int((self.first_received_at or self.sent_at) * 1000)),
        }
        if self.group_id is not None:
            attributes["MessageGroupId"] = self.group_id
        wire: dict[str, Any] = {"MessageId": self.message_id, "ReceiptHandle": self.receipt_handle or "",
                                "MD5OfBody": md5(self.body), "Body": self.body, "Attributes": attributes}
        if self.attributes:
            wire["MessageAttributes"] = {name: dict(value) for name, value in self.attributes.items()}
        return wire


@dataclass
class _Meta:
    endpoint_url: str
    region_name: str
    service_model_name: str = "sqs"


@dataclass
class _Refusal:
    code: str
    times: int
    sender_fault: bool
    #: only calls on this queue (None: any queue)
    queue_url: str | None = None


@dataclass(frozen=True)
class _RedrivePolicy:
    dlq_url: str
    max_receive_count: int


@dataclass(kw_only=True)
class _Queue:
    url: str
    arn: str
    messages: list[QueuedMessage] = field(default_factory=list)
    visibility_timeout: int = DEFAULT_VISIBILITY_SECONDS
    redrive: _RedrivePolicy | None = None
    maximum_message_size: int = DEFAULT_MAXIMUM_MESSAGE_SIZE


class FakeSQS:
    """An in-memory SQS: queues, visibility, delays and a log of calls (``calls``, ``sent``)."""

    def __init__(self, *, region: str = DEFAULT_REGION, account: str = DEFAULT_ACCOUNT,
                 clock: Callable[[], float] = time.time) -> None:
        self.meta = _Meta(endpoint_url=f"https://sqs.{region}.amazonaws.com", region_name=region)
        self.account = account
        self.clock = clock
        #: every call, in order
        self.calls: list[SqsCall] = []
        #: every message ever accepted, in order (deleting one does not remove it from here)
        self.sent: list[QueuedMessage] = []
        self._queues: dict[str, _Queue] = {}
        self._refusals: dict[str, list[_Refusal]] = {}
        #: messages SQS's own redrive moved to a DLQ (the backstop), in order
        self.moved: list[QueuedMessage] = []
        self._ids = itertools.count(1)

    # ------------------------------------------------------------ helpers for tests
    def queue_url(self, name: str) -> str:
        """The URL of queue ``name`` in this fake's region and account (the queue is created)."""
        url = f"{self.meta.endpoint_url}/{self.account}/{name}"
        self._queue(url)
        return url

    def set_maximum_message_size(self, queue_url: str, size: int) -> None:
        """Give a queue a ``MaximumMessageSize`` (a new one has SQS's default, 1 MiB).

        A larger message is refused as SQS refuses it, its body and attributes counted in bytes.

        Example:
            >>> sqs = FakeSQS(clock=lambda: 0.0)
            >>> url = sqs.queue_url("small")
            >>> sqs.set_maximum_message_size(url, 1024)
            >>> sqs.send_message(QueueUrl=url, MessageBody="x" * 1025)  # doctest: +ELLIPSIS
            Traceback (most recent call last):
            ...
            botocore.exceptions.ClientError: ... the message is 1025 bytes, over the queue's MaximumMessageSize 1024
        """
        if not 1024 <= size <= DEFAULT_MAXIMUM_MESSAGE_SIZE:
            raise ValueError(f"MaximumMessageSize is 1024..1048576, got {size}")
        self._queue(queue_url).maximum_message_size = size

    def set_visibility_timeout(self, queue_url: str, seconds: int) -> None:
        """Give a queue a default ``VisibilityTimeout`` (a new one has SQS's default, 30 s).

        Example:
            >>> sqs = FakeSQS(clock=lambda: 0.0)
            >>> url = sqs.queue_url("jobs")
            >>> sqs.set_visibility_timeout(url, 360)
            >>> sqs.get_queue_attributes(QueueUrl=url)["Attributes"]["VisibilityTimeout"]
            '360'
        """
        if not 0 <= seconds <= MAX_VISIBILITY_SECONDS:
            raise ValueError(f"VisibilityTimeout is 0..{MAX_VISIBILITY_SECONDS}, got {seconds}")
        self._queue(queue_url).visibility_timeout = seconds

    def queue_url_of(self, arn: str) -> str:
        """The URL of the queue with ARN ``arn`` (a queue of this fake's account is created if new).

        Example:
            >>> sqs = FakeSQS(clock=lambda: 0.0)
            >>> sqs.queue_url_of(sqs.arn(sqs.queue_url("jobs"))) == sqs.queue_url("jobs")
            True
        """
        for url, queue in self._queues.items():
            if queue.arn == arn:
                return url
        return self.queue_url(arn.rsplit(":", 1)[-1])

    def messages(self, queue_url: str) -> list[QueuedMessage]:
        """The messages on a queue now (visible, in flight or delayed), oldest first."""
        return list(self._queue(queue_url).messages)

    def sent_to(self, queue_url: str) -> list[QueuedMessage]:
        """Every message ever accepted by one queue, oldest first."""
        return [m for m in self.sent if m.queue_url == queue_url]

    def refuse(self, operation: str, *, code: str = "ServiceUnavailable", times: int = 1,
               sender_fault: bool = False, queue_url: str | None = None) -> None:
        """Make the next ``times`` calls of ``operation`` (``"SendMessageBatch"``...) fail with ``code``.

        For a batch call the whole call fails (``ClientError``), as when SQS throttles it.
        ``queue_url`` limits the refusal to calls on that queue (the DLQ's sends, say).
        """
        self._refusals.setdefault(operation, []).append(
            _Refusal(code=code, times=times, sender_fault=sender_fault, queue_url=queue_url))

    def clear_refusals(self) -> None:
        """Forget every ``refuse``: from now on every call is answered."""
        self._refusals.clear()

    def set_redrive_policy(self, queue_url: str, dlq_url: str, max_receive_count: int) -> None:
        """Give a queue SQS's redrive policy: a receive past ``max_receive_count`` moves the message to the DLQ.

        The move keeps the message's id, body and attributes, as SQS's does.

        Example:
            >>> sqs = FakeSQS(clock=lambda: 0.0)
            >>> jobs, dlq = sqs.queue_url("jobs"), sqs.queue_url("jobs-dlq")
            >>> sqs.set_redrive_policy(jobs, dlq, max_receive_count=1)
            >>> sent = sqs.send_message(QueueUrl=jobs, MessageBody="x")["MessageId"]
            >>> len(sqs.receive(jobs)), sqs.messages(jobs)[0].visible_at
            (1, 30.0)
            >>> sqs.messages(jobs)[0].visible_at = 0.0  # its visibility ran out
            >>> sqs.receive(jobs), [m.message_id == sent for m in sqs.messages(dlq)]
            ([], [True])
        """
        if max_receive_count < 1:
            raise ValueError("maxReceiveCount is at least 1")
        self._queue(queue_url).redrive = _RedrivePolicy(dlq_url=dlq_url, max_receive_count=max_receive_count)
        self._queue(dlq_url)

    def receive(self, queue_url: str, max_messages: int = 10,
                only: Collection[str] | None = None) -> list[QueuedMessage]:
        """Take up to ``max_messages`` visible messages (``only`` these ids, when given), as a poller would.

        They are in flight afterwards, for the queue's visibility timeout (30 s).
        """
        queue = self._queue(queue_url)
        now = self.clock()
        taken: list[QueuedMessage] = []
        blocked_groups: set[str] = set()
        # On a standard queue a group id is a tenant (a fair queue): it orders nothing.
        fifo = queue_url.endswith(".fifo")
        for message in list(queue.messages):
            if len(taken) >= max_messages:
                break
            visible = message.visible_at <= now
            if fifo and message.group_id is not None:
                # FIFO: nothing of a group is delivered after an earlier message of it that is not visible.
                if message.group_id in blocked_groups:
                    continue
                if not visible:
                    blocked_groups.add(message.group_id)
            if not visible or (only is not None and message.message_id not in only):
                continue
            if queue.redrive is not None and message.receive_count >= queue.redrive.max_receive_count:
                self._move(queue, message, queue.redrive.dlq_url)
                continue
            message.receive_count += 1
            message.first_received_at = message.first_received_at or now
            message.receipt_handle = f"{message.message_id}#{message.receive_count}"
            message.visible_at = now + queue.visibility_timeout
            taken.append(message)
        return taken

    def put(self, queue_url: str, body: str, *, attributes: Mapping[str, Mapping[str, str]] | None = None,
            group_id: str | None = None, dedup_id: str | None = None, delay: int = 0) -> QueuedMessage:
        """Place a message on a queue as if something outside the code under test sent it (no call recorded)."""
        params: dict[str, Any] = {"MessageBody": body, "MessageAttributes": dict(attributes or {}),
                                  "DelaySeconds": delay}
        if group_id is not None:
            params["MessageGroupId"] = group_id
        if dedup_id is not None:
            params["MessageDeduplicationId"] = dedup_id
        try:
            return self._accept(queue_url, params, record=False)
        except EntryError as error:
            raise ValueError(f"SQS would refuse this message: {error}") from None

    def remove(self, message: QueuedMessage) -> None:
        """Take a message off its queue (what Lambda's poller does with a record the batch did not report failed)."""
        self._queue(message.queue_url).messages.remove(message)

    def deliver_again(self, message: QueuedMessage) -> None:
        """SQS's at-least-once delivery: a message already deleted comes back once more (same id, body, attributes).

        Standard queues may deliver a message again after its delete (a delete
        that reached only some of SQS's copies); the worker must treat the copy
        as a duplicate of what it already did.
        """
        queue = self._queue(message.queue_url)
        if message in queue.messages:
            raise ValueError(f"message {message.message_id} is still on its queue")
        message.visible_at = self.clock()
        message.receipt_handle = None
        queue.messages.append(message)

    def next_visible_at(self, queue_url: str) -> float | None:
        """When the next message on the queue becomes visible (None: the queue is empty)."""
        times = [m.visible_at for m in self._queue(queue_url).messages]
        return min(times) if times else None

    def arn(self, queue_url: str) -> str:
        """The queue's ARN."""
        return self._queue(queue_url).arn

    # ------------------------------------------------------------ the API
    def send_message(self, **params: Any) -> dict[str, Any]:
        """``SendMessage``."""
        self._call("SendMessage", params)
        message = single("SendMessage", lambda: self._accept(params["QueueUrl"], params))
        return {"MessageId": message.message_id, "MD5OfMessageBody": md5(message.body)}

    def send_message_batch(self, **params: Any) -> dict[str, Any]:
        """``SendMessageBatch``: each entry is checked on its own, as SQS does."""
        self._call("SendMessageBatch", params)
        entries: Sequence[Mapping[str, Any]] = params["Entries"]
        check_batch("SendMessageBatch", entries)
        total = sum(entry_bytes(entry) for entry in entries)
        if total > MAX_BATCH_BYTES:
            raise client_error("SendMessageBatch", "BatchRequestTooLong",
                                f"the entries are {total} bytes together, over {MAX_BATCH_BYTES}")
        successful, failed = [], []
        for entry in entries:
            try:
                message = self._accept(params["QueueUrl"], entry)
            except EntryError as error:
                failed.append({"Id": entry["Id"], "Code": error.code, "Message": str(error), "SenderFault": True})
                continue
            successful.append({"Id": entry["Id"], "MessageId": message.message_id,
                               "MD5OfMessageBody": md5(message.body)})
        return {"Successful": successful, "Failed": failed}

    def receive_message(self, **params: Any) -> dict[str, Any]:
        """``ReceiveMessage`` (no long polling: the clock is the test's)."""
        self._call("ReceiveMessage", params)
        taken = self.receive(params["QueueUrl"], int(params.get("MaxNumberOfMessages", 1)))
        return {"Messages": [m.to_wire() for m in taken]} if taken else {}

    def delete_message(self, **params: Any) -> dict[str, Any]:
        """``DeleteMessage``."""
        self._call("DeleteMessage", params)
        single("DeleteMessage", lambda: self._delete(params["QueueUrl"], params["ReceiptHandle"]))
        return {}

    def delete_message_batch(self, **params: Any) -> dict[str, Any]:
        """``DeleteMessageBatch``."""
        self._call("DeleteMessageBatch", params)
        check_batch("DeleteMessageBatch", params["Entries"])
        return per_entry(params, lambda entry: self._delete(params["QueueUrl"], entry["ReceiptHandle"]))

    def change_message_visibility(self, **params: Any) -> dict[str, Any]:
        """``ChangeMessageVisibility``."""
        self._call("ChangeMessageVisibility", params)
        single("ChangeMessageVisibility", lambda: self._change_visibility(
            params["QueueUrl"], params["ReceiptHandle"], params["VisibilityTimeout"]))
        return {}

    def change_message_visibility_batch(self, **params: Any) -> dict[str, Any]:
        """``ChangeMessageVisibilityBatch``."""
        self._call("ChangeMessageVisibilityBatch", params)
        check_batch("ChangeMessageVisibilityBatch", params["Entries"])
        return per_entry(params, lambda entry: self._change_visibility(
            params["QueueUrl"], entry["ReceiptHandle"], entry["VisibilityTimeout"]))

    def get_queue_attributes(self, **params: Any) -> dict[str, Any]:
        """``GetQueueAttributes``: the ARN, the visibility timeout and the depth counters."""
        self._call("GetQueueAttributes", params)
        queue = self._queue(params["QueueUrl"])
        now = self.clock()
        in_flight = sum(1 for m in queue.messages if m.visible_at > now and m.receive_count)
        delayed = sum(1 for m in queue.messages if m.visible_at > now and not m.receive_count)
        return {"Attributes": {
            "QueueArn": queue.arn,
            "VisibilityTimeout": str(queue.visibility_timeout),
            "MaximumMessageSize": str(queue.maximum_message_size),
            "ApproximateNumberOfMessages": str(len(queue.messages) - in_flight - delayed),
            "ApproximateNumberOfMessagesNotVisible": str(in_flight),
            "ApproximateNumberOfMessagesDelayed": str(delayed),
        }}

    def get_queue_url(self, **params: Any) -> dict[str, Any]:
        """``GetQueueUrl``."""
        self._call("GetQueueUrl", params)
        return {"QueueUrl": self.queue_url(params["QueueName"])}

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        raise AttributeError(
            f"FakeSQS has no {name}(): it answers what sqsjobs' worker and producer call; "
            "for other SQS operations use moto (moto.mock_aws) and pass its client instead"
        )

    # ------------------------------------------------------------ internals
    def _call(self, operation: str, params: dict[str, Any]) -> None:
        self.calls.append(SqsCall(operation=operation, params=dict(params)))
        for refusal in self._refusals.get(operation, []):
            if refusal.times > 0 and refusal.queue_url in (None, params.get("QueueUrl")):
                refusal.times -= 1
                raise client_error(operation, refusal.code, "refused by FakeSQS.refuse")

    def _move(self, queue: _Queue, message: QueuedMessage, dlq_url: str) -> None:
        queue.messages.remove(message)
        message.queue_url = dlq_url
        message.visible_at = self.clock()
        message.receive_count = 0
        message.receipt_handle = None
        self._queue(dlq_url).messages.append(message)
        self.moved.append(message)

    def _queue(self, url: str) -> _Queue:
        queue = self._queues.get(url)
        if queue is None:
            name = url.rstrip("/").rsplit("/", 1)[-1]
            queue = _Queue(url=url, arn=f"arn:aws:sqs:{self.meta.region_name}:{self.account}:{name}")
            self._queues[url] = queue
        return queue

    def _accept(self, url: str, params: Mapping[str, Any], *, record: bool = True) -> QueuedMessage:
        body = params.get("MessageBody")
        if not isinstance(body, str) or not body:
            raise EntryError("MissingParameter", "the message body must be a non-empty string")
        attributes = dict(params.get("MessageAttributes") or {})
        size = entry_bytes(params)
        limit = self._queue(url).maximum_message_size
        if size > limit:
            raise EntryError("InvalidParameterValue", f"the message is {size} bytes, over the queue's "
                                                       f"MaximumMessageSize {limit}")
        delay = int(params.get("DelaySeconds", 0))
        fifo = url.endswith(".fifo")
        if not 0 <= delay <= MAX_DELAY_SECONDS or (fifo and delay):
            raise EntryError("InvalidParameterValue", f"DelaySeconds {delay} is not allowed here")
        if fifo and not params.get("MessageGroupId"):
            raise EntryError("MissingParameter", "a FIFO queue needs MessageGroupId")
        queue = self._queue(url)
        dedup = params.get("MessageDeduplicationId")
        if fifo and dedup and any(m.dedup_id == dedup for m in self.sent_to(url)):
            previous = next(m for m in self.sent_to(url) if m.dedup_id == dedup)
            return previous  # deduplicated: SQS answers with the first message's id
        now = self.clock()
        message = QueuedMessage(
            message_id=f"fake-{next(self._ids):06d}", queue_url=url, body=body, attributes=attributes,
            sent_at=now, group_id=params.get("MessageGroupId"), dedup_id=dedup, visible_at=now + delay,
        )
        queue.messages.append(message)
        if record:
            self.sent.append(message)
        return message

    def _find(self, url: str, receipt_handle: str) -> QueuedMessage:
        for message in self._queue(url).messages:
            if message.receipt_handle == receipt_handle:
                return message
        raise EntryError("ReceiptHandleIsInvalid", f"no message in flight has receipt handle {receipt_handle!r}")

    def _delete(self, url: str, receipt_handle: str) -> None:
        self._queue(url).messages.remove(self._find(url, receipt_handle))

    def _change_visibility(self, url: str, receipt_handle: str, seconds: int) -> None:
        if not 0 <= int(seconds) <= MAX_VISIBILITY_SECONDS:
            raise EntryError("InvalidParameterValue", f"VisibilityTimeout {seconds} is outside 0..43200")
        self._find(url, receipt_handle).visible_at = self.clock() + int(seconds)
