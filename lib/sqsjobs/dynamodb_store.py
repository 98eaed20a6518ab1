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

from sqsjobs.dynamodb_calls import ConditionFailed, call
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
from sqsjobs.records import RequestTemplate, job_record_model

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
        self._templates: dict[str, RequestTemplate] = {}

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
        with_ttl = request.expires_at is not None
        template = self._template("claim+ttl" if with_ttl else "claim")
        values: dict[str, str | float] = {"key": request.key, "owner": request.owner, "job": request.job,
                                          "lease_until": request.lease_until, "now": request.now}
        if request.expires_at is not None:
            values["expires_at"] = request.expires_at
        try:
            self._call("put_item", **template.fill(**values))
        except ConditionFailed as failed:
            raise AlreadyClaimed(self._record(failed.item) if failed.item else None) from None

    def _complete_if_owner(self, finish: Finish) -> None:
        request = self._template("complete").fill(key=finish.key, owner=finish.owner, expires_at=finish.expires_at)
        try:
            self._call("update_item", **request)
        except ConditionFailed:
            raise FenceLost(finish.key) from None

    def _delete_if_owner(self, finish: Finish) -> None:
        request = self._template("release").fill(key=finish.key, owner=finish.owner)
        try:
            self._call("delete_item", **request)
        except ConditionFailed:
            raise FenceLost(finish.key) from None

    def _template(self, name: str) -> RequestTemplate:
        template = self._templates.get(name)
        if template is None:
            template = self._templates[name] = build_template(self.model, name)
        return template

    def _record(self, item: dict[str, Any]) -> Record:
        r = self.model.from_raw_data(item)
        return Record(key=r.pk, status=r.status, owner=r.owner, lease_until=r.lease_until,
                      expires_at=r.expires_at, job=r.job)

    def _call(self, operation: str, **kwargs: Any) -> dict[str, Any]:
        return call(self.client, operation, what="idempotency record", **kwargs)


def build_template(m: Any, name: str) -> RequestTemplate:
    """The request shapes of the guard, built through the pynamodb model (conditions included).

    ``claim``: write IN_PROGRESS if the key is absent, its lease ran out, or it is past its TTL
    (``ALL_OLD`` tells a conflict's cause in the same round trip); ``complete`` and ``release``
    are fenced on the owner.
    """
    if name in ("claim", "claim+ttl"):
        with_ttl = name == "claim+ttl"

        def claim(v: dict[str, Any]) -> Any:
            record = m(v["key"], status=IN_PROGRESS, owner=v["owner"], lease_until=v["lease_until"], job=v["job"],
                       expires_at=v["expires_at"] if with_ttl else None)
            free = (
                m.pk.does_not_exist()
                | ((m.status == IN_PROGRESS) & (m.lease_until < v["now"]))
                | (m.expires_at < v["now"])
            )
            return record.get_save_kwargs_from_instance(condition=free, return_values_on_condition_failure="ALL_OLD")

        numbers = ("lease_until", "now", "expires_at") if with_ttl else ("lease_until", "now")
        return RequestTemplate.build(claim, strings=("key", "owner", "job"), numbers=numbers)
    if name == "complete":
        return RequestTemplate.build(
            lambda v: m(v["key"]).get_update_kwargs_from_instance(
                actions=[m.status.set(COMPLETED), m.expires_at.set(v["expires_at"])],
                condition=(m.owner == v["owner"]) & (m.status == IN_PROGRESS),
            ),
            strings=("key", "owner"), numbers=("expires_at",),
        )
    if name == "release":
        return RequestTemplate.build(
            lambda v: m(v["key"]).get_delete_kwargs_from_instance(condition=m.owner == v["owner"]),
            strings=("key", "owner"),
        )
    raise ValueError(f"no request template named {name!r}")

