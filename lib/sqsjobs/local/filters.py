"""Lambda event filtering (``FilterCriteria``) for the local event source mappings.

A record is delivered when any filter's pattern matches. Supported pattern
syntax (Lambda's subset of EventBridge patterns): nested objects, lists of
literal values (strings, numbers, booleans, null), ``{"prefix": ...}``,
``{"suffix": ...}``, ``{"equals-ignore-case": ...}``, ``{"anything-but": ...}``,
``{"exists": true|false}`` and ``{"numeric": [op, value, ...]}``. SQS bodies
that are JSON are matched as objects under ``body``, as Lambda does.
"""

from __future__ import annotations

import json
from typing import Any

_MISSING = object()
_NUMERIC = {
    "=": lambda a, b: a == b,
    "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b,
    ">": lambda a, b: a > b,
    ">=": lambda a, b: a >= b,
}


class FilterError(ValueError):
    """Raised when a pattern uses syntax the local cloud does not know."""


def parse_filters(criteria: Any) -> list[dict[str, Any]]:
    """The patterns of a ``FilterCriteria`` property.

    Example:
        >>> parse_filters({"Filters": [{"Pattern": '{"eventName": ["INSERT"]}'}]})
        [{'eventName': ['INSERT']}]
    """
    patterns = []
    for item in (criteria or {}).get("Filters", []):
        pattern = item["Pattern"]
        patterns.append(json.loads(pattern) if isinstance(pattern, str) else dict(pattern))
    return patterns


def sqs_view(record: dict[str, Any]) -> dict[str, Any]:
    """An SQS record as filters see it: a JSON body is an object, anything else stays text.

    Example:
        >>> sqs_view({"body": '{"job": "x"}'})["body"], sqs_view({"body": "plain"})["body"]
        ({'job': 'x'}, 'plain')"""
    try:
        body: Any = json.loads(record["body"])
    except (ValueError, TypeError):
        body = record["body"]
    return {**record, "body": body}


def matches_any(patterns: list[dict[str, Any]], record: dict[str, Any]) -> bool:
    """True when there are no patterns or one of them matches ``record``.

    Example:
        >>> matches_any([{"eventName": ["INSERT", "MODIFY"]}], {"eventName": "REMOVE"})
        False
    """
    return not patterns or any(matches(p, record) for p in patterns)


def matches(pattern: dict[str, Any], value: Any) -> bool:
    """True when ``value`` (a dict) matches ``pattern``.

    Example:
        >>> matches({"dynamodb": {"Keys": {"pk": {"S": [{"prefix": "order#"}]}}}},
        ...         {"dynamodb": {"Keys": {"pk": {"S": "order#7"}}}})
        True"""
    if not isinstance(value, dict):
        return False
    for key, expected in pattern.items():
        actual = value.get(key, _MISSING)
        if isinstance(expected, dict):
            if not matches(expected, actual):
                return False
        elif isinstance(expected, list):
            if not _matches_list(expected, actual):
                return False
        else:
            raise FilterError(f"pattern value for {key!r} must be an object or a list, got {expected!r}")
    return True


def _matches_list(rules: list[Any], actual: Any) -> bool:
    values = actual if isinstance(actual, list) else [actual]
    return any(_rule(rule, v) for rule in rules for v in values) or (
        actual is _MISSING and any(isinstance(r, dict) and r.get("exists") is False for r in rules)
    )


def _rule(rule: Any, actual: Any) -> bool:
    if not isinstance(rule, dict):
        return actual is not _MISSING and rule == actual
    (kind, argument), = rule.items()
    if kind == "exists":
        return (actual is not _MISSING) == bool(argument)
    if actual is _MISSING:
        return False
    if kind == "prefix":
        return isinstance(actual, str) and actual.startswith(argument)
    if kind == "suffix":
        return isinstance(actual, str) and actual.endswith(argument)
    if kind == "equals-ignore-case":
        return isinstance(actual, str) and actual.lower() == str(argument).lower()
    if kind == "anything-but":
        excluded = argument if isinstance(argument, list) else [argument]
        return actual not in excluded
    if kind == "numeric":
        if not isinstance(actual, (int, float)) or isinstance(actual, bool):
            return False
        pairs = list(zip(argument[::2], argument[1::2], strict=True))
        return all(_NUMERIC[op](actual, bound) for op, bound in pairs)
    raise FilterError(f"filter rule {kind!r} is not supported locally")
