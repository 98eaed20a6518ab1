"""Lambda event filtering patterns."""

from __future__ import annotations

import pytest

from sqsjobs.local.filters import FilterError, matches_any, parse_filters, sqs_view


def test_the_outbox_relay_filter_drops_removes() -> None:
    patterns = parse_filters({"Filters": [{"Pattern": '{"eventName": ["INSERT", "MODIFY"]}'}]})

    assert matches_any(patterns, {"eventName": "INSERT"})
    assert not matches_any(patterns, {"eventName": "REMOVE"})
    assert matches_any([], {"eventName": "REMOVE"})


def test_sqs_bodies_match_as_json() -> None:
    record = sqs_view({"body": '{"job": "invoice-email", "args": {"invoice_id": 7}}'})

    assert matches_any([{"body": {"job": [{"prefix": "invoice"}]}}], record)
    assert matches_any([{"body": {"args": {"invoice_id": [{"numeric": [">", 5, "<=", 7]}]}}}], record)
    assert not matches_any([{"body": {"job": [{"anything-but": ["invoice-email"]}]}}], record)
    assert matches_any([{"body": {"trace": [{"exists": False}]}}], record)
    assert not matches_any([{"body": {"job": ["x"]}}], sqs_view({"body": "plain text"}))


def test_unknown_rules_are_an_error() -> None:
    with pytest.raises(FilterError, match="cidr"):
        matches_any([{"ip": [{"cidr": "10.0.0.0/8"}]}], {"ip": "10.0.0.1"})
