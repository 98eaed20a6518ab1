"""The outbox relay: the outbox table's stream in, the committed enqueues out to their queues.

``handlers/outbox_relay.py`` runs it. Each stream record carries an outbox
item's whole image (written by :mod:`sqsjobs.workflows._outbox`'s
``Transaction``); the relay sends the bodies with ``SendMessageBatch`` and
reports only the unsent records back (``ReportBatchItemFailures``). A batch
relayed twice sends the same keys twice, and the worker's guard runs each
job once. The relay never writes to the table, never runs job code, and
calls no AWS at import.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import ConfigurationError, MalformedMessageError
from sqsjobs._settings import DEFAULT_QUEUE, Settings
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.workflows._outbox import outbox_item_model

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.enqueue._producer import Producer
    from sqsjobs.enqueue._routing import QueueRouter

__all__ = ["RELAYED_EVENTS", "OutboxRelay", "RelayResult", "message_from_image"]

#: stream events that carry an outbox item to relay (a TTL removal is a REMOVE)
RELAYED_EVENTS = frozenset({"INSERT", "MODIFY"})


@dataclass(frozen=True, kw_only=True)
class RelayResult:
    """What one relay invocation did; ``failures`` are the stream sequence numbers to retry.

    Example:
        >>> RelayResult(sent=3, skipped=1, failures=("200",)).response()
        {'batchItemFailures': [{'itemIdentifier': '200'}]}
    """

    sent: int = 0
    skipped: int = 0
    failures: tuple[str, ...] = ()
    keys: tuple[str, ...] = field(default_factory=tuple)

    def response(self) -> dict[str, list[dict[str, str]]]:
        """The partial batch response Lambda's stream event source mapping reads."""
        return {"batchItemFailures": [{"itemIdentifier": sequence} for sequence in self.failures]}


class OutboxRelay:
    """Sends outbox items from a DynamoDB stream batch to their jobs' queues.

    Example:
        >>> relay = OutboxRelay(queue_url="https://sqs.example/123456789012/jobs")
        >>> relay.handle({"Records": []})
        {'batchItemFailures': []}
    """

    def __init__(self, *, queue_url: str | None = None, sqs_client: SQSClient | None = None,
                 producer: Producer | None = None, logger: Any = None,
                 sleep: Callable[[float], None] = time.sleep,
                 queues: Mapping[str, str | None] | None = None) -> None:
        self.queue_url = queue_url
        #: named queues besides the default one (jobs declared with ``queue=``)
        self.queues = dict(queues or {})
        self._sqs = sqs_client
        self._producer = producer
        self._router: QueueRouter | None = None
        self._logger = logger
        self.sleep = sleep

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> OutboxRelay:
        """A relay for ``SQSJOBS_QUEUE_URL`` and ``SQSJOBS_QUEUE_URL_<NAME>`` (clients are created on first use)."""
        settings = Settings.from_env(environ)
        return cls(queue_url=settings.require("queue_url"), queues=settings.queues)

    def handle(self, event: Any, context: Any = None) -> dict[str, list[dict[str, str]]]:
        """The Lambda handler body for the outbox stream: ``{"batchItemFailures": [...]}``."""
        return self.relay(event).response()

    def relay(self, event: Any) -> RelayResult:
        """Send every outbox item the batch inserted or replaced; report the records not sent."""
        records = event.get("Records") if isinstance(event, dict) else None
        if not isinstance(records, list):
            from sqsjobs._errors import InvalidEventError

            raise InvalidEventError("the relay expects a DynamoDB stream event with a 'Records' list")
        messages: list[JobMessage] = []
        sequences: list[str] = []
        failures: list[str] = []
        skipped = 0
        for record in records:
            change = record.get("dynamodb", {}) if isinstance(record, dict) else {}
            sequence = str(change.get("SequenceNumber", ""))
            if record.get("eventName") not in RELAYED_EVENTS or "NewImage" not in change:
                skipped += 1  # a TTL expiry (REMOVE) or a keys-only stream: nothing to send
                continue
            try:
                messages.append(message_from_image(change["NewImage"]))
            except Exception as error:
                # Not sendable now or later: report it so the mapping's retries end in its
                # on-failure destination instead of the record vanishing.
                self.log.error("outbox record is not a job message", extra={"sequence": sequence,
                                                                             "error": str(error)})
                failures.append(sequence)
                continue
            sequences.append(sequence)
        report = self.router.send_many(messages) if messages else None
        if report is not None:
            for failed in report.failed:
                self.log.error("outbox item not sent; the stream will retry it",
                               extra={"key": failed.key, "code": failed.code, "error": failed.message})
                failures.append(sequences[failed.index])
        sent_keys = tuple(messages[i].key for i in sorted(report.message_ids)) if report else ()
        ordered = tuple(sorted(set(failures), key=_sequence_order))
        return RelayResult(sent=len(sent_keys), skipped=skipped, failures=ordered, keys=sent_keys)

    @property
    def producer(self) -> Producer:
        """The producer for the jobs queue (built on first use)."""
        if self._producer is None:
            from sqsjobs.enqueue._producer import Producer

            if not self.queue_url:
                from sqsjobs._env_names import did_you_mean

                raise ConfigurationError("the relay needs the jobs queue: pass queue_url= or set SQSJOBS_QUEUE_URL"
                                         f"{did_you_mean('SQSJOBS_QUEUE_URL')}")
            if self._sqs is None:
                from sqsjobs._clients import sqs_client

                self._sqs = sqs_client()  # the process's one botocore session, as every handler's clients
            self._producer = Producer(self._sqs, self.queue_url, sleep=self.sleep)
        return self._producer

    @property
    def router(self) -> QueueRouter:
        """Each message to its queue: the default one through ``producer``, named ones by ``queues``."""
        if self._router is None:
            from sqsjobs.enqueue._producer import Producer
            from sqsjobs.enqueue._routing import QueueRouter

            default = self.producer

            def make(url: str) -> Producer:
                return default if url == self.queue_url else Producer(default.client, url, sleep=self.sleep)

            self._router = QueueRouter({DEFAULT_QUEUE: self.queue_url, **self.queues}, make_producer=make)
        return self._router

    @property
    def log(self) -> Any:
        """A Powertools logger (JSON lines)."""
        if self._logger is None:
            from aws_lambda_powertools import Logger

            self._logger = Logger()  # service from POWERTOOLS_SERVICE_NAME, as the worker's
        return self._logger


def message_from_image(image: Mapping[str, Any]) -> JobMessage:
    """The job message an outbox item's stream image (DynamoDB JSON) carries.

    Example:
        >>> body = '{"v": 1, "job": "k", "key": "k:1", "args": {}}'
        >>> message_from_image({"pk": {"S": "k:1"}, "job": {"S": "k"}, "body": {"S": body},
        ...                     "created_at": {"N": "1"}, "expires_at": {"N": "2"}}).key
        'k:1'
    """
    item = outbox_item_model("outbox").from_raw_data(dict(image))
    for name in ("pk", "job", "body"):
        if not isinstance(getattr(item, name), str) or not getattr(item, name):
            raise MalformedMessageError(f"outbox item has no {name!r}")
    Envelope.decode(item.body)  # a body the worker could never read is not worth sending
    attributes = json.loads(item.attributes) if item.attributes else {}
    return JobMessage(job=item.job, key=item.pk, body=item.body, delay=int(item.delay or 0), group=item.group,
                      trace_id=item.trace_id, extra_attributes=attributes, queue=item.queue or DEFAULT_QUEUE,
                      tenant=item.tenant)


def _sequence_order(sequence: str) -> tuple[int, str]:
    # Stream sequence numbers are decimal strings of varying length: compare them as numbers.
    return (int(sequence), sequence) if sequence.isdigit() else (0, sequence)
