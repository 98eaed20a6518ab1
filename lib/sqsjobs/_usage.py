"""What a batch makes AWS bill, counted from the requests the runtime sends: DynamoDB units, SQS requests.

The worker turns these counts into EMF metrics per job (``worker/_batch_metrics.py``), and the operator's
cost view prices them (``ops/_cost.py``). The rules are AWS's documented billing, stated once here:

- **DynamoDB** (on-demand): a write of an item costs one write unit per started KB of the item (at least
  one), whether its condition held or not (a refused conditional write is billed, alone in its request
  as an HTTP 400 ``ConditionalCheckFailedException`` or as one statement's error in a batch); each item of a
  transaction costs twice. A strongly consistent read costs one read unit per started 4 KB, an eventually
  consistent one half that. The item's size is not in the request: the size of the values sent (the key,
  a statement's parameters, an update's values; a string's characters) stands for it. That is exact for
  items under 1 KB (every item sqsjobs writes, unless a job stores a result near that size) and a lower
  bound above; reads count one unit an item (a lower bound for items over 4 KB).
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

Example (a claim of job ``a``, a completion of job ``b`` carrying a 3,000-byte result; two 40,000-byte
messages sent together):
    >>> named = {"a:1": "a", "b:2": "b"}
    >>> dynamodb_units("BatchExecuteStatement", {"Statements": [
    ...     {"Statement": "INSERT INTO t VALUE {'pk': ?, 'job': ?}", "Parameters": [{"S": "a:1"}, {"S": "a"}]},
    ...     {"Statement": "UPDATE t SET r=? WHERE pk=?", "Parameters": [{"S": "x" * 3000}, {"S": "b:2"}]}]}, named)
    [('a', 1.0, 0.0), ('b', 3.0, 0.0)]
    >>> sqs_requests("SendMessageBatch", {"Entries": [{"MessageBody": "b" * 40_000}, {"MessageBody": "c" * 40_000}]})
    [(None, 1.0), (None, 1.0)]
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
#: one item's billed units: (the job it is for, None when it names none of the batch's; write units, read units)
Units = tuple[str | None, float, float]
#: nothing named: every unit is the batch's
_NOTHING: Final[Mapping[str, str]] = {}


def sqs_billed(payload_bytes: int) -> int:
    """Requests billed for one SQS API action carrying ``payload_bytes``.

    Example:
        >>> sqs_billed(0), sqs_billed(65_536), sqs_billed(262_144), sqs_billed(262_145)
        (1, 1, 4, 5)
    """
    return max(1, math.ceil(payload_bytes / SQS_CHUNK_BYTES))


def message_bytes(body: str, attributes: Mapping[str, Any] | None = None) -> int:
    """The billed size of one message: its body, and each attribute's name, type and value (characters).

    ``attributes`` as an API call sends them (``StringValue``, ``DataType``) or as Lambda's event carries
    them (``stringValue``, ``dataType``).

    Example:
        >>> message_bytes("{}", {"sqsjobs.job": {"DataType": "String", "StringValue": "invoice-email"}})
        32
    """
    size = len(body)
    for name, attribute in (attributes or {}).items():
        size += len(name)
        if not isinstance(attribute, Mapping):
            continue
        for text in (attribute.get("stringValue") or attribute.get("StringValue"),
                     attribute.get("dataType") or attribute.get("DataType"),
                     attribute.get("binaryValue") or attribute.get("BinaryValue")):
            if isinstance(text, (str, bytes)):
                size += len(text)
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


def dynamodb_units(operation: str, params: Mapping[str, Any], named: Mapping[str, str] = _NOTHING) -> list[Units]:
    """The billed units of one DynamoDB API call: one ``(job, write units, read units)`` per item.

    ``named`` maps the batch's keys to their jobs: an item is its job's when one of its string values (a
    statement's parameters, a key's values) is one of them. Operations that bill nothing per item
    (``DescribeTable``) give ``[]``; a ``Query`` or ``Scan`` counts one read (a lower bound: it costs what
    it reads).
    """
    if operation == "BatchExecuteStatement":
        return [_statement(s, 1, named) for s in params.get("Statements") or ()]
    if operation == "ExecuteStatement":
        return [_statement(params, 1, named)]
    if operation == "ExecuteTransaction":
        return [_statement(s, 2, named) for s in params.get("TransactStatements") or ()]
    if operation in ("PutItem", "UpdateItem", "DeleteItem"):
        key = params.get("Item") if operation == "PutItem" else params.get("Key")
        values = params.get("ExpressionAttributeValues") if operation == "UpdateItem" else None
        return [_write(key, values, 1, named)]
    if operation == "TransactWriteItems":
        return [_write(inner.get("Key") or inner.get("Item"), inner.get("ExpressionAttributeValues"), 2, named)
                for entry in params.get("TransactItems") or () for inner in entry.values()]
    if operation == "BatchWriteItem":
        return [_write((r.get("PutRequest") or {}).get("Item") or (r.get("DeleteRequest") or {}).get("Key"), None, 1,
                       named)
                for requests in (params.get("RequestItems") or {}).values() for r in requests]
    if operation == "GetItem":
        return [(_named_by(params.get("Key"), named), 0.0, _read(params.get("ConsistentRead")))]
    if operation == "BatchGetItem":
        return [(_named_by(key, named), 0.0, _read(wanted.get("ConsistentRead")))
                for wanted in (params.get("RequestItems") or {}).values() for key in wanted.get("Keys") or ()]
    if operation in ("Query", "Scan"):
        return [(None, 0.0, _read(params.get("ConsistentRead")))]
    return []


def sqs_requests(operation: str, params: Mapping[str, Any],
                 named: Mapping[str, str] = _NOTHING) -> list[tuple[str | None, float]]:
    """The billed requests of one SQS API call, shared by its entries: ``(job, requests)``.

    An entry is its job's when its body or receipt handle is in ``named`` (a dead letter, a re-send, a
    retry delay). A send is billed per 64 KiB chunk of all its messages, shared by their size; a batch of
    receipt handles (visibility, delete) is one request, shared equally; any other action is one request.
    """
    if operation == "SendMessage":
        body = params.get("MessageBody")
        text = body if isinstance(body, str) else ""
        return [(named.get(text), float(sqs_billed(message_bytes(text, params.get("MessageAttributes")))))]
    if operation == "SendMessageBatch":
        entries = list(params.get("Entries") or ())
        sizes = [message_bytes(e.get("MessageBody") or "", e.get("MessageAttributes")) for e in entries]
        billed, total = sqs_billed(sum(sizes)), sum(sizes)
        return [(named.get(e.get("MessageBody") or ""), billed * (size / total if total else 1 / len(entries)))
                for e, size in zip(entries, sizes, strict=True)] or [(None, 1.0)]
    if operation in ("ChangeMessageVisibilityBatch", "DeleteMessageBatch"):
        entries = list(params.get("Entries") or ())
        return [(named.get(e.get("ReceiptHandle") or ""), 1 / len(entries)) for e in entries] or [(None, 1.0)]
    if operation in ("ChangeMessageVisibility", "DeleteMessage"):
        handle = params.get("ReceiptHandle")
        return [(named.get(handle) if isinstance(handle, str) else None, 1.0)]
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
        #: the batch's only job, when all its deliveries are of one: every request is its, nothing to look up
        self._only: str | None = None
        self._attached: set[int] = set()

    def attach(self, client: Any) -> None:
        """Listen to ``client``'s DynamoDB or SQS calls (other services, and clients without events, are left alone).

        A call is counted from its parameters once its answer came back: a call AWS refused whole (a
        throttle that botocore gave up on, a request the service rejected) bills nothing, except a
        conditional write whose condition failed (:func:`billed_refusal`).
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
            names = set(self._jobs.values())
            self._only = names.pop() if len(names) == 1 else None
            self._metered = Metered()

    def close(self) -> Metered:
        """Stop counting; what the batch sent."""
        with self._lock:
            metered, self._metered, self._jobs = self._metered or Metered(), None, {}
        return metered

    def _dynamodb(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if self._metered is not None:
            only = self._only
            units = dynamodb_units(model.name, params, self._jobs if only is None else _NOTHING)
            context[_PENDING] = _by_job(((only or job, write, read, 0.0) for job, write, read in units))

    def _sqs(self, params: Mapping[str, Any], model: Any, context: dict[str, Any], **_: Any) -> None:
        if self._metered is not None:
            only = self._only
            requests = sqs_requests(model.name, params, self._jobs)
            context[_PENDING] = _by_job(((only or job, 0.0, 0.0, billed) for job, billed in requests))

    def _answered(self, http_response: Any, parsed: Any, context: dict[str, Any], **_: Any) -> None:
        pending = context.pop(_PENDING, None)
        if pending is None or (getattr(http_response, "status_code", 200) >= 300 and not billed_refusal(parsed)):
            return
        with self._lock:
            if self._metered is not None:
                for job, (write, read, sqs) in pending.items():
                    self._metered.add(job, write=write, read=read, sqs=sqs)


#: the error of a single-item write refused by its condition: DynamoDB bills it as the write (an HTTP 400)
CONDITION_FAILED: Final = "ConditionalCheckFailedException"


def billed_refusal(parsed: Any) -> bool:
    """Whether a refused call's answer is one AWS bills all the same: a conditional ``PutItem``, ``UpdateItem``,
    ``DeleteItem`` or ``ExecuteStatement`` whose condition failed costs the write units it would have.

    Example:
        >>> billed_refusal({"Error": {"Code": "ConditionalCheckFailedException"}}), billed_refusal({})
        (True, False)
    """
    error = parsed.get("Error") if isinstance(parsed, Mapping) else None
    return isinstance(error, Mapping) and error.get("Code") == CONDITION_FAILED


def _by_job(counted: Iterable[tuple[str | None, float, float, float]]) -> dict[str | None, list[float]]:
    """One call's units summed per job: [write units, read units, SQS requests]."""
    totals: dict[str | None, list[float]] = {}
    for job, write, read, sqs in counted:
        into = totals.get(job)
        if into is None:
            totals[job] = [write, read, sqs]
        else:
            into[0] += write
            into[1] += read
            into[2] += sqs
    return totals


# ---------------------------------------------------------------- helpers
def _text_bytes(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def _statement(statement: Mapping[str, Any], times: int, named: Mapping[str, str]) -> Units:
    # The hot path (two statements a message): one pass, strings and numbers inline, characters for bytes.
    job = None
    size = 0
    for parameter in statement.get("Parameters") or ():
        text = parameter.get("S")
        if text is None:
            number = parameter.get("N")
            size += len(number) // 2 + 1 if number is not None else value_bytes(parameter)
            continue
        size += len(text)
        if job is None and named:
            job = named.get(text)
    if str(statement.get("Statement", ""))[:6].upper() == "SELECT":
        return job, 0.0, _read(statement.get("ConsistentRead"))
    return job, float(times * (1 if size <= WRITE_UNIT_BYTES else -(-size // WRITE_UNIT_BYTES))), 0.0


def _write(key: Any, values: Any, times: int, named: Mapping[str, str]) -> Units:
    """An item write: its key's (or whole item's) values and an update's values make its size; the item is the
    job's its key names, else the job's one of its values names (a dead letter's evidence: its message id)."""
    size = sum(value_bytes(v) for v in key.values()) if isinstance(key, Mapping) else 0
    if isinstance(values, Mapping):
        size += sum(value_bytes(v) for v in values.values())
    job = _named_by(key, named) or (_named_by(values, named) if named else None)
    return job, float(times * max(1, math.ceil(size / WRITE_UNIT_BYTES))), 0.0


def _named_by(key: Any, named: Mapping[str, str]) -> str | None:
    if not isinstance(key, Mapping):
        return None
    for value in key.values():
        text = value.get("S") if isinstance(value, Mapping) else None
        if isinstance(text, str) and text in named:
            return named[text]
    return None


def _read(consistent: Any) -> float:
    return 1.0 if consistent else 0.5
