"""The published JSON Schema and ``Envelope.decode`` accept and reject the same bodies."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from sqsjobs._errors import MalformedMessageError
from sqsjobs.cli.schema import load_schema, schema_text
from sqsjobs.enqueue._arguments import MAX_LIST_ITEMS
from sqsjobs.enqueue._envelope import (
    ENVELOPE_VERSION,
    MAX_BODY_BYTES,
    MAX_INDEX,
    MAX_KEY_BYTES,
    SUPPORTED_VERSIONS,
    Envelope,
    MemberOf,
    StepOf,
)

VALIDATOR = Draft202012Validator(load_schema())


def strict_json(text: str) -> Any:
    """Parse as another language's JSON parser would: NaN and Infinity are not JSON."""

    def refuse(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def schema_accepts(text: str) -> bool:
    try:
        data = strict_json(text)
    except ValueError:
        return False
    return VALIDATOR.is_valid(data)


def decode_accepts(text: str) -> bool:
    try:
        Envelope.decode(text)
    except MalformedMessageError:
        return False
    return True


def test_the_schema_is_a_valid_draft_2020_12_schema() -> None:
    Draft202012Validator.check_schema(load_schema())
    assert schema_text().endswith("\n")
    # The examples inside the schema are themselves valid envelopes.
    for example in load_schema()["examples"]:
        assert VALIDATOR.is_valid(example)
        assert Envelope.decode(json.dumps(example)).job == example["job"]


def test_the_schema_states_the_limits_the_code_enforces() -> None:
    # A change to envelope.py's limits must change the published schema with it.
    schema = load_schema()
    properties = schema["properties"]
    assert {ENVELOPE_VERSION} == SUPPORTED_VERSIONS and properties["v"]["const"] == ENVELOPE_VERSION
    assert properties["key"]["maxLength"] == MAX_KEY_BYTES
    list_rule = properties["args"]["additionalProperties"]["anyOf"][1]
    assert list_rule["maxItems"] == MAX_LIST_ITEMS
    assert str(MAX_BODY_BYTES) in schema["description"]
    assert schema["required"] == ["v", "job"]
    for name, index in (("member_of", "shard"), ("step_of", "step")):
        assert properties[name]["properties"][index]["maximum"] == MAX_INDEX


REJECTED = {
    "not json": "{nope",
    "an array": "[1, 2]",
    "a string": '"hello"',
    "no version": '{"job": "ok"}',
    "version as string": '{"v": "1", "job": "ok"}',
    "version true": '{"v": true, "job": "ok"}',
    "future version": '{"v": 2, "job": "ok"}',
    "fractional version": '{"v": 1.5, "job": "ok"}',
    "no job": '{"v": 1}',
    "empty job": '{"v": 1, "job": ""}',
    "job is a number": '{"v": 1, "job": 7}',
    "args is a list": '{"v": 1, "job": "ok", "args": [1]}',
    "args is null": '{"v": 1, "job": "ok", "args": null}',
    "nested object argument": '{"v": 1, "job": "ok", "args": {"user": {"id": 1}}}',
    "nested list argument": '{"v": 1, "job": "ok", "args": {"ids": [[1], [2]]}}',
    "object inside a list": '{"v": 1, "job": "ok", "args": {"ids": [{"id": 1}]}}',
    "list too long": json.dumps({"v": 1, "job": "ok", "args": {"ids": list(range(1001))}}),
    "NaN argument": '{"v": 1, "job": "ok", "args": {"ratio": NaN}}',
    "Infinity timestamp": '{"v": 1, "job": "ok", "enqueued_at": Infinity}',
    "empty key": '{"v": 1, "job": "ok", "key": ""}',
    "numeric key": '{"v": 1, "job": "ok", "key": 42}',
    "key too long": json.dumps({"v": 1, "job": "ok", "key": "k" * (MAX_KEY_BYTES + 1)}),
    "job_version zero": '{"v": 1, "job": "ok", "job_version": 0}',
    "job_version as string": '{"v": 1, "job": "ok", "job_version": "2"}',
    "job_version fractional": '{"v": 1, "job": "ok", "job_version": 2.5}',
    "enqueued_at as string": '{"v": 1, "job": "ok", "enqueued_at": "2026-01-01"}',
    "enqueued_at boolean": '{"v": 1, "job": "ok", "enqueued_at": true}',
    "member_of a string": '{"v": 1, "job": "ok", "member_of": "g1"}',
    "member_of without shard": '{"v": 1, "job": "ok", "member_of": {"group": "g1"}}',
    "member_of with more": '{"v": 1, "job": "ok", "member_of": {"group": "g1", "shard": 0, "x": 1}}',
    "member_of bad group id": '{"v": 1, "job": "ok", "member_of": {"group": "g#1", "shard": 0}}',
    "member_of empty group id": '{"v": 1, "job": "ok", "member_of": {"group": "", "shard": 0}}',
    "member_of negative shard": '{"v": 1, "job": "ok", "member_of": {"group": "g1", "shard": -1}}',
    "member_of shard true": '{"v": 1, "job": "ok", "member_of": {"group": "g1", "shard": true}}',
    "step_of step too large": json.dumps({"v": 1, "job": "ok", "step_of": {"chain": "c1", "step": MAX_INDEX + 1}}),
    "step_of fractional step": '{"v": 1, "job": "ok", "step_of": {"chain": "c1", "step": 1.5}}',
    "step_of chain a number": '{"v": 1, "job": "ok", "step_of": {"chain": 7, "step": 1}}',
}


@pytest.mark.parametrize("case", sorted(REJECTED))
def test_what_decode_rejects_the_schema_rejects(case: str) -> None:
    body = REJECTED[case]
    assert not decode_accepts(body)
    assert not schema_accepts(body)


ACCEPTED = {
    "minimal": '{"v": 1, "job": "ok"}',
    "everything": json.dumps({"v": 1, "job": "ok", "job_version": 3, "key": "ok:1",
                              "args": {"id": 1, "name": "x", "ratio": 0.5, "flag": False, "none": None,
                                       "ids": [1, "2", None, True, 3.5]},
                              "enqueued_at": 1767225600.25}),
    "nulls where allowed": '{"v": 1, "job": "ok", "key": null, "enqueued_at": null}',
    # JSON does not tell 1 from 1.0, and some serializers write the latter.
    "integral floats": '{"v": 1.0, "job": "ok", "job_version": 2.0}',
    "unknown properties are ignored": '{"v": 1, "job": "ok", "note": "abc"}',
    "a trace context": json.dumps({"v": 1, "job": "ok", "trace": {"traceparent": f"00-{'1' * 32}-{'2' * 16}-01"}}),
    # tracing never fails a message
    "a trace the worker cannot read is ignored": '{"v": 1, "job": "ok", "trace": "abc"}',
    "empty list argument": '{"v": 1, "job": "ok", "args": {"ids": []}}',
    "key of exactly the limit": json.dumps({"v": 1, "job": "ok", "key": "k" * MAX_KEY_BYTES}),
    "a group member": '{"v": 1, "job": "ok", "member_of": {"group": "3f2a-9c_1", "shard": 7}}',
    "a chain step": json.dumps({"v": 1, "job": "ok", "step_of": {"chain": "c" * 64, "step": MAX_INDEX}}),
    "null relations": '{"v": 1, "job": "ok", "member_of": null, "step_of": null}',
}


@pytest.mark.parametrize("case", sorted(ACCEPTED))
def test_what_decode_accepts_the_schema_accepts(case: str) -> None:
    body = ACCEPTED[case]
    assert decode_accepts(body)
    assert schema_accepts(body)


def test_the_two_key_rules_the_schema_cannot_express_are_the_documented_ones() -> None:
    # Both are stated in the schema's description of "key" and in docs/producers.md.
    description = load_schema()["properties"]["key"]["description"]
    assert "2048 bytes" in description and "lone surrogate" in description
    too_many_bytes = json.dumps({"v": 1, "job": "ok", "key": "é" * MAX_KEY_BYTES})  # 2048 characters, 4096 bytes
    lone_surrogate = '{"v": 1, "job": "ok", "key": "k\\udc80"}'
    for body in (too_many_bytes, lone_surrogate):
        assert schema_accepts(body) and not decode_accepts(body)


def test_integral_float_versions_decode_as_integers() -> None:
    envelope = Envelope.decode(ACCEPTED["integral floats"])
    assert (envelope.v, envelope.job_version) == (1, 2)
    assert type(envelope.v) is int and type(envelope.job_version) is int


def test_relations_round_trip() -> None:
    envelope = Envelope(job="ok", key="ok:1@group:g1", member_of=MemberOf("g1", 3), step_of=StepOf("c1", 0))
    assert Envelope.decode(envelope.encode()) == envelope
    assert schema_accepts(envelope.encode())
    assert "member_of" not in Envelope(job="ok", key="ok:1").encode()


def test_encode_never_writes_what_decode_refuses() -> None:
    with pytest.raises(ValueError):
        Envelope(job="ok", key="ok:1", args={"ratio": math.nan}).encode()


# -- generated bodies: the two must agree on every one -------------------------------------------------------
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53),
                    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=5))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=6)
FIELDS = {
    "v": st.one_of(st.just(1), st.just(1.0), JSON_VALUES),
    "job": st.one_of(st.text(max_size=8), JSON_VALUES),
    "job_version": st.one_of(st.integers(-2, 4), st.sampled_from([1.0, 2.0, 2.5]), JSON_VALUES),
    # ASCII keys: JSON Schema counts characters where decode counts bytes (documented in the schema).
    "key": st.one_of(st.none(), st.text(alphabet="abc:1", max_size=6), JSON_VALUES),
    "args": st.one_of(st.dictionaries(st.text(max_size=4), st.one_of(SCALARS, st.lists(SCALARS, max_size=4),
                                                                      JSON_VALUES), max_size=3), JSON_VALUES),
    "enqueued_at": st.one_of(st.none(), st.floats(allow_nan=False, allow_infinity=False), JSON_VALUES),
    "member_of": st.one_of(st.none(), st.fixed_dictionaries({"group": st.text(alphabet="ab-#", max_size=3),
                                                             "shard": st.integers(-1, 2)}), JSON_VALUES),
    "step_of": st.one_of(st.fixed_dictionaries({"chain": st.text(alphabet="c_", min_size=1, max_size=2),
                                                "step": st.one_of(st.integers(0, 2), st.just(1.0), st.booleans())},
                                               optional={"x": SCALARS}), JSON_VALUES),
    "extra": JSON_VALUES,
}


@st.composite
def bodies(draw: st.DrawFn) -> dict[str, Any]:
    present = draw(st.sets(st.sampled_from(sorted(FIELDS))))
    return {name: draw(FIELDS[name]) for name in sorted(present)}


@pytest.mark.slow
@settings(derandomize=True, max_examples=250, deadline=None)
@given(bodies())
def test_schema_and_decode_agree_on_generated_bodies(body: dict[str, Any]) -> None:
    text = json.dumps(body, allow_nan=False)
    assert schema_accepts(text) == decode_accepts(text), text
