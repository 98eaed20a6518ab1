"""Lambda event filtering (``FilterCriteria``) for the local event source mappings, matched by moto.

A record is delivered when any filter's pattern matches. The matching is moto's EventBridge
pattern matcher (``moto.events.models.EventPattern``); it is internal to moto, so this module
is the only place that touches it, and checks every pattern first: moto matches *everything*
for an operator it does not know, where Lambda refuses the mapping.

What a pattern may hold (EventBridge's pattern grammar): nested objects; lists of literal values
(strings, numbers, booleans, null); ``prefix`` and ``suffix`` (text, or ``{"equals-ignore-case":
text}``), ``equals-ignore-case``, ``anything-but`` (a value, a list of values, or one of
``prefix``/``suffix``/``equals-ignore-case``/``wildcard``), ``numeric`` (operator/number pairs),
``exists``, ``cidr``, ``wildcard`` and ``$or``. Lambda's documentation lists a subset (literals,
``prefix``, ``suffix``, ``equals-ignore-case``, ``anything-but`` with values, ``numeric``,
``exists``): a pattern using more still matches here, and :func:`beyond_lambda` names what it used
so the local cloud can warn that Lambda may refuse it.

An SQS record is matched as Lambda sees it (:func:`sqs_view`): a body that is JSON is an object
under ``body``, any other body is text; the record's other keys (``attributes``,
``messageAttributes``...) are there as they are.

Example:
    >>> pattern = {"body": {"job": [{"anything-but": {"prefix": "send-"}}]}}
    >>> check_pattern(pattern), beyond_lambda(pattern)
    (None, ['anything-but with prefix'])
    >>> matches_any([pattern], sqs_view({"body": '{"job": "send-email"}'}))
    False
"""

from __future__ import annotations

import ipaddress
import json
from typing import Any

from sqsjobs.local.errors import TemplateError

#: the comparison operators of ``numeric``
NUMERIC_OPERATORS = frozenset({"<", "<=", "=", ">=", ">"})
#: what ``anything-but`` may wrap besides values
ANYTHING_BUT_OPERATORS = frozenset({"prefix", "suffix", "equals-ignore-case", "wildcard"})
#: every operator a rule may name (moto implements each of them)
OPERATORS = frozenset({"prefix", "suffix", "equals-ignore-case", "anything-but", "numeric", "exists", "cidr",
                       "wildcard"})


class FilterError(TemplateError):
    """Raised when a ``FilterCriteria`` pattern is not one Lambda (and so the local cloud) would accept."""


def parse_filters(criteria: Any) -> list[dict[str, Any]]:
    """The checked patterns of a ``FilterCriteria`` property; a :class:`FilterError` for a bad one.

    Example:
        >>> parse_filters({"Filters": [{"Pattern": '{"eventName": ["INSERT"]}'}]})
        [{'eventName': ['INSERT']}]
        >>> parse_filters({"Filters": [{"Pattern": '{"eventName": [{"bogus": 1}]}'}]})
        Traceback (most recent call last):
        ...
        sqsjobs.local.filters.FilterError: filter pattern {"eventName": [{"bogus": 1}]}: eventName: unknown \
operator 'bogus' (known: anything-but, cidr, equals-ignore-case, exists, numeric, prefix, suffix, wildcard)
    """
    patterns = []
    for item in (criteria or {}).get("Filters", []):
        raw = item.get("Pattern") if isinstance(item, dict) else None
        try:
            pattern: Any = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError as error:
            raise FilterError(f"filter pattern {raw!r} is not JSON: {error}") from None
        try:
            check_pattern(pattern)
        except FilterError as error:
            shown = raw if isinstance(raw, str) else json.dumps(raw)
            raise FilterError(f"filter pattern {shown}: {error}") from None
        patterns.append(pattern)
    return patterns


def check_pattern(pattern: Any, where: str = "") -> None:
    """Raise :class:`FilterError` (saying where) unless ``pattern`` is a pattern of the grammar above."""
    if not isinstance(pattern, dict) or not pattern:
        raise FilterError(f"{where or 'a pattern'}: must be a non-empty JSON object")
    for key, value in pattern.items():
        path = f"{where}.{key}" if where else key
        if key == "$or":
            if not isinstance(value, list) or len(value) < 2:
                raise FilterError(f"{path}: $or takes a list of at least two patterns")
            for index, alternative in enumerate(value):
                check_pattern(alternative, f"{path}[{index}]")
        elif isinstance(value, dict):
            check_pattern(value, path)
        elif isinstance(value, list) and value:
            for rule in value:
                _check_rule(rule, path)
        else:
            raise FilterError(f"{path}: must be an object or a non-empty list of values and rules, "
                              f"got {json.dumps(value)}")


def _check_rule(rule: Any, path: str) -> None:
    if rule is None or isinstance(rule, str | bool | int | float):
        return
    if not isinstance(rule, dict) or len(rule) != 1:
        raise FilterError(f"{path}: a rule is a value or an object with one operator, got {json.dumps(rule)}")
    ((operator, argument),) = rule.items()
    if operator not in OPERATORS:
        raise FilterError(f"{path}: unknown operator {operator!r} (known: {', '.join(sorted(OPERATORS))})")
    problem = _argument_problem(operator, argument)
    if problem:
        raise FilterError(f"{path}: {operator} {problem}, got {json.dumps(argument)}")


def _argument_problem(operator: str, argument: Any) -> str:
    """What is wrong with ``operator``'s argument ("" when nothing is)."""
    text = isinstance(argument, str)
    if operator in ("prefix", "suffix"):
        ignoring_case = (isinstance(argument, dict) and list(argument) == ["equals-ignore-case"]
                         and isinstance(argument["equals-ignore-case"], str))
        return "" if text or ignoring_case else 'takes text or {"equals-ignore-case": text}'
    if operator in ("equals-ignore-case", "wildcard"):
        return "" if text else "takes text"
    if operator == "exists":
        return "" if isinstance(argument, bool) else "takes true or false"
    if operator == "cidr":
        try:
            ipaddress.ip_network(argument)
        except (TypeError, ValueError):
            return "takes an IP network such as 10.0.0.0/24"
        return ""
    if operator == "numeric":
        pairs_ok = (isinstance(argument, list) and argument and len(argument) % 2 == 0
                    and all(op in NUMERIC_OPERATORS for op in argument[::2])
                    and all(isinstance(n, int | float) and not isinstance(n, bool) for n in argument[1::2]))
        return "" if pairs_ok else "takes operator/number pairs such as [\">\", 0, \"<=\", 5]"
    # anything-but
    if isinstance(argument, dict):
        if len(argument) != 1 or next(iter(argument)) not in ANYTHING_BUT_OPERATORS:
            return f"wraps one of {', '.join(sorted(ANYTHING_BUT_OPERATORS))}"
        return _argument_problem(next(iter(argument)), next(iter(argument.values())))
    values = argument if isinstance(argument, list) else [argument]
    if not values or not all(v is None or isinstance(v, str | bool | int | float) for v in values):
        return "takes a value, a list of values, or one operator"
    return ""


def beyond_lambda(pattern: dict[str, Any]) -> list[str]:
    """The operators ``pattern`` uses that Lambda's filtering documentation does not list (sorted, once each).

    Example:
        >>> beyond_lambda({"$or": [{"ip": [{"cidr": "10.0.0.0/8"}]}, {"name": [{"wildcard": "a*"}]}]})
        ['$or', 'cidr', 'wildcard']
    """
    found: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "$or":
                    found.add("$or")
                    for alternative in value:
                        walk(alternative)
                elif isinstance(value, dict):
                    walk(value)
                elif isinstance(value, list):
                    for rule in value:
                        if isinstance(rule, dict):
                            ((operator, argument),) = rule.items()
                            if operator in ("cidr", "wildcard"):
                                found.add(operator)
                            elif operator == "anything-but" and isinstance(argument, dict):
                                found.add(f"anything-but with {next(iter(argument))}")
                            elif operator in ("prefix", "suffix") and isinstance(argument, dict):
                                found.add(f"{operator} with equals-ignore-case")

    walk(pattern)
    return sorted(found)


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
    """True when there are no patterns or one of them matches ``record`` (moto's matcher, checked patterns).

    Example:
        >>> matches_any([{"eventName": ["INSERT", "MODIFY"]}], {"eventName": "REMOVE"})
        False
    """
    if not patterns:
        return True
    from moto.events.models import EventPattern

    # moto serialises the event as JSON first: values JSON lacks (datetimes) are matched as text.
    event = json.loads(json.dumps(record, default=str))
    return any(EventPattern(None, pattern).matches_event(event) for pattern in patterns)
