"""Sending job messages to SQS: one at a time, or in full batches.

``send_many`` packs messages into ``SendMessageBatch`` calls of at most 10
entries and 1 MiB, retries the entries a batch reports as failed (with
full-jitter backoff; sender faults are not retried), and returns a report
instead of raising halfway through.

Retries are counted together with botocore's own: botocore already retries
a throttled or failed request (3 attempts in its standard mode, the one
``sqsjobs._clients`` configures), and every attempt is an SQS request. The
producer reads how many attempts each call really made
(``ResponseMetadata.RetryAttempts``) and starts another round for a message
only if botocore's worst case still fits in the message's budget:

- ``send``: at most botocore's attempts per call (3 with standard retries);
- ``send_many``: no message is carried by more than ``max_calls`` requests
  (default 6: one failed call that botocore retried to the end, and one more
  such call; or up to four rounds for entries a batch reports as failed).
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqsjobs import _otel
from sqsjobs._backoff import BackoffPolicy, RandomSource, Retries
from sqsjobs._errors import ConfigurationError, EnqueueError, MessageTooLargeError
from sqsjobs.enqueue._batching import SQS_MAX_BYTES, SQS_MAX_ENTRIES, batches
from sqsjobs.enqueue._envelope import DEFAULT_MESSAGE_BYTES
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.enqueue._sizes import check_message, fits

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.schedules._receipt import ScheduledJob

MAX_BATCH_ENTRIES = SQS_MAX_ENTRIES
MAX_BATCH_BYTES = SQS_MAX_BYTES
#: entries a batch call reported as failed (throttling, service errors) wait this long
SEND_RETRY_BACKOFF = BackoffPolicy(base=0.1, cap=2.0)
#: SQS requests (botocore's retries included) that may carry one message in ``send_many``
MAX_CALLS_PER_MESSAGE = 6
#: botocore's attempts per call when the client's config does not say: its standard and adaptive modes
BOTOCORE_DEFAULT_ATTEMPTS = 3
#: the same for botocore's legacy mode (``_retry.json``)
BOTOCORE_LEGACY_ATTEMPTS = 5
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
    """What ``enqueue_many`` did: message ids and schedules by input position, and the failures.

    ``message_ids`` are the messages SQS took (now, or with ``DelaySeconds``);
    ``scheduled`` the ones that wait in a one-time schedule (due beyond 900 s),
    including keys that were ``already_scheduled``. ``calls`` counts both
    services' API calls.

    Example:
        >>> r = EnqueueReport(message_ids={0: "m-1"}, failed=(), calls=1)
        >>> r.ok, r.sent, r.accepted
        (True, 1, 1)
    """

    message_ids: dict[int, str] = field(default_factory=dict)
    failed: tuple[FailedEntry, ...] = ()
    #: SQS requests made, botocore's own retries included
    calls: int = 0
    scheduled: dict[int, ScheduledJob] = field(default_factory=dict)
    #: deduplicated jobs refused at the producer (their key was queued, or repeated in the list): the holder's receipt
    duplicates: dict[int, str] = field(default_factory=dict)
    #: deduplicated jobs refused at the producer because their key was cancelled (``app.cancel``): the key
    cancelled: dict[int, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True when every message was sent."""
        return not self.failed

    @property
    def sent(self) -> int:
        """How many messages SQS accepted."""
        return len(self.message_ids)

    @property
    def accepted(self) -> int:
        """How many messages were taken: sent to SQS, or waiting in a schedule."""
        return len(self.message_ids) + len(self.scheduled)


def botocore_attempts(client: Any) -> int:
    """How many requests botocore makes for one call of ``client`` at most (its retries included).

    Example:
        >>> from sqsjobs._clients import sqs_client
        >>> botocore_attempts(sqs_client(region_name="eu-west-1"))
        3
    """
    retries = getattr(getattr(client, "meta", None), "config", None)
    settings = getattr(retries, "retries", None) or {}
    total = settings.get("total_max_attempts")
    if total:
        return int(total)
    return BOTOCORE_LEGACY_ATTEMPTS if settings.get("mode") == "legacy" else BOTOCORE_DEFAULT_ATTEMPTS


class Producer:
    """Sends ``JobMessage``s to one queue, within a stated number of SQS requests (see the module).

    Example:
        >>> from botocore.stub import Stubber
        >>> from sqsjobs import JobApp
        >>> from sqsjobs._clients import sqs_client
        >>> queue = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"
        >>> app = JobApp(queue_url=queue)
        >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
        ... def send_invoice_email(invoice_id: int) -> None: ...
        >>> sqs = sqs_client(region_name="eu-west-1")
        >>> with Stubber(sqs) as stub:
        ...     stub.add_response("send_message", {"MessageId": "m-1"})
        ...     Producer(sqs, queue).send(send_invoice_email.message(invoice_id=42))
        'm-1'
    """

    def __init__(
        self,
        client: SQSClient,
        queue_url: str,
        *,
        max_calls: int = MAX_CALLS_PER_MESSAGE,
        backoff: BackoffPolicy = SEND_RETRY_BACKOFF,
        random: RandomSource | None = None,
        sleep: Callable[[float], None] = time.sleep,
        max_message_bytes: int = DEFAULT_MESSAGE_BYTES,
    ) -> None:
        self.client = client
        #: the queue's MaximumMessageSize (``Settings.max_message_bytes``): larger messages are refused before sending
        self.max_message_bytes = max_message_bytes
        self.queue_url = queue_url
        self.fifo = queue_url.endswith(".fifo")
        self.attempts = botocore_attempts(client)
        if max_calls < self.attempts:
            raise ConfigurationError(
                f"max_calls={max_calls} is below the {self.attempts} attempts botocore makes for one call of this "
                "client: one call could already exceed it; raise max_calls or lower the client's retries"
            )
        self.max_calls = max_calls
        self.backoff = backoff
        self.random = random
        self.sleep = sleep

    def send(self, message: JobMessage) -> str:
        """Send one message (at most ``self.attempts`` requests); raises ``EnqueueError`` when SQS refuses it.

        Where the application traces (``sqsjobs._otel``), in a "send" span whose context the message carries.
        """
        span = _otel.send_span(self.queue_url, 1)
        if span is None:
            return self._send(message)
        with span as current:
            message_id = self._send(_otel.carrying(message, self._fits))
            current.set_attribute("messaging.message.id", message_id)
            return message_id

    def _fits(self, message: JobMessage) -> bool:
        return fits(message, self.max_message_bytes)

    def _send(self, message: JobMessage) -> str:
        from botocore.exceptions import BotoCoreError, ClientError

        check_message(message, limit=self.max_message_bytes)
        try:
            response = self.client.send_message(QueueUrl=self.queue_url, **self._entry(message))
        except (ClientError, BotoCoreError) as error:
            raise EnqueueError(f"SQS refused job {message.job!r} (key {message.key!r}): {error}") from error
        return response["MessageId"]

    def send_many(self, messages: Sequence[JobMessage],
                  on_progress: Callable[[int], None] | None = None) -> EnqueueReport:
        """Send in full batches; failed entries are retried, then reported (never raised).

        No message is carried by more than ``self.max_calls`` SQS requests, botocore's retries included.
        ``on_progress(n)`` is told after each call how many more messages SQS accepted. Where the application
        traces (``sqsjobs._otel``), in one "send" span whose context every message carries.
        """
        span = _otel.send_span(self.queue_url, len(messages))
        if span is None:
            return self._send_many(messages, on_progress)
        with span:
            return self._send_many([_otel.carrying(m, self._fits) for m in messages], on_progress)

    def _send_many(self, messages: Sequence[JobMessage],
                   on_progress: Callable[[int], None] | None) -> EnqueueReport:
        from botocore.exceptions import BotoCoreError, ClientError

        ids: dict[int, str] = {}
        failed: dict[int, FailedEntry] = {}
        calls = 0
        #: requests that carried each message so far (botocore's retries included)
        spent: dict[int, int] = {}
        pending = []
        built: dict[int, dict[str, Any]] = {}
        for i, message in enumerate(messages):
            # Refuse what SQS would refuse before sending anything, per entry.
            try:
                check_message(message, limit=self.max_message_bytes)
                built[i] = {"Id": str(i), **self._entry(message)}
            except (EnqueueError, MessageTooLargeError) as error:
                failed[i] = FailedEntry(
                    index=i, key=message.key, code="Invalid", message=str(error), sender_fault=True
                )
                continue
            pending.append(i)
        # Each round spends at least one request on every message it carries: max_calls rounds at most.
        for _ in Retries(tries=self.max_calls, backoff=self.backoff).attempts(sleep=self.sleep, random=self.random):
            retry: list[int] = []
            for chunk in batches(pending, max_bytes=MAX_BATCH_BYTES, size_of=lambda i: messages[i].size()):
                entries = [built[i] for i in chunk]
                try:
                    response = self.client.send_message_batch(QueueUrl=self.queue_url, Entries=entries)  # type: ignore[arg-type]
                except (ClientError, BotoCoreError) as error:
                    # The whole call failed (throttled, network) after botocore's own retries:
                    # every entry may be retried, if its budget allows another such call.
                    made = _requests_made(error, self.attempts)
                    calls += made
                    for i in chunk:
                        spent[i] = spent.get(i, 0) + made
                        failed[i] = FailedEntry(
                            index=i, key=messages[i].key, code=type(error).__name__, message=str(error),
                            sender_fault=False,
                        )
                    retry.extend(chunk)
                    continue
                made = _requests_made(response, self.attempts)
                calls += made
                for i in chunk:
                    spent[i] = spent.get(i, 0) + made
                for ok in response.get("Successful", []):
                    index = int(ok["Id"])
                    ids[index] = ok["MessageId"]
                    failed.pop(index, None)
                if on_progress is not None:
                    on_progress(len(response.get("Successful", [])))
                for bad in response.get("Failed", []):
                    index = int(bad["Id"])
                    failed[index] = FailedEntry(
                        index=index, key=messages[index].key, code=bad.get("Code", ""),
                        message=bad.get("Message", ""), sender_fault=bool(bad.get("SenderFault")),
                    )
                    if not bad.get("SenderFault"):
                        retry.append(index)
            # Another round only for messages whose budget still holds botocore's worst case for one call.
            pending = sorted(i for i in retry if spent[i] + self.attempts <= self.max_calls)
            if not pending:
                break
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


def _requests_made(outcome: Any, attempts: int) -> int:
    """Requests one call made: 1 plus botocore's retries, as its response or error reports them.

    An error without a response (a connection that kept failing) used all of botocore's attempts.
    """
    response = outcome if isinstance(outcome, dict) else getattr(outcome, "response", None)
    if not isinstance(response, dict):
        return attempts
    return 1 + int(response.get("ResponseMetadata", {}).get("RetryAttempts", 0))


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
