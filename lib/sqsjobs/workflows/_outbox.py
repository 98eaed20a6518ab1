"""Transactional enqueue: business writes and job messages in one DynamoDB transaction.

``app.transaction()`` collects writes (``put``, ``update``, ``delete``,
``check``) and enqueues (``enqueue``); leaving the ``with`` block commits them
all with one ``TransactWriteItems``. An enqueue becomes an *outbox item* keyed
by the job's idempotency key and carrying the finished message body; nothing
reaches SQS inside the transaction (docs/producers.md, "The transactional outbox"). The outbox table's
stream feeds ``OutboxRelay``, which sends the bodies with ``SendMessageBatch``
and reports only the unsent records back to the stream.

Delivery is at least once, end to end: a stream batch may be relayed twice
(retry, crash after sending), and then the jobs queue holds two messages with
the same idempotency key; the worker's guard runs the job once. The outbox
item itself is only the trigger: the stream record carries its whole image,
so items expire by TTL (written with the item, ``OUTBOX_TTL_SECONDS``) and the
relay never writes to the table.

This module never calls AWS at import, and the relay never runs job code.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import ConfigurationError, MalformedMessageError, TransactionError
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.enqueue._message import DEFAULT_QUEUE, JobMessage

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from sqsjobs._runtime import Runtime
    from sqsjobs.enqueue._producer import Producer
    from sqsjobs.enqueue._routing import QueueRouter

#: DynamoDB's limit on the items of one TransactWriteItems call (writes + enqueues)
MAX_TRANSACTION_ITEMS = 100
#: outbox items outlive the stream's 24-hour retention, then TTL removes them
OUTBOX_TTL_SECONDS = 3 * 24 * 3600
#: stream events that carry an outbox item to relay (a TTL removal is a REMOVE)
RELAYED_EVENTS = frozenset({"INSERT", "MODIFY"})


@lru_cache(maxsize=16)
def outbox_item_model(table_name: str) -> Any:
    """The pynamodb ``Model`` of an outbox item in ``table_name``.

    Example:
        >>> Item = outbox_item_model("outbox")
        >>> Item("process-order:7", job="process-order", body="{}").pk
        'process-order:7'
    """
    # Lazy: pynamodb's import cost is paid by the first transaction, not at cold start.
    from pynamodb.attributes import NumberAttribute, UnicodeAttribute
    from pynamodb.models import Model

    class OutboxItem(Model):
        class Meta:
            # Only builds request kwargs; I/O goes through the injected client.
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True)  # the job's idempotency key
        job = UnicodeAttribute()
        body = UnicodeAttribute()
        delay = NumberAttribute(default=0)
        group = UnicodeAttribute(null=True)
        trace_id = UnicodeAttribute(null=True)
        attributes = UnicodeAttribute(null=True)  # extra message attributes, JSON
        queue = UnicodeAttribute(null=True)  # the job's queue, when not the default one (sqsjobs.enqueue._routing)
        tenant = UnicodeAttribute(null=True)  # the enqueue's tenant (a standard queue's MessageGroupId)
        created_at = NumberAttribute()
        expires_at = NumberAttribute()

    OutboxItem.Meta.table_name = table_name  # type: ignore[attr-defined]
    return OutboxItem


class Transaction:
    """Writes and enqueues that commit together, or not at all.

    Use it as ``with app.transaction() as tx:``; the block commits on exit and
    discards everything on an exception or after ``cancel()``. Callbacks
    registered with ``on_commit`` run only after a successful commit.

    Example:
        >>> from botocore.stub import Stubber
        >>> from sqsjobs import JobApp
        >>> from sqsjobs._clients import dynamodb_client
        >>> app = JobApp(queue_url="https://sqs.example/q", outbox_table="outbox")
        >>> @app.job("process-order", key="process-order:{order_id}")
        ... def process_order(order_id: int) -> None: ...
        >>> client = dynamodb_client(region_name="eu-west-1")
        >>> with Stubber(client) as stub, app.use(dynamodb_client=client), app.transaction() as tx:
        ...     stub.add_response("transact_write_items", {})  # DynamoDB accepts the two items at once
        ...     tx.put("orders", {"pk": "order#7", "total_cents": 1250}, condition="attribute_not_exists(pk)")
        ...     tx.enqueue("process-order", order_id=7)
        ...     tx.on_commit(lambda: print("order 7 placed"))
        'process-order:7'
        order 7 placed
    """

    def __init__(self, runtime: Runtime, *, client: DynamoDBClient | None = None, outbox_table: str | None = None,
                 clock: Callable[[], float] | None = None, ttl: float = OUTBOX_TTL_SECONDS) -> None:
        self.runtime = runtime
        self._client = client
        self.outbox_table = outbox_table
        self.clock = clock or runtime.clock
        self.ttl = ttl
        self.items: list[dict[str, Any]] = []
        self.enqueued: dict[str, JobMessage] = {}
        self._callbacks: list[Callable[[], Any]] = []
        # Same token on every attempt: DynamoDB makes a repeated commit a no-op for 10 minutes,
        # so a commit whose response was lost can be retried without writing twice.
        self.token = uuid.uuid4().hex
        self.committed = False
        self.cancelled = False

    # ------------------------------------------------------------ writes
    def put(self, table: str, item: Mapping[str, Any], *, condition: str | None = None,
            names: Mapping[str, str] | None = None, values: Mapping[str, Any] | None = None) -> None:
        """Put ``item`` (plain Python values) into ``table``, if ``condition`` holds.

        Example:
            >>> from sqsjobs import JobApp
            >>> tx = JobApp(queue_url="https://sqs.example/q").transaction()
            >>> tx.put("orders", {"pk": "order#7"}, condition="attribute_not_exists(pk)")
            >>> tx.items[0]["Put"]["Item"], tx.items[0]["Put"]["ConditionExpression"]
            ({'pk': {'S': 'order#7'}}, 'attribute_not_exists(pk)')
        """
        self._add("Put", {"TableName": table, "Item": _serialize_map(item)}, condition, names, values)

    def update(self, table: str, key: Mapping[str, Any], expression: str, *, condition: str | None = None,
               names: Mapping[str, str] | None = None, values: Mapping[str, Any] | None = None) -> None:
        """Apply an ``UpdateExpression`` to the item at ``key``.

        Example:
            >>> from sqsjobs import JobApp
            >>> tx = JobApp(queue_url="https://sqs.example/q").transaction()
            >>> tx.update("stock", {"pk": "sku#1"}, "SET qty = qty - :n", condition="qty >= :n", values={":n": 1})
            >>> tx.items[0]["Update"]["ExpressionAttributeValues"]
            {':n': {'N': '1'}}
        """
        request = {"TableName": table, "Key": _serialize_map(key), "UpdateExpression": expression}
        self._add("Update", request, condition, names, values)

    def delete(self, table: str, key: Mapping[str, Any], *, condition: str | None = None,
               names: Mapping[str, str] | None = None, values: Mapping[str, Any] | None = None) -> None:
        """Delete the item at ``key``, if ``condition`` holds."""
        self._add("Delete", {"TableName": table, "Key": _serialize_map(key)}, condition, names, values)

    def check(self, table: str, key: Mapping[str, Any], condition: str, *,
              names: Mapping[str, str] | None = None, values: Mapping[str, Any] | None = None) -> None:
        """Require ``condition`` on the item at ``key`` without writing it."""
        self._add("ConditionCheck", {"TableName": table, "Key": _serialize_map(key)}, condition, names, values)

    def put_model(self, instance: Any, *, condition: Any = None) -> None:
        """Put a pynamodb model instance (with an optional pynamodb condition).

        Example:
            >>> from pynamodb.attributes import NumberAttribute, UnicodeAttribute
            >>> from pynamodb.models import Model
            >>> class Order(Model):
            ...     class Meta: table_name = "orders"
            ...     pk = UnicodeAttribute(hash_key=True); total_cents = NumberAttribute()
            >>> from sqsjobs import JobApp
            >>> tx = JobApp(queue_url="https://sqs.example/q").transaction()
            >>> tx.put_model(Order("order#7", total_cents=1250), condition=Order.pk.does_not_exist())
            >>> tx.items[0]["Put"]["Item"]
            {'pk': {'S': 'order#7'}, 'total_cents': {'N': '1250'}}
        """
        kwargs = instance.get_save_kwargs_from_instance(condition=condition)
        kwargs.pop("ReturnValuesOnConditionCheckFailure", None)
        self._append({"Put": kwargs})

    def add(self, transact_item: Mapping[str, Any]) -> None:
        """Add one raw ``TransactItems`` entry (``{"Put": {...}}`` in DynamoDB JSON), for what the helpers lack."""
        self._append(dict(transact_item))

    # ------------------------------------------------------------ enqueue
    def enqueue(self, job: str, *, delay: float = 0, group: str | None = None, trace_id: str | None = None,
                tenant: str | None = None, **args: Any) -> str:
        """Enqueue job ``job`` when (and only if) the transaction commits; returns its idempotency key.

        Arguments are validated now. Enqueuing the same key twice in one
        transaction is one job (DynamoDB forbids two writes to one item, and
        the guard would run it once anyway).

        Example:
            >>> from sqsjobs import JobApp
            >>> app = JobApp(queue_url="https://sqs.example/q", outbox_table="outbox")
            >>> @app.job("process-order", key="process-order:{order_id}")
            ... def process_order(order_id: int) -> None: ...
            >>> tx = app.transaction()
            >>> tx.enqueue("process-order", order_id=7), tx.items[0]["Put"]["TableName"]
            ('process-order:7', 'outbox')
        """
        message = self.runtime.job(job).message(delay=delay, group=group, trace_id=trace_id, tenant=tenant, **args)
        if message.due_at is not None:
            from sqsjobs._errors import InvalidDelayError

            raise InvalidDelayError(
                f"job {job!r}: the outbox relays delays of at most 900 s (SQS's DelaySeconds), got delay={delay!r}; "
                f"for a longer one enqueue after the commit: tx.on_commit(lambda: app.enqueue({job!r}, ..., "
                "delay=...)), which waits in an EventBridge Scheduler schedule"
            )
        if message.key in self.enqueued:
            return message.key
        now = self.clock()
        model = outbox_item_model(self._outbox_table())
        item = model(
            message.key, job=message.job, body=message.body, delay=message.delay, group=message.group,
            trace_id=message.trace_id,
            attributes=json.dumps(message.extra_attributes, sort_keys=True) if message.extra_attributes else None,
            queue=None if message.queue == DEFAULT_QUEUE else message.queue, tenant=message.tenant,
            created_at=now, expires_at=int(now + self.ttl),
        )
        kwargs = item.get_save_kwargs_from_instance()
        kwargs.pop("ReturnValuesOnConditionCheckFailure", None)
        self._append({"Put": kwargs})
        self.enqueued[message.key] = message
        return message.key

    def on_commit(self, callback: Callable[[], Any]) -> None:
        """Run ``callback()`` after the commit succeeded (never if it failed or was cancelled)."""
        self._callbacks.append(callback)

    # ------------------------------------------------------------ outcome
    def cancel(self) -> None:
        """Discard every write and enqueue; leaving the block then commits nothing."""
        self.cancelled = True

    def commit(self) -> None:
        """Write everything in one ``TransactWriteItems``, then run the ``on_commit`` callbacks.

        Raises ``TransactionError`` (with ``reasons`` per item when DynamoDB
        cancelled it); then nothing was written and nothing will be enqueued.
        Calling ``commit()`` again after an error of unknown outcome (a network
        failure) is safe: the request token makes the retry a no-op if the first
        attempt did commit.
        """
        if self.cancelled:
            raise TransactionError("the transaction was cancelled; nothing to commit")
        if self.committed:
            return
        if self.items:
            self._write()
        self.committed = True
        self._run_callbacks()

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: Any) -> None:
        if kind is None and not self.cancelled:
            self.commit()

    # ------------------------------------------------------------ internals
    def _add(self, operation: str, request: dict[str, Any], condition: str | None,
             names: Mapping[str, str] | None, values: Mapping[str, Any] | None) -> None:
        if condition is not None:
            request["ConditionExpression"] = condition
        if names:
            request["ExpressionAttributeNames"] = dict(names)
        if values:
            request["ExpressionAttributeValues"] = _serialize_map(values)
        self._append({operation: request})

    def _append(self, transact_item: dict[str, Any]) -> None:
        if self.committed or self.cancelled:
            raise TransactionError("the transaction is already committed or cancelled; start a new one")
        if len(self.items) >= MAX_TRANSACTION_ITEMS:
            raise TransactionError(
                f"a DynamoDB transaction holds at most {MAX_TRANSACTION_ITEMS} items (writes plus enqueues, "
                "TransactWriteItems' limit); this one would have "
                f"{len(self.items) + 1}. Split the work, or enqueue one job that fans out."
            )
        self.items.append(transact_item)

    def _write(self) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        client = self._client or self.runtime.dynamodb
        try:
            client.transact_write_items(TransactItems=self.items, ClientRequestToken=self.token)  # type: ignore[arg-type]
        except ClientError as error:
            code = error.response.get("Error", {}).get("Code", "")
            reasons = tuple(str(r.get("Code", "None")) for r in error.response.get("CancellationReasons", []))
            if code == "TransactionCanceledException":
                raise TransactionError(
                    f"DynamoDB cancelled the transaction ({', '.join(_described(reasons))}); "
                    "nothing was written or enqueued", reasons=reasons,
                ) from error
            raise TransactionError(f"TransactWriteItems failed ({code}): {error}; nothing was enqueued") from error
        except BotoCoreError as error:
            raise TransactionError(
                f"TransactWriteItems did not answer ({error}); the outcome is unknown. Calling commit() again "
                "within 10 minutes is safe (same ClientRequestToken)", unknown_outcome=True,
            ) from error

    def _run_callbacks(self) -> None:
        # Every callback runs even if one fails: each is an independent after-commit action.
        errors: list[BaseException] = []
        for callback in self._callbacks:
            try:
                callback()
            except Exception as error:
                errors.append(error)
        self._callbacks.clear()
        if errors:
            raise errors[0]

    def _outbox_table(self) -> str:
        table = self.outbox_table or self.runtime.settings.outbox_table
        if not table:
            raise ConfigurationError(
                "the outbox table is not set: pass outbox_table= to JobApp or set SQSJOBS_OUTBOX_TABLE "
                "(the template's OutboxTable)"
            )
        return table


def _described(reasons: Sequence[str]) -> list[str]:
    described = [f"item {i}: {code}" for i, code in enumerate(reasons) if code not in ("None", "")]
    return described or ["no reason given"]


def _serialize_map(values: Mapping[str, Any]) -> dict[str, Any]:
    """Plain Python values → DynamoDB JSON (floats become exact decimals, as DynamoDB requires)."""
    from boto3.dynamodb.types import TypeSerializer

    serializer = TypeSerializer()
    return {name: serializer.serialize(_decimals(value)) for name, value in values.items()}


def _decimals(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, Mapping):
        return {k: _decimals(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_decimals(v) for v in value]
    return value


# ====================================================================== relay
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
        from sqsjobs._settings import Settings

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
                raise ConfigurationError("the relay needs the jobs queue: pass queue_url= or set SQSJOBS_QUEUE_URL")
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
