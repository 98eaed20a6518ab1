"""Job lookup by key: the one place the console reads a job's state.

Today that is the idempotency record as the table holds it (``pk`` = the
job key): its state (``outcome`` when the record has one, else the guard's
``status``), attempts, last error, result and times, plus any other field,
shown as stored. When ``app.status(key)`` lands (the job lifecycle work),
:func:`job_status` becomes a call to it and the page stays as it is.

Example:
    >>> item = {"pk": {"S": "invoice-email:42"}, "status": {"S": "COMPLETED"}, "job": {"S": "invoice-email"},
    ...         "expires_at": {"N": "1767225600"}, "owner": {"S": "9f2c"}}
    >>> view = job_status_from_item(item)
    >>> (view.key, view.job, view.state, [label for label, _ in view.times], view.other)
    ('invoice-email:42', 'invoice-email', 'COMPLETED', ['expires'], (('owner', '9f2c'),))
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from typing import TYPE_CHECKING, Any, Final

from sqsjobs.records import KEY_ATTRIBUTE

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

#: DynamoDB's limit on a partition key value
MAX_KEY_BYTES: Final = 2048
#: record fields that are times (epoch seconds), in the order the page lists them
_TIMES: Final = (("enqueued_at", "enqueued"), ("started_at", "started"), ("acquired_at", "acquired"),
                 ("updated_at", "updated"), ("finished_at", "finished"), ("lease_until", "lease until"),
                 ("expires_at", "expires"))
_SHOWN: Final = {KEY_ATTRIBUTE, "job", "status", "outcome", "attempts", "last_error", "result",
                 *(name for name, _ in _TIMES)}


@dataclass(frozen=True, kw_only=True)
class JobStatusView:
    """What the lookup page shows for one key."""

    key: str
    job: str | None
    state: str
    attempts: int | None
    last_error: str | None
    result: str | None
    times: tuple[tuple[str, float], ...]
    other: tuple[tuple[str, str], ...]


def job_status(dynamodb: DynamoDBClient, table: str, key: str) -> JobStatusView | None:
    """The state of the job with idempotency key ``key``, or None when the table has no record of it."""
    item = dynamodb.get_item(TableName=table, Key={KEY_ATTRIBUTE: {"S": key}}, ConsistentRead=True).get("Item")
    return None if item is None else job_status_from_item(dict(item))


def job_status_from_item(item: dict[str, Any]) -> JobStatusView:
    """Read a raw DynamoDB item (attribute-value form) into the page's view."""
    from boto3.dynamodb.types import TypeDeserializer

    deserializer = TypeDeserializer()
    record = {name: deserializer.deserialize(value) for name, value in item.items()}
    attempts = record.get("attempts")
    return JobStatusView(
        key=str(record.get(KEY_ATTRIBUTE, "")),
        job=_text(record.get("job")),
        state=_text(record.get("outcome")) or _text(record.get("status")) or "unknown",
        attempts=int(attempts) if isinstance(attempts, Decimal | int) else None,
        last_error=_text(record.get("last_error")),
        result=_pretty(record.get("result")),
        times=tuple((label, float(record[name])) for name, label in _TIMES
                    if isinstance(record.get(name), Decimal | int | float)),
        other=tuple((name, _text(value) or "") for name, value in sorted(record.items()) if name not in _SHOWN),
    )


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, bytes | bytearray):
        return f"<{len(value)} bytes>"
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str, sort_keys=True)


def _pretty(value: Any) -> str | None:
    """A stored result (JSON text) indented for reading; anything else as text."""
    text = _text(value)
    if text is None:
        return None
    try:
        return json.dumps(json.loads(text), indent=2, sort_keys=True)
    except ValueError:
        return text
