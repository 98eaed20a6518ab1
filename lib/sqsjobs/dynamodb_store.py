"""The idempotency guard on DynamoDB: conditional writes, fenced on the owner.

Claims use ``PutItem`` with ``ReturnValuesOnConditionCheckFailure=ALL_OLD``,
so a conflict tells us in the same round trip whether the key is COMPLETED
(a duplicate) or leased by someone else (and until when). A batch's claims,
and later its completions/releases, run concurrently on a small thread pool:
one round trip each, 1 WCU per write for items under 1 KB.

botocore errors are translated here and nowhere else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from sqsjobs.errors import StoreError
from sqsjobs.guard import (
    COMPLETED,
    IN_PROGRESS,
    AlreadyClaimed,
    ClaimRequest,
    FenceLost,
    Finish,
    IdempotencyStore,
    Record,
    T,
    U,
)
from sqsjobs.records import job_record_model

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: a batch is at most 10 records (SQS), so 10 threads make every claim concurrent
POOL_SIZE = 10


class DynamoDBStore(IdempotencyStore):
    """Idempotency records in a DynamoDB table keyed by ``pk``.

    Example:
        >>> store = DynamoDBStore(boto3.client("dynamodb"), "sqsjobs-idempotency")  # doctest: +SKIP
        >>> store.claim_many([request])[0].state  # doctest: +SKIP
        <ClaimState.CLAIMED: 'claimed'>
    """

    def __init__(self, client: DynamoDBClient, table_name: str) -> None:
        self.client = client
        self.table_name = table_name
        self.model = job_record_model(table_name)
        self._pool: ThreadPoolExecutor | None = None

    def _parallel(self, fn: Callable[[T], U], items: Sequence[T]) -> list[U]:
        if len(items) <= 1:
            return [fn(item) for item in items]
        if self._pool is None:
            # Created once per cold start; threads are cheap and boto3 clients are thread-safe.
            self._pool = ThreadPoolExecutor(max_workers=POOL_SIZE, thread_name_prefix="sqsjobs-guard")
        return list(self._pool.map(fn, items))

    def get(self, key: str) -> Record | None:
        response = self._call("get_item", TableName=self.table_name, Key={"pk": {"S": key}}, ConsistentRead=True)
        item = response.get("Item")
        return None if item is None else self._record(item)

    def _put_if_free(self, request: ClaimRequest) -> None:
        m = self.model
        record = m(request.key, status=IN_PROGRESS, owner=request.owner, lease_until=request.lease_until,
                   job=request.job, expires_at=request.expires_at)
        free = (
            m.pk.does_not_exist()
            | ((m.status == IN_PROGRESS) & (m.lease_until < request.now))
            | (m.expires_at < request.now)
        )
        kwargs = record.get_save_kwargs_from_instance(condition=free, return_values_on_condition_failure="ALL_OLD")
        try:
            self._call("put_item", **kwargs)
        except _ConditionFailed as failed:
            raise AlreadyClaimed(self._record(failed.item) if failed.item else None) from None

    def _complete_if_owner(self, finish: Finish) -> None:
        m = self.model
        kwargs = m(finish.key).get_update_kwargs_from_instance(
            actions=[m.status.set(COMPLETED), m.expires_at.set(finish.expires_at)],
            condition=(m.owner == finish.owner) & (m.status == IN_PROGRESS),
        )
        try:
            self._call("update_item", **kwargs)
        except _ConditionFailed:
            raise FenceLost(finish.key) from None

    def _delete_if_owner(self, finish: Finish) -> None:
        m = self.model
        kwargs = m(finish.key).get_delete_kwargs_from_instance(condition=m.owner == finish.owner)
        try:
            self._call("delete_item", **kwargs)
        except _ConditionFailed:
            raise FenceLost(finish.key) from None

    def _record(self, item: dict[str, Any]) -> Record:
        r = self.model.from_raw_data(item)
        return Record(key=r.pk, status=r.status, owner=r.owner, lease_until=r.lease_until,
                      expires_at=r.expires_at, job=r.job)

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        """The one place botocore errors become ours."""
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            response: dict[str, Any] = getattr(self.client, operation)(**kwargs)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                item: Any = error.response.get("Item")
                raise _ConditionFailed(item) from None
            raise StoreError(f"DynamoDB {operation} on {self.table_name} failed: {error}") from error
        except BotoCoreError as error:
            raise StoreError(f"DynamoDB {operation} on {self.table_name} failed: {error}") from error
        return response


class _ConditionFailed(Exception):
    def __init__(self, item: dict[str, Any] | None) -> None:
        super().__init__("condition failed")
        self.item = item
