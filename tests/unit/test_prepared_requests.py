"""Prepared requests bind to exactly what pynamodb builds per call, for any values and every operation shape."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pynamodb.expressions.operand import Value

from sqsjobs.store import _expressions as expressions
from sqsjobs.store import _rules as r
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._enqueue_ops import Debounce, Rearm, Reserve
from sqsjobs.store._expressions import prepare
from sqsjobs.store._lease import LeaseState, Operation
from sqsjobs.store._lease_ops import (
    Acquire,
    Amend,
    Annotate,
    Close,
    Complete,
    HandOver,
    Release,
)

texts = st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s)
times = st.floats(min_value=0, max_value=4e9, allow_nan=False) | st.integers(min_value=0, max_value=4_000_000_000)
data = st.dictionaries(st.sampled_from(["job", "outcome", "last_error", "cursor"]), texts | st.none(), max_size=3)
expect = st.dictionaries(st.sampled_from(["status", "counted_as", "group_state"]), texts | st.none(), max_size=2)
counters = st.sampled_from(["members_pending", "members_succeeded", "members_expired"])
sets = st.sampled_from(["counted", "failed"])


def per_call(op: Operation, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What pynamodb builds when the values go straight into the expressions (no prepared shape)."""
    values = op.values()

    def direct(attribute: Any, operand: r.Operand, *, element: bool = False) -> Any:
        value = operand.value if isinstance(operand, r.Const) else values[operand.name]
        if element:
            return value  # Path.contains serializes it as one of the set's numbers
        return Value({value} if attribute.attr_type == "NS" else value, attribute=attribute)

    with monkeypatch.context() as patched:
        patched.setattr(expressions, "_operand", direct)
        built = prepare(op.rule())
    return built.bind("t", op.key, {})


ops = st.one_of(
    st.builds(Acquire, key=texts, owner=texts, now=times, lease_until=times | st.none(), expires_at=times,
              fingerprint=texts | st.none(), fp_version=st.integers(1, 9), not_for_message=texts | st.none(),
              count_attempt=st.booleans(), data=data),
    st.builds(Complete, key=texts, owner=texts, expires_at=times, data=data),
    st.builds(Release, key=texts, owner=texts, expires_at=times, attempts_delta=st.integers(-1, 1), data=data),
    st.builds(HandOver, key=texts, owner=texts, to_owner=texts, expires_at=times, data=data),
    st.builds(Close, key=texts, now=times, expires_at=times, state=st.sampled_from(list(LeaseState)), data=data,
              expect=expect),
    st.builds(Amend, key=texts, add=st.dictionaries(counters, st.integers(-3, 3), min_size=1, max_size=2), data=data,
              expect=expect, above=st.dictionaries(counters, st.integers(0, 3), max_size=2),
              in_set=st.dictionaries(sets, st.integers(0, 99), max_size=1),
              not_in_set=st.dictionaries(sets, st.integers(0, 99), max_size=1),
              add_to_set=st.dictionaries(sets, st.integers(0, 99), max_size=1)),
    st.builds(Annotate, key=texts, now=times, data=data),
    st.builds(Debounce, key=texts, job=texts, token=texts, now=times, due=times, expires_at=times),
    st.builds(Rearm, key=texts, token=texts, now=times),
    st.builds(Reserve, key=texts, job=texts, request=texts, now=times, until=times, expires_at=times,
              until_done=st.booleans()),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(op=ops)
def test_a_bound_request_equals_the_one_pynamodb_builds_per_call(op: Operation) -> None:
    with pytest.MonkeyPatch.context() as monkeypatch:
        expected = per_call(op, monkeypatch)
    assert prepare(op.rule()).bind("t", op.key, op.values()) == expected


def test_a_request_is_built_once_per_shape() -> None:
    store = DynamoDBStore(client=None, table_name="t")  # type: ignore[arg-type]
    first = Complete(key="a", owner="o", expires_at=1.0, data={"outcome": "succeeded"})
    second = Complete(key="b", owner="p", expires_at=2.0, data={"outcome": "succeeded"})
    assert store._prepare(first.rule()) is store._prepare(second.rule())
    assert store._prepare(Complete(key="c", owner="o", expires_at=1.0, data={"result": "1"}).rule()) is not \
        store._prepare(first.rule())


def test_unknown_data_fields_are_refused_when_the_request_is_built() -> None:
    with pytest.raises(ValueError, match="not a data field"):
        prepare(Complete(key="k", owner="o", expires_at=1.0, data={"colour": "red"}).rule())
    with pytest.raises(ValueError, match="not a data field"):
        prepare(Complete(key="k", owner="o", expires_at=1.0, data={"owner": "x"}).rule())
