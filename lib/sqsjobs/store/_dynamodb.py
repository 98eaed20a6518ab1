"""Leases on a DynamoDB table: each operation one conditional ``UpdateItem``, rendered from its rule.

Each operation's ``Rule`` (``sqsjobs.store._rules``: a condition and updates,
stated once in ``sqsjobs.store._lease_ops``) is rendered as pynamodb
condition and update expressions once per shape (``store/_expressions.py``);
every call then binds its values.

``Acquire`` and ``Close`` return the item they found (``ReturnValues=ALL_OLD``),
``Amend`` the item it made (``ALL_NEW``), and every refusal returns the item that
refused it (``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so one round trip
tells the caller everything. An item past its TTL is replaced whole
(``PutItem``), as if it were absent: its old fields must not leak into the new
lease.

A ``Transact`` sends the same prepared updates in one ``TransactWriteItems``
(each a 2-WCU transactional write); a refusal names the operation whose
condition failed, with the item that refused it. A transaction DynamoDB
cancels because another one held an item at the same moment
(``TransactionConflict``) is sent again after a short full-jitter pause.

``write_batch`` sends the operations a PartiQL statement can carry (a
batch's fresh claims, its completions) in ``BatchExecuteStatement`` calls,
rendered from the same rules by ``sqsjobs.store._statements`` (which says
which operations keep single requests, and why), once the table's endpoint
has shown that it answers statements as DynamoDB documents
(``sqsjobs.store._statement_trust``: a probe before the first, a fallback for
good after a call fails in a way that is not throttling). Where it has not
(stock moto, a role without ``dynamodb:PartiQLInsert``) every operation is
its single request: the reference semantics, never a weaker guarantee.
"""

from __future__ import annotations

import enum
import functools
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, TypeVar

from sqsjobs._backoff import BackoffPolicy, RandomSource, Retries
from sqsjobs._errors import StoreError
from sqsjobs.store import _statement_answers as answers
from sqsjobs.store import _statements as s
from sqsjobs.store._dynamodb_errors import ConditionFailed, dynamodb_errors
from sqsjobs.store._expressions import Prepared, prepare
from sqsjobs.store._lease import (
    LeaseItem,
    LeaseState,
    LeaseStore,
    Operation,
    SingleOperation,
    Written,
)
from sqsjobs.store._lease_ops import Acquire, Transact
from sqsjobs.store._rules import LEASE_FIELDS, Rule
from sqsjobs.store._statement_trust import StatementTrust, call_failure, statement_failure
from sqsjobs.store._table import KEY_ATTRIBUTE, TableItem, table_item

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

T = TypeVar("T")
#: BatchGetItem reads at most this many keys a call
BATCH_GET_KEYS = 100
#: a transaction cancelled by a conflict (a batch read left keys unread) is sent this often in all,
#: with full-jitter pauses between
TRANSACTION_RETRIES = Retries(tries=8, backoff=BackoffPolicy(base=0.02, cap=1.0))
#: cancellation reasons that mean "another request held an item at that moment", not "a condition failed"
CONFLICTS = frozenset({"TransactionConflict"})


class ConcurrentStore(LeaseStore):
    """A store whose operations wait on the network: run them on a small thread pool.

    The pool is created on first use and kept for the process (a Lambda
    container): a batch has at most 10 records, so its claims need 10
    threads; its limiter probes (``sqsjobs.flow._permits``: a token per limited job
    and limiter, a few slots per concurrency limiter) may need more, and a
    thread is only started when a wave needs it.
    """

    POOL_SIZE = 32

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def write_many(self, ops: Sequence[Operation]) -> list[Written]:
        if len(ops) <= 1:
            return [self.write(op) for op in ops]
        return list(self.pool.map(self.write, ops))

    def submit(self, op: Operation) -> Future[Written]:
        return self.pool.submit(self.write, op)

    def run(self, work: Callable[[], T]) -> Future[T]:
        return self.pool.submit(work)

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The thread pool (built once)."""
        if self._pool is None:
            with self._pool_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self.POOL_SIZE, thread_name_prefix="sqsjobs-store")
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None


class DynamoDBStore(ConcurrentStore):
    """The leases of one DynamoDB table (partition key ``pk``), sent through an injected client.

    Example:
        >>> from botocore.stub import Stubber
        >>> from sqsjobs._clients import dynamodb_client
        >>> client = dynamodb_client(region_name="eu-west-1")
        >>> store = DynamoDBStore(client, "sqsjobs-idempotency")
        >>> with Stubber(client) as stub:
        ...     stub.add_response("get_item", {})  # no item: no delivery ever claimed the key
        ...     store.get("invoice-email:42") is None
        True
    """

    def __init__(self, client: DynamoDBClient, table_name: str, *, random: RandomSource | None = None,
                 sleep: Callable[[float], None] = time.sleep, statements: bool | None = None) -> None:
        """``statements``: None probes the endpoint before the first batched write, True trusts it unprobed
        (a test that stubs the calls), False never batches (``sqsjobs.store._statement_trust``)."""
        super().__init__()
        self.client = client
        self.table_name = table_name
        self.random = random
        self.sleep = sleep
        self._trusted = statements
        self._trust: StatementTrust | None = None
        self._prepared: dict[Rule, Prepared] = {}

    @property
    def statements(self) -> StatementTrust:
        """Whether this table's ``BatchExecuteStatement`` may carry a batch's writes (shared per client)."""
        trust = self._trust
        if trust is None or not trust.serves(self.client):
            trust = self._trust = StatementTrust.of(self.client, self.table_name, trusted=self._trusted)
        return trust

    def get(self, key: str) -> LeaseItem | None:
        with dynamodb_errors("GetItem", self.table_name):
            response = self.client.get_item(TableName=self.table_name, Key={KEY_ATTRIBUTE: {"S": key}},
                                             ConsistentRead=True)
        return lease_item(response.get("Item"))

    def get_many(self, keys: Sequence[str]) -> dict[str, LeaseItem]:
        found: dict[str, LeaseItem] = {}
        unique = list(dict.fromkeys(keys))
        for start in range(0, len(unique), BATCH_GET_KEYS):
            wanted: Any = {self.table_name: {"Keys": [{KEY_ATTRIBUTE: {"S": k}} for k in
                                                      unique[start:start + BATCH_GET_KEYS]],
                                             "ConsistentRead": True}}
            for _ in TRANSACTION_RETRIES.attempts(sleep=self.sleep, random=self.random):
                with dynamodb_errors("BatchGetItem", self.table_name):
                    response = self.client.batch_get_item(RequestItems=wanted)
                for raw in response.get("Responses", {}).get(self.table_name, []):
                    item = lease_item(raw)
                    if item is not None:
                        found[item.key] = item
                wanted = response.get("UnprocessedKeys") or {}
                if not wanted:
                    break
            if wanted:
                raise StoreError(f"DynamoDB BatchGetItem on table {self.table_name} left keys unread (throttled)")
        return found

    def _apply(self, op: Operation) -> Written:
        if isinstance(op, Transact):
            return self._transact(op)
        rule, values = op.rule(), op.values()
        request = self._prepare(rule).bind(self.table_name, op.key, values)
        try:
            with dynamodb_errors("UpdateItem", self.table_name):
                response = self.client.update_item(**request)
        except ConditionFailed as failed:
            found = lease_item(failed.item)
            if rule.replaces_expired and found is not None and found.past_ttl(values["now"]):
                return self._replace(op, rule, values)
            return Written(key=op.key, ok=False, item=found)
        return Written(key=op.key, ok=True, item=lease_item(response.get("Attributes")))

    def _transact(self, op: Transact) -> Written:
        """One ``TransactWriteItems``; a cancellation by conflict is retried, by a condition answered."""
        from botocore.exceptions import BotoCoreError, ClientError

        items = [{"Update": self._prepare(inner.rule()).transact_update(self.table_name, inner.key, inner.values())}
                 for inner in op.ops]
        for attempt in TRANSACTION_RETRIES.attempts(sleep=self.sleep, random=self.random):
            try:
                # A fresh token per attempt: a cancelled attempt wrote nothing, and botocore's own retries
                # of one attempt reuse its token, so a commit whose answer was lost is not applied twice.
                self.client.transact_write_items(TransactItems=items, ClientRequestToken=uuid.uuid4().hex)  # type: ignore[arg-type]
                return Written(key=op.key, ok=True)
            except ClientError as error:
                code = error.response.get("Error", {}).get("Code", "")
                reasons: list[Any] = list(error.response.get("CancellationReasons") or [])
                codes = [str(r.get("Code") or "None") for r in reasons]
                if "ConditionalCheckFailed" in codes:
                    index = codes.index("ConditionalCheckFailed")
                    return Written(key=op.key, ok=False, item=lease_item(reasons[index].get("Item")),
                                   refused_at=index)
                busy = code == "TransactionInProgressException" or any(c in CONFLICTS for c in codes)
                if not busy or attempt == TRANSACTION_RETRIES.tries:
                    raise StoreError(f"DynamoDB TransactWriteItems on table {self.table_name} failed: {error}") \
                        from error
            except BotoCoreError as error:
                raise StoreError(f"DynamoDB TransactWriteItems on table {self.table_name} failed: {error}") \
                    from error
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _replace(self, op: SingleOperation, rule: Rule, values: Mapping[str, Any]) -> Written:
        """Write the item whole over one past its TTL (conditional on it still being past it)."""
        if not rule.holds(None, values):
            return Written(key=op.key, ok=False, item=self.get(op.key))
        item = table_item(rule.apply(None, op.key, values))
        request = item.get_save_kwargs_from_instance(condition=TableItem.expires_at < values["now"],
                                                     return_values_on_condition_failure="ALL_OLD")
        request["TableName"] = self.table_name
        try:
            with dynamodb_errors("PutItem", self.table_name):
                self.client.put_item(**request)
        except ConditionFailed as failed:
            return Written(key=op.key, ok=False, item=lease_item(failed.item))
        return Written(key=op.key, ok=True, item=None)

    def _prepare(self, rule: Rule) -> Prepared:
        prepared = self._prepared.get(rule)
        if prepared is None:
            prepared = self._prepared[rule] = prepare(rule)
        return prepared


    def write_batch(self, ops: Sequence[Operation]) -> list[Written]:
        """Statements in ``BatchExecuteStatement`` calls of <= 25, the rest single, all at once; then fallbacks.

        Only once the endpoint is trusted (``self.statements``); otherwise, and for what a call could not
        carry (it failed whole, or a statement was refused for a reason that is not its condition's),
        each operation is its own request.
        """
        batched, single = s.plan(ops)
        if len(batched) <= 1 or not self.statements.allows():
            return self.write_many(ops)
        answers: list[Written | _Unsent | None] = [None] * len(ops)
        calls: list[Callable[[], list[tuple[int, Written | _Unsent | None]]]] = [
            functools.partial(self._statements, ops, chunk) for chunk in s.chunks(batched)]
        calls += [functools.partial(self._single, ops, i) for i in single]
        # One request (a batch of up to 25 statements, nothing else) has nothing to overlap: it is sent from
        # this thread, as a pool's hand-off costs a vCPU more than the call it would hide.
        sent = [calls[0]()] if len(calls) == 1 else self.pool.map(lambda call: call(), calls)
        for done in sent:
            for index, written in done:
                answers[index] = written
        found = [i for i, written in enumerate(answers) if written is None and isinstance(ops[i], Acquire)]
        if found:  # inserts that met an item: read them, answer the refusals, send only what may write
            for index, written in zip(found, self._after_insert([ops[i] for i in found]), strict=True):
                answers[index] = written
        fallback = [i for i, written in enumerate(answers) if not isinstance(written, Written)]
        for index, written in zip(fallback, self.write_many([ops[i] for i in fallback]), strict=True):
            answers[index] = written
        return [written for written in answers if isinstance(written, Written)]

    def _after_insert(self, ops: Sequence[Operation]) -> list[Written | None]:
        """Refused fresh acquires: refused again where the item read refuses the rule (no second write), else None."""
        try:
            items = self.get_many([op.key for op in ops])
        except StoreError:
            return [None] * len(ops)
        return [answers.refusal(op, items.get(op.key)) for op in ops]

    def _single(self, ops: Sequence[Operation], index: int) -> list[tuple[int, Written | _Unsent | None]]:
        return [(index, self.write(ops[index]))]

    def _statements(self, ops: Sequence[Operation], chunk: Sequence[int]
                    ) -> list[tuple[int, Written | _Unsent | None]]:
        """One ``BatchExecuteStatement`` of ``ops[chunk]``: each answer; None where the single request decides,
        ``UNSENT`` where the statement did not run for a reason that makes statements untrusted."""
        from botocore.exceptions import BotoCoreError, ClientError

        requests = [s.bind(ops[index], self.table_name) for index in chunk]
        try:
            response = self.client.batch_execute_statement(Statements=requests)  # type: ignore[arg-type]
        except Exception as error:  # in-process moto raises its own exceptions out of the call
            why = call_failure(error)
            if why is None and isinstance(error, ClientError | BotoCoreError):
                failed = f"DynamoDB BatchExecuteStatement on table {self.table_name} failed: {error}"
                return [(index, Written(key=ops[index].key, ok=False, error=failed)) for index in chunk]
            self.statements.lose(why or f"{type(error).__name__}: {error}")
            return [(index, UNSENT) for index in chunk]
        results: list[tuple[int, Written | _Unsent | None]] = []
        for index, answer in zip(chunk, response.get("Responses", []), strict=True):
            refused: Mapping[str, Any] = answer.get("Error") or {}
            why = statement_failure(refused) if refused else None
            if why is not None:  # not run, and not for its condition: statements are not to be believed here
                self.statements.lose(why)
                results.append((index, UNSENT))
            else:
                results.append((index, answers.read(ops[index], answer, lease_item(refused.get("Item")))))
        return results


class _Unsent(enum.Enum):
    """A batched operation its statement did not carry: its single request answers."""

    UNSENT = "unsent"


UNSENT = _Unsent.UNSENT


def lease_item(raw: Mapping[str, Any] | None) -> LeaseItem | None:
    """A raw DynamoDB item as a ``LeaseItem`` (``None`` stays ``None``).

    Example:
        >>> lease_item({"pk": {"S": "k"}, "status": {"S": "HELD"}, "owner": {"S": "a"}, "job": {"S": "j"}})
        LeaseItem(key='k', state=<LeaseState.HELD: 'HELD'>, owner='a', lease_until=None, expires_at=None, \
fingerprint=None, fp_version=None, attempts=0, data={'job': 'j'})
    """
    if not raw:
        return None
    values = TableItem.from_raw_data(dict(raw)).attribute_values
    return LeaseItem(
        key=values["pk"],
        state=LeaseState(values.get("status", LeaseState.RELEASED.value)),
        owner=values.get("owner"),
        lease_until=values.get("lease_until"),
        expires_at=values.get("expires_at"),
        fingerprint=values.get("fingerprint"),
        fp_version=_int(values.get("fp_version")),
        attempts=_int(values.get("attempts")) or 0,
        data={name: frozenset(value) if isinstance(value, set) else value
              for name, value in values.items() if name not in LEASE_FIELDS and name != KEY_ATTRIBUTE},
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
