"""Leases on a DynamoDB table: each operation one conditional ``UpdateItem``.

Requests are *prepared*: the table's pynamodb model (``records.TableItem``)
builds each operation's update and condition expressions once, through its
public attribute and condition API, with named parameters where the values go
(``Param``); every call then binds its values, serialized by the model's
attributes. Building an expression costs ~150 µs, binding ~5 µs, and the
shape of an operation never changes, only its values.

``Acquire`` and ``Close`` return the item they found (``ReturnValues=ALL_OLD``)
and every refusal returns the item that refused it
(``ReturnValuesOnConditionCheckFailure=ALL_OLD``), so one round trip tells the
caller everything. An item past its TTL is replaced whole (``PutItem``), as
if it were absent: its old fields must not leak into the new lease.

A ``Transact`` sends the same prepared updates in one ``TransactWriteItems``
(each a 2-WCU transactional write); a refusal names the operation whose
condition failed, with the item that refused it. A transaction DynamoDB
cancels because another one held an item at the same moment
(``TransactionConflict``) is sent again after a short full-jitter pause.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pynamodb.expressions.condition import Condition
from pynamodb.expressions.operand import Path, Value
from pynamodb.expressions.update import Action, Update

from sqsjobs._backoff import BackoffPolicy, RandomSource
from sqsjobs._errors import StoreError
from sqsjobs.store._dynamodb_errors import ConditionFailed, dynamodb_errors
from sqsjobs.store._lease import (
    Acquire,
    Amend,
    Annotate,
    Close,
    Complete,
    ConcurrentStore,
    FieldValue,
    HandOver,
    LeaseItem,
    LeaseState,
    Operation,
    Release,
    Renew,
    SingleOperation,
    Transact,
    Written,
    expected,
)
from sqsjobs.store._table import FIELDS, KEY_ATTRIBUTE, TableItem

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: the fields the lease itself owns; everything else an item holds is the user's ``data``
LEASE_FIELDS = frozenset({"pk", "status", "owner", "lease_until", "expires_at", "fingerprint", "fp_version",
                          "attempts"})
#: BatchGetItem reads at most this many keys a call
BATCH_GET_KEYS = 100
#: a transaction cancelled by a conflict is sent this often in all, with full-jitter pauses between
TRANSACTION_ATTEMPTS = 8
TRANSACTION_BACKOFF = BackoffPolicy(base=0.02, cap=1.0)
#: cancellation reasons that mean "another request held an item at that moment", not "a condition failed"
CONFLICTS = frozenset({"TransactionConflict"})


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
                 sleep: Callable[[float], None] = time.sleep) -> None:
        super().__init__()
        self.client = client
        self.table_name = table_name
        self.random = random
        self.sleep = sleep
        self._prepared: dict[tuple[Any, ...], Prepared] = {}

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
            for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
                with dynamodb_errors("BatchGetItem", self.table_name):
                    response = self.client.batch_get_item(RequestItems=wanted)
                for raw in response.get("Responses", {}).get(self.table_name, []):
                    item = lease_item(raw)
                    if item is not None:
                        found[item.key] = item
                wanted = response.get("UnprocessedKeys") or {}
                if not wanted:
                    break
                self.sleep(TRANSACTION_BACKOFF.next_delay(attempt, self.random))
            if wanted:
                raise StoreError(f"DynamoDB BatchGetItem on table {self.table_name} left keys unread (throttled)")
        return found

    def _apply(self, op: Operation) -> Written:
        if isinstance(op, Transact):
            return self._transact(op)
        prepared = self._prepare(op)
        request = prepared.bind(self.table_name, op.key, _values(op))
        try:
            with dynamodb_errors("UpdateItem", self.table_name):
                response = self.client.update_item(**request)
        except ConditionFailed as failed:
            found = lease_item(failed.item)
            if isinstance(op, Acquire | Close) and found is not None and found.past_ttl(op.now):
                return self._replace(op)
            return Written(key=op.key, ok=False, item=found)
        return Written(key=op.key, ok=True, item=lease_item(response.get("Attributes")))

    def _transact(self, op: Transact) -> Written:
        """One ``TransactWriteItems``; a cancellation by conflict is retried, by a condition answered."""
        from botocore.exceptions import BotoCoreError, ClientError

        items = [{"Update": self._prepare(inner).transact_update(self.table_name, inner.key, _values(inner))}
                 for inner in op.ops]
        for attempt in range(1, TRANSACTION_ATTEMPTS + 1):
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
                if not busy or attempt == TRANSACTION_ATTEMPTS:
                    raise StoreError(f"DynamoDB TransactWriteItems on table {self.table_name} failed: {error}") \
                        from error
            except BotoCoreError as error:
                raise StoreError(f"DynamoDB TransactWriteItems on table {self.table_name} failed: {error}") \
                    from error
            self.sleep(TRANSACTION_BACKOFF.next_delay(attempt, self.random))
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _replace(self, op: Acquire | Close) -> Written:
        """Write the item whole over one past its TTL (conditional on it still being past it)."""
        if isinstance(op, Close) and not expected(None, op.expect):
            return Written(key=op.key, ok=False, item=self.get(op.key))
        fields: dict[str, FieldValue] = {name: value for name, value in op.data.items() if value is not None}
        if isinstance(op, Acquire):
            fields.update(status=LeaseState.HELD.value, owner=op.owner, lease_until=op.lease_until,
                          expires_at=op.expires_at, fingerprint=op.fingerprint, fp_version=op.fp_version,
                          attempts=1 if op.count_attempt else None)
        else:
            fields.update(status=op.state.value, expires_at=op.expires_at)
        item = TableItem(op.key)
        for name, value in fields.items():
            if value is not None:
                setattr(item, name, value)
        request = item.get_save_kwargs_from_instance(condition=TableItem.expires_at < op.now,
                                                     return_values_on_condition_failure="ALL_OLD")
        request["TableName"] = self.table_name
        try:
            with dynamodb_errors("PutItem", self.table_name):
                self.client.put_item(**request)
        except ConditionFailed as failed:
            return Written(key=op.key, ok=False, item=lease_item(failed.item))
        return Written(key=op.key, ok=True, item=None)

    def _prepare(self, op: SingleOperation) -> Prepared:
        shape = _shape(op)
        prepared = self._prepared.get(shape)
        if prepared is None:
            prepared = self._prepared[shape] = prepare(op)
        return prepared


# ---------------------------------------------------------------- prepared requests
@dataclass(frozen=True)
class Param:
    """A named hole in a prepared expression, filled by each call; ``attribute`` serializes its value."""

    name: str
    attribute: Any


def param(attribute: Any, name: str) -> Value:
    """A pynamodb operand for the value ``name``, typed and serialized as ``attribute``."""
    return Value({attribute.attr_type: Param(name, attribute)})


def assign(attribute: Any, name: str) -> Action:
    """``SET attribute = :name`` (the value bound per call)."""
    return Path(attribute).set(param(attribute, name))


class Prepared:
    """An operation's expressions, built once by pynamodb; ``bind`` fills in one call's values.

    Example:
        >>> m = TableItem
        >>> prepared = Prepared(Update(assign(m.owner, "owner")), m.status == "HELD", "NONE")
        >>> request = prepared.bind("jobs", "k", {"owner": "a"})
        >>> request["UpdateExpression"], request["ExpressionAttributeValues"]
        ('SET #1 = :1', {':0': {'S': 'HELD'}, ':1': {'S': 'a'}})
    """

    def __init__(self, update: Update, condition: Condition, return_values: str) -> None:
        names: dict[str, str] = {}
        values: dict[str, Any] = {}
        self.condition_expression = condition.serialize(names, values)
        self.update_expression = update.serialize(names, values)
        self.names = {placeholder: name for name, placeholder in names.items()}
        self.constants: dict[str, Any] = {}
        #: (placeholder, DynamoDB type, parameter name, the attribute that serializes it)
        self.holes: list[tuple[str, str, str, Any]] = []
        for placeholder, value in values.items():
            ((kind, inner),) = value.items()
            if isinstance(inner, Param):
                self.holes.append((placeholder, kind, inner.name, inner.attribute))
            else:
                self.constants[placeholder] = value
        self.return_values = return_values

    def transact_update(self, table: str, key: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """The same update as a ``TransactWriteItems`` entry's ``Update`` (which returns no values)."""
        request = self.bind(table, key, values)
        del request["ReturnValues"]
        return request

    def bind(self, table: str, key: str, values: Mapping[str, Any]) -> dict[str, Any]:
        """The request for ``key`` with ``values`` in the holes."""
        bound = dict(self.constants)
        for placeholder, kind, name, attribute in self.holes:
            value = values[name]
            bound[placeholder] = {kind: attribute.serialize(value)}
        request = {
            "TableName": table,
            "Key": {KEY_ATTRIBUTE: {"S": key}},
            "UpdateExpression": self.update_expression,
            "ConditionExpression": self.condition_expression,
            "ExpressionAttributeNames": self.names,
            "ExpressionAttributeValues": bound,
            "ReturnValues": self.return_values,
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
        }
        if not bound:  # an amend that only removes fields: DynamoDB refuses an empty map
            del request["ExpressionAttributeValues"]
        return request


def prepare(op: SingleOperation) -> Prepared:
    """The expressions of ``op``'s shape (its kind, which fields it sets or removes)."""
    m = TableItem
    actions: list[Action] = [*_data_actions(op.data)]
    if isinstance(op, Acquire | Close):
        # Past its TTL an item is refused here and replaced whole (``DynamoDBStore._replace``).
        not_past_ttl = m.expires_at.does_not_exist() | (m.expires_at >= param(m.expires_at, "now"))
        lease_ran_out = (m.status == LeaseState.HELD.value) & (m.lease_until < param(m.lease_until, "now"))
    if isinstance(op, Acquire):
        actions += [m.status.set(LeaseState.HELD.value), assign(m.owner, "owner"),
                    assign(m.expires_at, "expires_at")]
        actions.append(m.lease_until.remove() if op.lease_until is None
                       else assign(m.lease_until, "lease_until"))
        free: Condition = (m.status == LeaseState.RELEASED.value) | lease_ran_out
        if op.fingerprint is not None:
            actions += [assign(m.fingerprint, "fingerprint"),
                        assign(m.fp_version, "fp_version")]
            free = free & (m.fingerprint.does_not_exist() | (m.fingerprint == param(m.fingerprint, "fingerprint"))
                           | (m.fp_version != param(m.fp_version, "fp_version")))
        if op.not_for_message is not None:
            free = free & ~(m.dead_letter_of == param(m.dead_letter_of, "not_for_message"))
        if op.count_attempt:
            actions.append(m.attempts.add(param(m.attempts, "one")))
        return Prepared(Update(*actions), not_past_ttl & (m.pk.does_not_exist() | free), "ALL_OLD")
    if isinstance(op, Close):
        actions += [m.status.set(op.state.value), assign(m.expires_at, "expires_at"),
                    m.owner.remove()]
        closable = m.pk.does_not_exist() | (m.status == LeaseState.RELEASED.value) | lease_ran_out
        return Prepared(Update(*actions), _expecting(not_past_ttl & closable, op.expect), "ALL_OLD")
    if isinstance(op, Amend):
        actions += [_field(name).add(param(_field(name), f"add_{name}")) for name in sorted(op.add)]
        condition: Condition = m.pk.exists()
        for name in sorted(op.above):
            condition = condition & (_field(name) > param(_field(name), f"above_{name}"))
        return Prepared(Update(*actions), _expecting(condition, op.expect), "NONE")
    if isinstance(op, Annotate):
        live = (m.status == LeaseState.HELD.value) & (
            m.lease_until.does_not_exist() | (m.lease_until >= param(m.lease_until, "now")))
        return Prepared(Update(*actions), live, "NONE")
    fence = (m.owner == param(m.owner, "owner")) & (m.status == LeaseState.HELD.value)
    actions.append(assign(m.expires_at, "expires_at"))
    if isinstance(op, Complete):
        actions.append(m.status.set(LeaseState.DONE.value))
    elif isinstance(op, Release):
        actions.append(m.status.set(LeaseState.RELEASED.value))
        if op.attempts_delta:
            actions.append(m.attempts.add(param(m.attempts, "attempts_delta")))
    elif isinstance(op, Renew):
        actions.append(assign(m.lease_until, "lease_until"))
    else:
        actions.append(assign(m.owner, "to_owner"))
    return Prepared(Update(*actions), fence, "NONE")


def _expecting(condition: Condition, expect: Mapping[str, FieldValue]) -> Condition:
    """``condition`` and, for each expected field, its value (``None``: the field is absent)."""
    for name in sorted(expect):
        attribute = _field(name, lease_state=True)
        condition = condition & (attribute.does_not_exist() if expect[name] is None
                                 else attribute == param(attribute, f"expect_{name}"))
    return condition


def _field(name: str, *, lease_state: bool = False) -> Any:
    """The model attribute of a data field (or of ``status`` when a condition may name the lease state)."""
    attribute = FIELDS.get(name)
    if attribute is None or (name in LEASE_FIELDS and not (lease_state and name == "status")):
        raise ValueError(f"{name!r} is not a data field of the idempotency table (records.TableItem)")
    return attribute


def _data_actions(data: Mapping[str, FieldValue]) -> list[Action]:
    actions: list[Action] = []
    for name in sorted(data):
        attribute = FIELDS.get(name)
        if attribute is None or name in LEASE_FIELDS:
            raise ValueError(f"{name!r} is not a data field of the idempotency table (records.TableItem)")
        actions.append(attribute.remove() if data[name] is None else assign(attribute, name))
    return actions


def _shape(op: SingleOperation) -> tuple[Any, ...]:
    data = tuple(sorted((name, value is None) for name, value in op.data.items()))
    if isinstance(op, Acquire):
        return (Acquire, data, op.lease_until is None, op.fingerprint is not None, op.not_for_message is not None,
                op.count_attempt)
    if isinstance(op, Release):
        return (Release, data, bool(op.attempts_delta))
    if isinstance(op, Close):
        return (Close, data, op.state, _expect_shape(op.expect))
    if isinstance(op, Amend):
        return (Amend, data, tuple(sorted(op.add)), _expect_shape(op.expect), tuple(sorted(op.above)))
    return (type(op), data)


def _expect_shape(expect: Mapping[str, FieldValue]) -> tuple[tuple[str, bool], ...]:
    return tuple(sorted((name, value is None) for name, value in expect.items()))


def _values(op: SingleOperation) -> dict[str, Any]:
    values: dict[str, Any] = {name: value for name, value in op.data.items() if value is not None}
    if isinstance(op, Acquire):
        values.update(owner=op.owner, now=op.now, lease_until=op.lease_until, expires_at=op.expires_at,
                      fingerprint=op.fingerprint, fp_version=op.fp_version, not_for_message=op.not_for_message,
                      one=1)
    elif isinstance(op, Close):
        values.update(now=op.now, expires_at=op.expires_at)
        values.update({f"expect_{name}": value for name, value in op.expect.items() if value is not None})
    elif isinstance(op, Amend):
        values.update({f"add_{name}": delta for name, delta in op.add.items()})
        values.update({f"expect_{name}": value for name, value in op.expect.items() if value is not None})
        values.update({f"above_{name}": bound for name, bound in op.above.items()})
    elif isinstance(op, Annotate):
        values["now"] = op.now
    elif isinstance(op, Complete):
        values.update(owner=op.owner, expires_at=op.expires_at)
    elif isinstance(op, Release):
        values.update(owner=op.owner, expires_at=op.expires_at, attempts_delta=op.attempts_delta)
    elif isinstance(op, HandOver):
        values.update(owner=op.owner, to_owner=op.to_owner, expires_at=op.expires_at)
    elif isinstance(op, Renew):
        values.update(owner=op.owner, lease_until=op.lease_until, expires_at=op.expires_at)
    return values


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
        data={name: value for name, value in values.items() if name not in LEASE_FIELDS},
    )


def _int(value: Any) -> int | None:
    return None if value is None else int(value)
