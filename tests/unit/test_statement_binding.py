"""Batched statements bound from their shape (store/_statements.py) carry exactly what the pynamodb model makes.

The reference for an ``INSERT`` is the item the rule makes from nothing (``Rule.apply``), built and serialized
by the table's model (``_table.whole_item``); for an ``UPDATE``, each ``?`` serialized by its field's model
attribute. Random rules over every attribute type (string, number, boolean, number set), every update kind, a
field written twice, optional values left out, and values of the wrong type (which the model serializes its
own way) must give the same statement text and the same wire parameters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sqsjobs.store import _rules as r
from sqsjobs.store import _statements as s
from sqsjobs.store._item import LeaseState
from sqsjobs.store._lease_ops import Acquire, Annotate, Complete, HandOver, Release, Renew
from sqsjobs.store._table import model_attribute, whole_item

#: fields of each DynamoDB type in the model (store/_table.py), lease fields among them
STRINGS = ["owner", "fingerprint", "job", "outcome", "last_error", "result", "period", "cursor"]
NUMBERS = ["lease_until", "expires_at", "fp_version", "attempts", "started_at", "updated_at", "enqueued_at",
           "finished_at", "spent_attempts", "members_pending"]
BOOLEANS = ["cancel_requested"]
NUMBER_SETS = ["counted", "failed"]

texts = st.text(max_size=12)
numbers = (st.integers(-(10**20), 10**20) | st.floats(allow_nan=True, allow_infinity=True)
           | st.booleans())  # a boolean in a number attribute: json.dumps writes "true"; the model's way is kept
number_sets = st.frozensets(st.integers(-50, 50), max_size=3)  # empty included: the model leaves it out


def value_for(field: str) -> st.SearchStrategy[Any]:
    if field in NUMBER_SETS:
        return number_sets
    if field in NUMBERS:
        return numbers
    if field in BOOLEANS:
        return st.booleans()
    return texts


@st.composite
def rules(draw: st.DrawFn) -> tuple[r.Rule, dict[str, Any]]:
    """A rule of random updates, and the values of its parameters (``None`` for some: left out of the item)."""
    values: dict[str, Any] = {}
    updates: list[r.Update] = []
    for index in range(draw(st.integers(0, 8))):
        field = draw(st.sampled_from([*STRINGS, *NUMBERS, *BOOLEANS, *NUMBER_SETS, "status"]))
        if field == "status":
            kinds = ["set", "if_missing"]
        elif field in NUMBER_SETS:
            kinds = ["set", "remove", "add_to_set", "delete_from_set"]
        elif field in NUMBERS:
            kinds = ["set", "if_missing", "remove", "add"]
        else:
            kinds = ["set", "if_missing", "remove"]
        kind = draw(st.sampled_from(kinds))
        if kind == "remove":
            updates.append(r.Remove(field))
            continue
        if field == "status":
            value: Any = draw(st.sampled_from([state.value for state in LeaseState]))
        elif kind in ("add_to_set", "delete_from_set"):
            value = draw(st.integers(-50, 50))
        elif kind == "add":
            value = draw(st.integers(-3, 3) | st.floats(-3, 3))
        else:
            value = draw(value_for(field) | st.none())
        if kind == "add" or (draw(st.booleans()) and value is not None):
            operand: r.Operand = r.Const(value) if kind != "add" or draw(st.booleans()) else r.Param(f"p{index}")
        else:
            operand = r.Param(f"p{index}")
        if isinstance(operand, r.Param):
            values[operand.name] = value
        update = {"set": r.Set, "if_missing": r.SetIfMissing, "add": r.Add, "add_to_set": r.AddToSet,
                  "delete_from_set": r.DeleteFromSet}[kind](field, operand)
        updates.append(update)
    return r.Rule(updates=tuple(updates)), values


def model_insert(rule: r.Rule, key: str, values: Mapping[str, Any]) -> dict[str, Any]:
    """The ``INSERT`` as the pynamodb model makes it (what ``bind_insert`` sent before shapes)."""
    item = whole_item(rule.apply(None, key, values))
    names = ", ".join(f"'{name}': ?" for name in item)
    return {"Statement": f'INSERT INTO "t" VALUE {{{names}}}', "Parameters": list(item.values()),
            "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


@settings(max_examples=250, deadline=None)
@given(rule_and_values=rules(), key=st.text(min_size=1, max_size=8))
def test_an_insert_bound_from_its_shape_is_the_item_the_model_makes(
        rule_and_values: tuple[r.Rule, dict[str, Any]], key: str) -> None:
    rule, values = rule_and_values
    try:
        expected = model_insert(rule, key, values)
    except (ValueError, TypeError, OverflowError) as refused:  # e.g. no lease state, attempts=inf: refused both ways
        with pytest.raises(type(refused)):
            s.insert_shape(rule, "t").bind(key, values)
        return
    assert s.insert_shape(rule, "t").bind(key, values) == expected


def data(names: list[str]) -> st.SearchStrategy[dict[str, Any]]:
    """An operation's data: some of ``names``, each with a value of its type or ``None`` (removed)."""
    return st.lists(st.sampled_from(names), unique=True, max_size=6).flatmap(
        lambda chosen: st.fixed_dictionaries({name: st.none() | value_for(name) for name in chosen}))


acquires = st.builds(
    Acquire, key=st.text(min_size=1, max_size=8), owner=texts, now=numbers, expires_at=numbers,
    lease_until=numbers | st.none(), job=texts | st.none(), fingerprint=texts | st.none(),
    fp_version=st.integers(0, 9) | st.none(), not_for_message=texts | st.none(), count_attempt=st.booleans(),
    fresh=st.just(True),
    data=data(["job", "outcome", "started_at", "updated_at", "enqueued_at", "finished_at", "cancel_requested",
               "period", "counted"]))


@settings(max_examples=150, deadline=None)
@given(op=acquires)
def test_a_claim_s_insert_is_the_item_the_model_makes(op: Acquire) -> None:
    assert s.bind(op, "t") == s.bind_insert(op, "t") == model_insert(op.rule(), op.key, op.values())


def model_update(op: Any) -> dict[str, Any]:
    """The ``UPDATE`` with each ``?`` serialized by its field's model attribute, per call."""
    shape = s.update_shape(op.rule(), "t")
    values = op.values()
    parameters = []
    for operand, field in shape.params:
        if operand is None:
            parameters.append({"S": op.key})
            continue
        attribute = model_attribute(field)
        value = operand.value if isinstance(operand, r.Const) else values[operand.name]
        parameters.append({attribute.attr_type: attribute.serialize(value)})
    return {"Statement": shape.text, "Parameters": parameters, "ReturnValuesOnConditionCheckFailure": "ALL_OLD"}


update_data = data(["outcome", "finished_at", "updated_at", "result", "last_error", "cancel_requested",
                    "spent_attempts", "counted"])
updates = st.one_of(
    st.builds(Complete, key=texts, owner=texts, expires_at=numbers, data=update_data),
    st.builds(Release, key=texts, owner=texts, expires_at=numbers, attempts_delta=st.integers(-1, 1),
              data=update_data),
    st.builds(HandOver, key=texts, owner=texts, to_owner=texts, expires_at=numbers, data=update_data),
    st.builds(Renew, key=texts, owner=texts, lease_until=numbers, expires_at=numbers, data=update_data),
    st.builds(Annotate, key=texts, now=numbers, data=update_data),
)


@settings(max_examples=150, deadline=None)
@given(op=updates)
def test_an_update_bound_from_its_shape_serializes_each_value_as_the_model_does(op: Any) -> None:
    assert s.bind(op, "t") == model_update(op)


def test_constants_of_equal_value_and_other_types_make_other_shapes() -> None:
    # 0 == 0.0 == False in Python; a shape cached for one must not serve the other (their text differs).
    made = [s.insert_shape(r.Rule(updates=(r.Set("started_at", r.Const(zero)),)), "t").bind("k", {})
            for zero in (0, 0.0, False)]
    assert [m["Parameters"][1] for m in made] == [{"N": "0"}, {"N": "0.0"}, {"N": "false"}]


def test_a_rule_is_built_once_per_shape_and_its_statements_with_it() -> None:
    def claim(key: str, **more: Any) -> Acquire:
        return Acquire(key=key, owner=key, now=1.0, lease_until=2.0, expires_at=3.0, fresh=True,
                       data={"job": key, "finished_at": None, **more})

    assert claim("a").rule() is claim("b").rule()
    assert claim("a").rule() is not claim("a", result="x").rule()
    assert s.insert_shape(claim("a").rule(), "t") is s.insert_shape(claim("b").rule(), "t")
    done = [Complete(key=k, owner=k, expires_at=1.0, data={"outcome": k}) for k in "ab"]
    assert done[0].rule() is done[1].rule()
    assert s.update_shape(done[0].rule(), "t") is s.update_shape(done[1].rule(), "t")
    # the order the data was given in does not change the rule
    assert claim("a").rule() == Acquire(key="a", owner="a", now=1.0, lease_until=2.0, expires_at=3.0,
                                        data={"finished_at": None, "job": "a"}).rule()


def test_a_rule_s_cached_hash_is_the_hash_of_its_fields() -> None:
    rule = Complete(key="k", owner="o", expires_at=1.0).rule()
    twin = r.Rule(condition=rule.condition, updates=rule.updates)
    assert twin == rule and hash(twin) == hash(rule) == hash(rule)
    assert {rule: 1}[twin] == 1


def test_an_insert_with_an_optional_value_missing_leaves_its_column_out() -> None:
    rule = r.Rule(updates=(r.Set("owner", r.Param("owner")), r.Set("result", r.Param("result"))))
    full = s.insert_shape(rule, "t").bind("k", {"owner": "a", "result": "7"})
    short = s.insert_shape(rule, "t").bind("k", {"owner": "a", "result": None})
    assert full["Statement"] == """INSERT INTO "t" VALUE {'pk': ?, 'owner': ?, 'result': ?, 'status': ?}"""
    assert short == model_insert(rule, "k", {"owner": "a", "result": None})
    assert short["Statement"] == """INSERT INTO "t" VALUE {'pk': ?, 'owner': ?, 'status': ?}"""


def test_an_unknown_data_field_is_refused_as_the_single_request_refuses_it() -> None:
    # The model's item silently dropped a field it does not list; the shape refuses it, like prepare().
    colour = Acquire(key="k", owner="a", now=0.0, lease_until=1.0, expires_at=2.0, fresh=True,
                     data={"colour": "red"})
    with pytest.raises(ValueError, match="not a data field"):
        s.bind_insert(colour, "t")
