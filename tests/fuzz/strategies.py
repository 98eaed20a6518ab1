"""Hypothesis strategies for hostile SQS records, and the stand-in SQS that judges what the worker sends.

Each generated record carries what the test may expect of it:

- ``valid``: a message the producer built; it must succeed;
- ``bad``: it can never be a job (broken JSON, wrong types, unknown job...);
  it must be dead-lettered with a reason, or reported failed when the DLQ
  refuses it (or, for a newer ``job_version``, retried until a deploy knows it);
- ``any``: a mutated envelope that may or may not still be a valid job; it
  may succeed, but is never acknowledged without having run or been
  dead-lettered.

Nothing here talks to the network.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

from hypothesis import strategies as st

#: the jobs the fuzzed worker knows (see test_fuzz.py)
OK_JOB = "fuzz-ok"
V2_JOB = "fuzz-v2"
POISON_JOB = "fuzz-poison"
ARN = "arn:aws:sqs:us-east-1:123456789012:fuzz-jobs"

#: SQS accepts only these characters in bodies and string attribute values
_SQS_INVALID = re.compile("[^\t\n\r\x20-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")
#: SQS's classic per-message limit (body + attribute names, types and values)
MAX_MESSAGE_BYTES = 256 * 1024
#: what the worker's reason attributes may add to a DLQ copy (the error message alone is up to 1,000 chars)
DLQ_ATTRIBUTE_ROOM = 8 * 1024
_ATTRIBUTE_NAME = re.compile(r"^(?!\.)(?!.*\.\.)(?!.*\.$)(?!aws\.)(?!amazon\.)[A-Za-z0-9_.-]{1,256}$", re.IGNORECASE)
_NUMBER = re.compile(r"^-?\d+(\.\d+)?$")


@dataclass(frozen=True)
class Case:
    """One record of a fuzzed batch and what it may become."""

    record: dict[str, Any]
    kind: str  # "valid" | "bad" | "any"
    note: str
    #: SQS could have delivered this record, and its DLQ copy (body + reasons) fits: it must reach the DLQ
    deliverable: bool = False


# ---------------------------------------------------------------- values
#: every code point, lone surrogates included (hypothesis leaves them out by default)
any_char = st.characters(exclude_categories=())
any_text = st.text(any_char, max_size=40)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | any_text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(any_text, inner, max_size=4),
    max_leaves=12,
)


def _json_int(value: Any) -> int | None:
    """What the envelope reads as an integer: JSON ``1`` and ``1.0`` alike, never ``true``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return None


def _dumps(value: Any) -> str:
    # allow_nan: NaN/Infinity are what a sloppy producer in another language may send.
    return json.dumps(value, allow_nan=True)


# ---------------------------------------------------------------- bodies
def _nested(depth: int, kind: str) -> str:
    return ("[" if kind == "list" else '{"a":') * depth + "1" + ("]" if kind == "list" else "}") * depth


@st.composite
def bad_bodies(draw: st.DrawFn) -> tuple[str | None, str]:
    """A body that can never be a job, and a word on why."""
    choice = draw(st.sampled_from([
        "text", "non-object", "no-body", "version", "job-type", "unknown-job", "args-type", "arg-types",
        "missing-arg", "extra-arg", "key-type", "huge-key", "job-version", "enqueued-at", "deep", "huge",
        "surrogate-escape", "raw-surrogate", "invalid-utf8-escape", "poison", "upcaster-fails", "nan-arg",
    ]))
    base: dict[str, Any] = {"v": 1, "job": OK_JOB, "job_version": 1, "key": f"bad:{draw(st.integers())}",
                            "args": {"n": draw(st.integers(-1000, 1000))}}
    if choice == "text":
        # Almost never valid JSON; an accidental valid envelope still has no "v": 1.
        return draw(any_text.filter(lambda s: '"v"' not in s)), choice
    if choice == "non-object":
        return _dumps(draw(json_values.filter(lambda v: not isinstance(v, dict)))), choice
    if choice == "no-body":
        return None, choice
    if choice == "version":
        base["v"] = draw(json_values.filter(lambda v: _json_int(v) != 1))
        if draw(st.booleans()):
            del base["v"]
    elif choice == "job-type":
        base["job"] = draw(json_values.filter(lambda v: not isinstance(v, str) or not v))
    elif choice == "unknown-job":
        base["job"] = draw(any_text.filter(lambda s: s not in (OK_JOB, V2_JOB, POISON_JOB)))
    elif choice == "args-type":
        base["args"] = draw(json_values.filter(lambda v: not isinstance(v, dict)))
    elif choice == "arg-types":
        base["args"] = {"n": draw(json_values.filter(lambda v: type(v) is not int))}
    elif choice == "missing-arg":
        base["args"] = {}
    elif choice == "extra-arg":
        base["args"] = {**base["args"], draw(any_text.filter(lambda s: s not in ("n", "label"))): 1}
    elif choice == "key-type":
        base["key"] = draw(json_values.filter(lambda v: v is not None and (not isinstance(v, str) or not v)))
    elif choice == "huge-key":
        base["key"] = "k" * draw(st.integers(2049, 5000))
    elif choice == "job-version":
        base["job_version"] = draw(json_values.filter(lambda v: (_json_int(v) or 0) < 1))
    elif choice == "enqueued-at":
        base["enqueued_at"] = draw(json_values.filter(lambda v: v is not None and (
            isinstance(v, bool) or not isinstance(v, int | float))))
    elif choice == "deep":
        depth = draw(st.sampled_from([100, 990, 1100, 5000, 50_000]))
        text = json.dumps(base).replace('"args": {"n": ', '"args": {"label": ' + _nested(depth, "list") + ', "n": ')
        if draw(st.booleans()):
            text = _nested(depth, draw(st.sampled_from(["list", "dict"])))
        return text, choice
    elif choice == "huge":
        size = draw(st.sampled_from([MAX_MESSAGE_BYTES - 100, MAX_MESSAGE_BYTES + 1, 400_000]))
        base["args"] = {"n": 1, "label": "x" * size, "nested": {"deeper": ["y" * 10]}}
    elif choice == "surrogate-escape":
        # Valid JSON text whose strings decode to lone surrogates: SQS delivers these bytes.
        field = draw(st.sampled_from(["job", "label", "extra"]))
        lone = draw(st.sampled_from(["\\ud800", "\\udfff", "\\udc80x", "a\\ud834"]))
        text = json.dumps(base)
        if field == "job":
            return text.replace(f'"job": "{OK_JOB}"', f'"job": "{OK_JOB}{lone}"'), choice
        if field == "label":
            return text.replace('"args": {"n": ', f'"args": {{"label": "{lone}", "n": "not-an-int", "extra": '), choice
        return text.replace('"args": {', f'"args": {{"{lone}": 1, '), choice
    elif choice == "raw-surrogate":
        # Not deliverable by SQS, but a str the worker may be handed in tests or by another poller.
        return json.dumps(base).replace(OK_JOB, OK_JOB + "\udc80"), choice
    elif choice == "invalid-utf8-escape":
        # Bytes that are not UTF-8, as a producer that double-encodes would send them (latin-1 read back).
        return (b'{"v": 1, "job": "' + bytes([0xC3, 0x28, 0xFF]) + b'"}').decode("latin-1"), choice
    elif choice == "poison":
        base["job"] = POISON_JOB
    elif choice == "upcaster-fails":
        base["job"], base["job_version"] = V2_JOB, 1
        base["args"] = draw(st.dictionaries(st.sampled_from(["n", "text", "other"]), json_values, max_size=3)
                            .filter(lambda a: not isinstance(a.get("text"), str) or type(a.get("n")) is not int))
    elif choice == "nan-arg":
        base["args"] = {"n": 1, "label": draw(st.sampled_from([float("nan"), float("inf"), -float("inf")]))}
    return _dumps(base), choice


@st.composite
def mutated_bodies(draw: st.DrawFn) -> tuple[str, str]:
    """A valid envelope with one field replaced, dropped or added: it may or may not still be a job."""
    base: dict[str, Any] = {"v": 1, "job": draw(st.sampled_from([OK_JOB, V2_JOB, POISON_JOB])), "job_version": 1,
                            "key": f"mut:{draw(st.integers())}", "args": {"n": draw(st.integers(-1000, 1000))}}
    if base["job"] == V2_JOB:
        base["args"]["text"] = draw(any_text)
    field = draw(st.sampled_from(["v", "job", "job_version", "key", "args", "enqueued_at", "extra",
                                  "surrogate-key"]))
    action = draw(st.sampled_from(["replace", "drop"]))
    if field == "surrogate-key":
        # A well-formed envelope whose key decodes to a lone surrogate: valid JSON, not valid UTF-8.
        return _dumps(base).replace(f'"key": "{base["key"]}"', f'"key": "{base["key"]}\\udc80"'), field
    if action == "drop" and field in base:
        del base[field]
    else:
        base[field] = draw(json_values | st.integers(-2, 3))
    return _dumps(base), f"{action} {field}"


# ---------------------------------------------------------------- records
def _attributes(draw: st.DrawFn, hostile: bool) -> Any:
    if not hostile:
        return {"ApproximateReceiveCount": "1", "SentTimestamp": "1767225600000",
                "ApproximateFirstReceiveTimestamp": "1767225600000"}
    return draw(st.one_of(
        st.none(),
        json_values,
        st.fixed_dictionaries({}, optional={
            "ApproximateReceiveCount": json_values | st.integers(-5, 10).map(str) | st.sampled_from(["9" * 50, "1e3"]),
            "ApproximateFirstReceiveTimestamp": json_values | st.integers().map(str),
            "MessageGroupId": json_values,
        }),
    ))


def _message_attributes(draw: st.DrawFn, hostile: bool) -> Any:
    if not hostile:
        return {}
    value = st.fixed_dictionaries({}, optional={"dataType": st.sampled_from(["String", "Number", "Binary",
                                                                             "String.x"]) | json_values,
                                                "stringValue": any_text | json_values,
                                                "binaryValue": st.binary(max_size=8)})
    return draw(st.none() | json_values | st.dictionaries(
        st.sampled_from(["sqsjobs.job", "sqsjobs.trace_id", "sqsjobs.redrive_count", "sqsjobs.reason", "user.a",
                         "user.b", "bad name", "AWS.x"]) | any_text,
        value | json_values, max_size=12))


@st.composite
def hostile_record(draw: st.DrawFn, message_id: str) -> Case:
    """A record with a bad or mutated body and, often, broken Lambda fields around it."""
    kind = draw(st.sampled_from(["bad", "bad", "any"]))
    body, note = draw(bad_bodies()) if kind == "bad" else draw(mutated_bodies())
    hostile_fields = draw(st.booleans())
    record: dict[str, Any] = {"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body,
                              "attributes": _attributes(draw, hostile_fields),
                              "messageAttributes": _message_attributes(draw, hostile_fields),
                              "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": ARN,
                              "awsRegion": "us-east-1"}
    if hostile_fields:
        for name in draw(st.sets(st.sampled_from(["body", "attributes", "messageAttributes", "eventSourceARN"]))):
            del record[name]
        if draw(st.booleans()) and "eventSourceARN" in record:
            record["eventSourceARN"] = draw(json_values | st.just("arn:aws:sqs:us-east-1:123456789012:other"))
        if "body" in record and draw(st.integers(0, 9)) == 0:
            record["body"] = draw(json_values.filter(lambda v: not isinstance(v, str)))
        note += " +hostile fields"
    deliverable = (not hostile_fields and isinstance(body, str) and not _SQS_INVALID.search(body)
                   and len(body.encode()) <= MAX_MESSAGE_BYTES - DLQ_ATTRIBUTE_ROOM)
    return Case(record=record, kind=kind, note=note, deliverable=deliverable)


def valid_record(body: str, message_id: str) -> Case:
    """A record as Lambda delivers a producer-built message."""
    return Case(
        record={"messageId": message_id, "receiptHandle": f"rh-{message_id}", "body": body,
                "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "1767225600000",
                               "ApproximateFirstReceiveTimestamp": "1767225600000"},
                "messageAttributes": {"sqsjobs.job": {"dataType": "String", "stringValue": OK_JOB}},
                "md5OfBody": "", "eventSource": "aws:sqs", "eventSourceARN": ARN, "awsRegion": "us-east-1"},
        kind="valid", note="valid")


# ---------------------------------------------------------------- the SQS stand-in
class RecordingSQS:
    """Answers the worker's SQS calls like SQS would, refusing what SQS refuses, and records them.

    ``down`` makes every call fail as a whole (an outage), so the tests also
    see what the worker does when the DLQ cannot be reached.
    """

    def __init__(self) -> None:
        self.meta = SimpleNamespace(endpoint_url="https://sqs.us-east-1.amazonaws.com")
        self.down = False
        #: accepted entries that carry a reason: the DLQ's (the worker re-sends others to their own queue)
        self.dead_letters: list[dict[str, Any]] = []
        #: every accepted entry, dead letters and re-sent messages alike
        self.sent: list[dict[str, Any]] = []
        self.refused: list[dict[str, Any]] = []
        self.visibility: list[dict[str, Any]] = []

    def _outage(self, operation: str) -> None:
        if self.down:
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "ServiceUnavailable", "Message": "injected outage"}}, operation)

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self._outage("SendMessageBatch")
        assert 1 <= len(Entries) <= 10 and len({e["Id"] for e in Entries}) == len(Entries)
        ok, failed = [], []
        for entry in Entries:
            why = refusal(entry)
            if why:
                failed.append({"Id": entry["Id"], "SenderFault": True, "Code": "InvalidParameterValue",
                               "Message": why})
                self.refused.append(entry)
            else:
                ok.append({"Id": entry["Id"], "MessageId": f"sent-{len(self.sent)}"})
                self.sent.append(entry)
                if "sqsjobs.reason" in entry.get("MessageAttributes", {}):
                    self.dead_letters.append(entry)
        return {"Successful": ok, "Failed": failed}

    def change_message_visibility_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self._outage("ChangeMessageVisibilityBatch")
        for entry in Entries:
            assert 0 <= entry["VisibilityTimeout"] <= 43_200, entry
        self.visibility.extend(Entries)
        return {"Successful": [{"Id": e["Id"]} for e in Entries], "Failed": []}


def refusal(entry: dict[str, Any]) -> str | None:
    """Why SQS would refuse this ``SendMessageBatch`` entry, or None."""
    body = entry.get("MessageBody")
    if not isinstance(body, str) or not body:
        return "empty body"
    if _SQS_INVALID.search(body):
        return "body has characters SQS does not accept"
    size = len(body.encode("utf-8"))
    attributes = entry.get("MessageAttributes", {})
    if len(attributes) > 10:
        return "more than 10 attributes"
    for name, attr in attributes.items():
        value = attr.get("StringValue")
        if not _ATTRIBUTE_NAME.match(name):
            return f"invalid attribute name {name!r}"
        if not isinstance(value, str) or not value or _SQS_INVALID.search(value):
            return f"attribute {name} has an invalid value"
        if attr.get("DataType", "").startswith("Number") and (not _NUMBER.match(value) or len(value) > 40):
            return f"attribute {name} is not a number SQS accepts"
        size += len(name.encode()) + len(attr["DataType"].encode()) + len(value.encode())
    if size > MAX_MESSAGE_BYTES:
        return f"message is {size} bytes"
    return None


def dead_letter_for(sqs: RecordingSQS, message_id: str) -> dict[str, Any] | None:
    """The DLQ entry the worker sent for a source message, if any."""
    for entry in sqs.dead_letters:
        original = entry["MessageAttributes"].get("sqsjobs.original_message_id", {}).get("StringValue")
        if original == message_id:
            return entry
    return None


Shuffle = Callable[[list[Case]], list[Case]]
