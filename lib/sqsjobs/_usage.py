"""What a batch makes AWS bill, counted from the requests the runtime sends: DynamoDB units, SQS requests.

The worker turns these counts into EMF metrics per job (``worker/_batch_metrics.py``), and the operator's
cost view prices them (``ops/_cost.py``). The rules are AWS's documented billing, stated once here:

- **DynamoDB** (on-demand): a write of an item costs one write unit per started KB of the item (at least
  one), whether its condition held or not (a refused conditional write is billed); each item of a
  transaction costs twice. A strongly consistent read costs one read unit per started 4 KB, an eventually
  consistent one half that. The item's size is not in the request: the bytes of the values sent (the key,
  a statement's parameters, an update's values) stand for it. That is exact for items under 1 KB (every
  item sqsjobs writes, unless a job stores a result near that size) and a lower bound above.
- **SQS**: every API action is a request, billed per 64 KiB chunk of its payload (message bodies and
  attributes), at least one: a ``SendMessageBatch`` of ten 1 KB messages is one request, a 256 KB
  message four.
- **EventBridge Scheduler** bills a schedule when it fires, not its API calls: the worker counts those
  (``JobScheduled``), not requests.

:class:`UsageMeter` listens to the runtime's DynamoDB and SQS clients through botocore's public event
system (``provide-client-params``: the API parameters before they are serialized, so nothing is parsed)
while a batch is open, counts each call AWS answered, and attributes it to a job when it names one of the
batch's keys (a record's statements), bodies (a dead letter, a re-send) or receipt handles (a retry
delay); the rest (limiter and group items, follow-up messages) is the batch's, shared by its deliveries.

Example (a claim, and a completion carrying a 3,000-byte result; two 40,000-byte messages sent together):
    >>> [(names[-1], write) for names, write, _ in dynamodb_units("BatchExecuteStatement", {"Statements": [
    ...     {"Statement": "INSERT INTO t VALUE {'pk': ?, 'job': ?}", "Parameters": [{"S": "a:1"}, {"S": "a"}]},
    ...     {"Statement": "UPDATE t SET r=? WHERE pk=?", "Parameters": [{"S": "x" * 3000}, {"S": "a:2"}]}]})]
    [('a', 1.0), ('a:2', 3.0)]
    >>> [billed for _, billed in sqs_requests("SendMessageBatch", {"Entries": [
    ...     {"MessageBody": "b" * 40_000}, {"MessageBody": "c" * 40_000}]})]
    [1.0, 1.0]
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

#: DynamoDB bills a write per started KB of the item, a read per started 4 KB
WRITE_UNIT_BYTES: Final = 1024
READ_UNIT_BYTES: Final = 4096
#: SQS bills a request per started 64 KiB of its payload
SQS_CHUNK_BYTES: Final = 64 * 1024
#: messages in one ReceiveMessage or DeleteMessageBatch (Lambda's poller sends them ten at a time)
SQS_BATCH: Final = 10

C = TypeVar("C")
#: where a call's units wait in botocore's request context until its answer comes back
_PENDING: Final = "sqsjobs_usage"
#: one request's share of billing: (what it names: a key, a body or a receipt handle; write units, read units)
Units = tuple[tuple[str, ...], float, float]


def sqs_billed(payload_bytes: int) -> int:
    """Requests billed for one SQS API action carrying ``payload_bytes``.

    Example:
        >>> sqs_billed(0), sqs_billed(65_536), sqs_billed(262_144), sqs_billed(262_145)
        (1, 1, 4, 5)
    """
    return max(1, math.ceil(payload_bytes / SQS_CHUNK_BYTES))


def message_bytes(body: str, attributes: Mapping[str, Any] | None = None) -> int:
    """The billed size of one message: its body, and each attribute's name, type and value.

    ``attributes`` as an API call sends them (``StringValue``, ``DataType``) or as Lambda's event carries
    them (``stringValue``, ``dataType``).

    Example:
        >>> message_bytes("{}", {"sqsjobs.job": {"DataType": "String", "StringValue": "invoice-email"}})
        32
    """
    size = _text_bytes(body)
    for name, attribute in (attributes or {}).items():
        size += _text_bytes(name)
        if isinstance(attribute, Mapping):
            for part in ("DataType", "StringValue", "dataType", "stringValue"):
                value = attribute.get(part)
                if isinstance(value, str):
                    size += _text_bytes(value)
            for part in ("BinaryValue", "binaryValue"):
                value = attribute.get(part)
                if isinstance(value, (bytes, str)):
                    size += len(value)
    return size


def value_bytes(value: Any) -> int:
    """The bytes of one DynamoDB attribute value as sent (``{"S": ...}``, ``{"N": ...}``, maps, lists, sets).

    Example:
        >>> value_bytes({"S": "héllo"}), value_bytes({"M": {"n": {"N": "12"}, "l": {"L": [{"BOOL": True}]}}})
        (6, 12)
    """
    if not isinstance(value, Mapping):
        return 0
    size = 0
    for kind, inner in value.items():
        if kind == "S" and isinstance(inner, str):
            size += _text_bytes(inner)
        elif kind == "N" and isinstance(inner, str):
            size += len(inner) // 2 + 1
        elif kind == "B" and isinstance(inner, (bytes, str)):
            size += len(inner)
        elif kind == "M" and isinstance(inner, Mapping):
            size += 3 + sum(_text_bytes(k) + value_bytes(v) for k, v in inner.items())
        elif kind == "L" and isinstance(inner, list):
            size += 3 + sum(1 + value_bytes(v) for v in inner)
        elif kind in ("SS", "BS") and isinstance(inner, list):
            size += sum(len(v) for v in inner)
        elif kind == "NS" and isinstance(inner, list):
            size += sum(len(v) // 2 + 1 for v in inner)
        else:
            size += 1  # BOOL, NULL
    return size


def dynamodb_units(operation: str, params: Mapping[str, Any]) -> list[Units]:
    """The billed units of one DynamoDB API call: one ``(strings it names, write units, read units)`` per item.

    The strings are the item's string values (a statement's parameters, a key's values): the meter finds
    which of the batch's keys the item is. Operations that bill nothing per item (``DescribeTable``) give
    ``[]``; a ``Query`` or ``Scan`` counts one read (a lower bound: its cost is what it reads).
    """
    if operation == "BatchExecuteStatement":
        return [_statement(s, 1) for s in params.get("Statements") or ()]
    if operation == "ExecuteStatement":
        return [_statement(params, 1)]
    if operation == "ExecuteTransaction":
        return [_statement(s, 2) for s in params.get("TransactStatements") or ()]
    if operation == "PutItem":
        return [_write(params.get("Item"), params.get("Item"), 1)]
    if operation == "UpdateItem":
        return [_write(params.get("Key"), {**(params.get("Key") or {}),
                                           **(params.get("ExpressionAttributeValues") or {})}, 1)]
    if operation == "DeleteItem":
        return [_write(params.get("Key"), params.get("Key"), 1)]
    if operation == "TransactWriteItems":
        items = []
        for entry in params.get("TransactItems") or ():
            for inner in entry.values():
                whole = {**(inner.get("Key") or inner.get("Item") or {}),
                         **(inner.get("ExpressionAttributeValues") or {})}
                items.append(_write(inner.get("Key") or inner.get("Item"), whole, 2))
        return items
    if operation == "BatchWriteItem":
        return [_write((r.get("PutRequest") or {}).get("Item") or (r.get("DeleteRequest") or {}).get("Key"),
                       (r.get("PutRequest") or {}).get("Item") or (r.get("DeleteRequest") or {}).get("Key"), 1)
                for requests in (params.get("RequestItems") or {}).values() for r in requests]
    if operation == "GetItem":
        return [(_strings(params.get("Key")), 0.0, _read(params.get("ConsistentRead")))]
    if operation == "BatchGetItem":
        return [(_strings(key), 0.0, _read(wanted.get("ConsistentRead")))
                for wanted in (params.get("RequestItems") or {}).values() for key in wanted.get("Keys") or ()]
    if operation in ("Query", "Scan"):
        return [((), 0.0, _read(params.get("ConsistentRead")))]
    return []


def sqs_requests(operation: str, params: Mapping[str, Any]) -> list[tuple[str | None, float]]:
    """The billed requests of one SQS API call, shared by its entries: ``(body or receipt handle, requests)``.

    A send is billed per 64 KiB chunk of all its messages, shared by their size; a batch of receipt
    handles (visibility, delete) is one request, shared equally; any other action is one request.
    """
    if operation == "SendMessage":
        body = params.get("MessageBody")
        size = message_bytes(body if isinstance(body, str) else "", params.get("MessageAttributes"))
        return [(body if isinstance(body, str) else None, float(sqs_billed(size)))]
    if operation == "SendMessageBatch":
        entries = list(params.get("Entries") or ())
        sizes = [message_bytes(e.get("MessageBody") or "", e.get("MessageAttributes")) for e in entries]
        billed = sqs_billed(sum(sizes))
        total = sum(sizes) or 1
        return [(e.get("MessageBody"), billed * (size / total if sum(sizes) else 1 / len(entries)))
                for e, size in zip(entries, sizes, strict=True)] or [(None, 1.0)]
    if operation in ("ChangeMessageVisibilityBatch", "DeleteMessageBatch"):
        entries = list(params.get("Entries") or ())
        return [(e.get("ReceiptHandle"), 1 / len(entries)) for e in entries] or [(None, 1.0)]
    if operation in ("ChangeMessageVisibility", "DeleteMessage"):
        handle = params.get("ReceiptHandle")
        return [(handle if isinstance(handle, str) else None, 1.0)]
    return [(None, 1.0)]


def poller_requests(payloads: Sequence[int], acknowledged: Sequence[bool]) -> list[float]:
    """Each delivery's share of the requests Lambda's poller made for its batch: the receives, the delete.

    The poller receives ten messages a ``ReceiveMessage`` (billed per 64 KiB chunk of what it returned)
    and deletes the acknowledged ones ten a ``DeleteMessageBatch``; a failure reported back is not
    deleted. ``payloads`` are the messages' billed sizes (:func:`message_bytes`).

    Example:
        >>> poller_requests([100] * 10, [True] * 10)  # one receive and one delete, shared by ten
        [0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2]
        >>> poller_requests([40_000, 40_000], [True, False])  # 80,000 bytes: two chunks; one deleted
        [2.0, 1.0]
    """
    shares = [0.0] * len(payloads)
    for start in range(0, len(payloads), SQS_BATCH):
        group = range(start, min(start + SQS_BATCH, len(payloads)))
        total = sum(payloads[i] for i in group)
        billed = sqs_billed(total)
        for i in group:
            shares[i] += billed * payloads[i] / total if total else billed / len(group)
    acked = [i for i, ok in enumerate(acknowledged) if ok]
    for start in range(0, len(acked), SQS_BATCH):
        deleted = acked[start:start + SQS_BATCH]
        for i in deleted:
            shares[i] += 1 / len(deleted)
    return shares


@dataclass
class Metered:
    """What one batch sent: write units, read units and SQS requests per job, and the batch's own share."""

    #: job → [write units, read units, SQS requests]
    by_job: dict[str, list[float]] = field(default_factory=dict)
    #: [write units, read units, SQS requests] no delivery's key, body or receipt handle named
    shared: list[float] = field(default_factory=lambda: [0.0, 0.0, 0.0])

    def add(self, job: str | None, write: float = 0.0, read: float = 0.0, sqs: float = 0.0) -> None:
        """Count units for ``job`` (None: the batch's)."""
        into = self.shared if job is None else self.by_job.setdefault(job, [0.0, 0.0, 0.0])
        into[0] += write
        into[1] += read
        into[2] += sqs


class UsageMeter:
    """Counts what the runtime's clients send while a batch is open, per job of the batch.

    Example (botocore's Stubber answers; the meter counts what was asked):
        >>> from botocore.stub import Stubber
        >>> from sqsjobs._clients import dynamodb_client
        >>> client = dynamodb_client(region_name="eu-west-1")
        >>> meter = UsageMeter()
        >>> meter.attach(client)
        >>> meter.open({"invoice-email:42": "invoice-email"})
        >>> with Stubber(client) as stub:
        ...     stub.add_response("get_item", {})
        ...     _ = client.get_item(TableName="t", Key={"pk": {"S": "invoice-email:42"}}, ConsistentRead=True)
        >>> meter.close().by_job
        {'invoice-email': [0.0, 1.0, 0.0]}
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._metered: Metered | None = None
        self._jobs: dict[str, str] = {}
        self._attached: set[int] = set()

    def attach(self, client: Any) -> None:
        """Listen to ``client``'s DynamoDB or SQS calls (other services, and clients without events, are left alone).

        A call is counted from its parameters once its answer came back: a call AWS refused whole (a
        throttle that botocore gave up on, a request the service rejected) bills nothing.
        """
        meta = getattr(client, "meta", None)
        events = getattr(meta, "events", None)
        if events is None or id(client) in self._attached:
            return
        service = client.meta.service_model.service_name
        if service not in ("dynamodb", "sqs"):
            return
        self._attached.add(id(client))
        count = self._dynamodb if service == "dynamodb" else self._sqs
        tag = f"sqsjobs-usage-{id(self)}-{service}"
        events.register(f"provide-client-params.{service}", count, unique_id=tag)
        events.register(f"after-call.{service}", self._answered, unique_id=f"{tag}-after")

    def attaching(self, factory: Callable[[], C]) -> Callable[[], C]:
        """``factory`` (a lazily built client), attaching the client it returns the first time."""
        def built() -> C:
            client = factory()
            if id(client) not in self._attached:
                self.attach(client)
            return client

        return built

    def open(self, jobs: Mapping[str, str]) -> None:
        """Start counting a batch: ``jobs`` maps its deliveries' keys, bodies and receipt handles to their job."""
        with self._lock:
            self._jobs = dict(jobs)
            self._metered = Metered()

    def close(self) -> Metered:
        """Stop counting; what the batch sent."""
        with self._lock:
            metered, self._metered, self._jobs = self._metered or Metered(), None, {}
        return metered

    def _job(self, names: Iterable[str | None]) -> str | None:
        jobs = self._jobs
        return next((jobs[n] for n in names if n is not None and n in jobs), None)

    def _dynamodb(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if self._metered is not None:
            context[_PENDING] = [(self._job(names), write, read, 0.0)
                                 for names, write, read in dynamodb_units(model.name, params)]

    def _sqs(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if self._metered is not None:
            context[_PENDING] = [(self._job((name,)), 0.0, 0.0, billed)
                                 for name, billed in sqs_requests(model.name, params)]

    def _answered(self, http_response: Any, context: dict[str, Any], **_: Any) -> None:
        pending = context.pop(_PENDING, None)
        if pending is None or getattr(http_response, "status_code", 200) >= 300:
            return
        with self._lock:
            if self._metered is not None:
                for job, write, read, sqs in pending:
                    self._metered.add(job, write=write, read=read, sqs=sqs)


# ---------------------------------------------------------------- helpers
def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _statement(statement: Mapping[str, Any], times: int) -> Units:
    parameters = statement.get("Parameters") or ()
    names = tuple(p["S"] for p in parameters if isinstance(p, Mapping) and isinstance(p.get("S"), str))
    if str(statement.get("Statement", ""))[:6].upper() == "SELECT":
        return names, 0.0, _read(statement.get("ConsistentRead"))
    size = sum(value_bytes(p) for p in parameters)
    return names, float(times * max(1, math.ceil(size / WRITE_UNIT_BYTES))), 0.0


def _write(key: Any, values: Any, times: int) -> Units:
    size = sum(value_bytes(v) for v in (values or {}).values()) if isinstance(values, Mapping) else 0
    return _strings(key), float(times * max(1, math.ceil(size / WRITE_UNIT_BYTES))), 0.0


def _strings(key: Any) -> tuple[str, ...]:
    if not isinstance(key, Mapping):
        return ()
    return tuple(v["S"] for v in key.values() if isinstance(v, Mapping) and isinstance(v.get("S"), str))


def _read(consistent: Any) -> float:
    return 1.0 if consistent else 0.5
