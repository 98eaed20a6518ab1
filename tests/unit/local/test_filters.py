"""Lambda event filtering patterns, matched by moto's matcher behind sqsjobs.local.filters' checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sqsjobs.local.filters import FilterError, beyond_lambda, matches_any, parse_filters, sqs_view

RECORD = sqs_view({
    "messageId": "m-1",
    "body": json.dumps({"job": "send-email", "args": {"invoice_id": 7, "ip": "10.1.2.3", "tags": ["a", "vip"]}}),
    "attributes": {"ApproximateReceiveCount": "1"},
    "messageAttributes": {"sqsjobs.job": {"stringValue": "send-email", "dataType": "String"}},
})


def patterns(*raw: dict[str, Any]) -> list[dict[str, Any]]:
    return parse_filters({"Filters": [{"Pattern": json.dumps(p)} for p in raw]})


def test_the_outbox_relay_filter_drops_removes() -> None:
    relay = parse_filters({"Filters": [{"Pattern": '{"eventName": ["INSERT", "MODIFY"]}'}]})

    assert matches_any(relay, {"eventName": "INSERT", "dynamodb": {"Keys": {"pk": {"S": "outbox#1"}}}})
    assert not matches_any(relay, {"eventName": "REMOVE"})
    assert matches_any([], {"eventName": "REMOVE"})


@pytest.mark.parametrize(("pattern", "expected"), [
    ({"body": {"job": ["send-email"]}}, True),
    ({"body": {"job": ["other", "send-email"]}}, True),
    ({"body": {"job": [{"prefix": "send"}]}}, True),
    ({"body": {"job": [{"suffix": "-email"}]}}, True),
    ({"body": {"job": [{"equals-ignore-case": "SEND-EMAIL"}]}}, True),
    ({"body": {"job": [{"anything-but": ["send-email"]}]}}, False),
    ({"body": {"job": [{"anything-but": "other"}]}}, True),
    ({"body": {"args": {"invoice_id": [{"numeric": [">", 5, "<=", 7]}]}}}, True),
    ({"body": {"args": {"invoice_id": [{"numeric": ["<", 7]}]}}}, False),
    ({"body": {"trace": [{"exists": False}]}}, True),
    ({"body": {"job": [{"exists": True}]}}, True),
    ({"body": {"args": {"tags": ["vip"]}}}, True),  # a list in the record matches when one element does
    ({"messageAttributes": {"sqsjobs.job": {"stringValue": ["send-email"]}}}, True),
    ({"attributes": {"ApproximateReceiveCount": ["1"]}}, True),
    # what the previous hand-written matcher got wrong (issue 23's research):
    ({"body": {"job": [{"anything-but": {"prefix": "send"}}]}}, False),  # was compared as a literal: True
    ({"$or": [{"body": {"job": ["nope"]}}, {"body": {"args": {"invoice_id": [7]}}}]}, True),  # was False
    ({"body": {"args": {"ip": [{"cidr": "10.0.0.0/8"}]}}}, True),  # was a FilterError
    ({"body": {"args": {"ip": [{"cidr": "192.168.0.0/16"}]}}}, False),
    ({"body": {"job": [{"wildcard": "send-*"}]}}, True),  # was a FilterError
    ({"body": {"job": [{"wildcard": "*-sms"}]}}, False),
])
def test_the_operators_the_project_relies_on(pattern: dict[str, Any], expected: bool) -> None:
    assert matches_any(patterns(pattern), RECORD) is expected


def test_a_plain_text_body_matches_as_text_and_not_as_an_object() -> None:
    text = sqs_view({"body": "plain text"})

    assert matches_any(patterns({"body": [{"prefix": "plain"}]}), text)
    assert not matches_any(patterns({"body": {"job": ["x"]}}), text)


@pytest.mark.parametrize(("pattern", "says"), [
    ({"ip": [{"bogus": 1}]}, "ip: unknown operator 'bogus'"),  # moto alone would match everything
    ({"job": "send-email"}, "job: must be an object or a non-empty list"),
    ({"job": []}, "job: must be an object or a non-empty list"),
    ({"n": [{"numeric": [">", 1, "<"]}]}, "n: numeric takes operator/number pairs"),
    ({"n": [{"numeric": ["~", 1]}]}, "n: numeric takes operator/number pairs"),
    ({"n": [{"exists": "yes"}]}, "n: exists takes true or false"),
    ({"n": [{"cidr": "10.0.0.0/40"}]}, "n: cidr takes an IP network"),
    ({"n": [{"prefix": 5}]}, "n: prefix takes text"),
    ({"n": [{"anything-but": {"numeric": [">", 1]}}]}, "n: anything-but wraps one of"),
    ({"n": [{"anything-but": [{"prefix": "x"}]}]}, "n: anything-but takes a value, a list of values"),
    ({"n": [{"prefix": "a", "suffix": "b"}]}, "n: a rule is a value or an object with one operator"),
    ({"$or": [{"a": ["x"]}]}, "$or: $or takes a list of at least two patterns"),
    ({"a": {"b": [{"nope": True}]}}, "a.b: unknown operator 'nope'"),
])
def test_patterns_lambda_would_refuse_are_refused_with_where_and_why(pattern: dict[str, Any], says: str) -> None:
    with pytest.raises(FilterError) as refused:
        patterns(pattern)
    assert says in str(refused.value) and json.dumps(pattern) in str(refused.value)


def test_what_lambda_does_not_document_is_named_for_a_warning() -> None:
    assert beyond_lambda({"body": {"job": ["a", {"prefix": "b"}, {"anything-but": ["c"]}]}}) == []
    assert beyond_lambda({"$or": [{"a": [{"cidr": "10.0.0.0/8"}]}, {"b": [{"anything-but": {"suffix": ".png"}}]}],
                          "c": [{"prefix": {"equals-ignore-case": "x"}}]}) == [
        "$or", "anything-but with suffix", "cidr", "prefix with equals-ignore-case"]


def test_a_pattern_that_is_not_json_is_refused() -> None:
    with pytest.raises(FilterError, match="is not JSON"):
        parse_filters({"Filters": [{"Pattern": "{job: x}"}]})


def test_a_mapping_with_a_bad_filter_is_refused_at_deploy_and_one_beyond_lambda_is_warned_about() -> None:
    from types import SimpleNamespace

    from sqsjobs.local.model import Deployment, FunctionSpec, QueueInfo
    from sqsjobs.local.resources import ResourceCreator

    deployment = Deployment(stack_name="s", queues={"Q": QueueInfo(logical_id="Q", url="u", arn="arn:q", name="q")})
    creator = ResourceCreator(None, SimpleNamespace(region="us-east-1"), None, deployment)  # type: ignore[arg-type]
    worker = FunctionSpec(logical_id="Worker", name="w", handler="h.h", code_dir=Path("."))

    def mapping(pattern: dict[str, Any]) -> None:
        creator._mapping("Jobs", {"EventSourceArn": "arn:q", "FilterCriteria": {"Filters": [
            {"Pattern": json.dumps(pattern)}]}}, worker)

    with pytest.raises(FilterError, match=r"^Jobs: FilterCriteria: filter pattern .*unknown operator 'bogus'.*"
                                          r"Lambda would refuse the mapping\)$"):
        mapping({"body": {"job": [{"bogus": 1}]}})
    mapping({"body": {"job": [{"wildcard": "send-*"}]}})
    assert [m.filters for m in deployment.sqs_mappings] == [({"body": {"job": [{"wildcard": "send-*"}]}},)]
    assert deployment.warnings == ["Jobs: FilterCriteria uses wildcard, which Lambda's event filtering documentation "
                                   "does not list; matched locally as EventBridge does, but AWS may refuse the mapping"]
