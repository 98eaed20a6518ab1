"""Transactional enqueue: business writes and job messages in one DynamoDB transaction.

``app.transaction()`` collects writes (``put``, ``update``, ``delete``,
``check``) and enqueues (``enqueue``); leaving the ``with`` block commits them
all with one ``TransactWriteItems``. An enqueue becomes an *outbox item* keyed
by the job's idempotency key and carrying the finished message body; nothing
reaches SQS inside the transaction (docs/producers.md, "The transactional outbox"). The outbox table's
stream feeds ``OutboxRelay`` (:mod:`sqsjobs.workflows._relay`), which sends the
bodies with ``SendMessageBatch`` and reports only the unsent records back to the stream.

Delivery is at least once, end to end: a stream batch may be relayed twice
(retry, crash after sending), and then the jobs queue holds two messages with
the same idempotency key; the worker's guard runs the job once. The outbox
item itself is only the trigger: the stream record carries its whole image,
so items expire by TTL (written with the item, ``OUTBOX_TTL_SECONDS``) and the
relay never writes to the table.

This module never calls AWS at import, and the relay never runs job code.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from decimal import Decimal
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqsjobs import _otel
from sqsjobs._errors import ConfigurationError, TransactionError
from sqsjobs._settings import DEFAULT_QUEUE
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.enqueue._sizes import fits

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from sqsjobs._job import JobRuntime

#: DynamoDB's limit on the items of one TransactWriteItems call (writes + enqueues)
MAX_TRANSACTION_ITEMS = 100
#: outbox items outlive the stream's 24-hour retention, then TTL removes them
OUTBOX_TTL_SECONDS = 3 * 24 * 3600


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
        >>> import sqsjobs
        >>> from sqsjobs import JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", outbox_table="outbox")
        >>> @app.job("process-order", key="process-order:{order_id}")
        ... def process_order(order_id: int) -> None: ...
        >>> client = sqsjobs.client("dynamodb", region_name="eu-west-1")
        >>> with Stubber(client) as stub, app.use(dynamodb_client=client), app.transaction() as tx:
        ...     stub.add_response("transact_write_items", {})  # DynamoDB accepts the two items at once
        ...     tx.put("orders", {"pk": "order#7", "total_cents": 1250}, condition="attribute_not_exists(pk)")
        ...     tx.enqueue("process-order", order_id=7)
        ...     tx.on_commit(lambda: print("order 7 placed"))
        'process-order:7'
        order 7 placed
    """

    def __init__(self, runtime: JobRuntime, *, client: DynamoDBClient | None = None, outbox_table: str | None = None,
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
        # The request's trace context goes with the item: the relay sends it later, from another context.
        message = _otel.carrying(message, functools.partial(fits, limit=self.runtime.settings.max_message_bytes))
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
            from sqsjobs._env_names import did_you_mean
            from sqsjobs._settings import ENV_OUTBOX_TABLE

            raise ConfigurationError(
                f"the outbox table is not set: pass outbox_table= to JobApp or set {ENV_OUTBOX_TABLE} "
                f"(the template's OutboxTable){did_you_mean(ENV_OUTBOX_TABLE)}"
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
