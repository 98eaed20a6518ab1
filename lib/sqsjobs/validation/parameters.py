"""Parameter values against the template's ``Parameters``: the names, types and constraints CloudFormation checks.

``sqsjobs check -p`` and ``sqsjobs local up -p`` (and ``samconfig.toml``'s
``parameter_overrides``) go through this one check, so a value CloudFormation
would refuse at deploy time is refused on the laptop too, with the fix.

Example:
    >>> declared = {"WorkerTimeoutSeconds": {"Type": "Number", "MinValue": 1, "MaxValue": 900}}
    >>> [p.message for p in check_parameters(declared, {"WorkerTimeoutSeconds": "abc", "Nope": "3"})]
    ["'abc' is not a number (Type: Number)", 'the template declares no such parameter']
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sqsjobs.validation.problems import Problem


def check_parameters(declared: Mapping[str, Any], given: Mapping[str, str], *,
                     require_values: bool = False) -> list[Problem]:
    """Problems with ``given`` values; with ``require_values``, also parameters that have neither value nor Default."""
    problems: list[Problem] = []
    for name, value in given.items():
        spec = declared.get(name)
        if not isinstance(spec, Mapping):
            known = ", ".join(sorted(declared)) or "none"
            problems.append(Problem(where=f"parameter {name}", message="the template declares no such parameter",
                                    fix=f"remove {name}=... (the template's parameters: {known})"))
            continue
        problem = _value_problem(spec, str(value))
        if problem:
            problems.append(Problem(where=f"parameter {name}", message=problem,
                                    fix=f"pass -p {name}=<a value that fits>{_hint(spec)}"))
    if require_values:
        for name, spec in declared.items():
            if isinstance(spec, Mapping) and "Default" not in spec and name not in given:
                problems.append(Problem(
                    where=f"parameter {name}", message="has no Default and no value was given",
                    fix=f"pass -p {name}=VALUE, or add it to parameter_overrides in the samconfig.toml beside the "
                        "template"))
    return problems


def _value_problem(spec: Mapping[str, Any], value: str) -> str | None:
    kind = str(spec.get("Type", "String"))
    if kind == "Number":
        return _number_problem(spec, value)
    if kind == "List<Number>":
        for item in value.split(","):
            problem = _number_problem(spec, item.strip())
            if problem:
                return problem
        return None
    allowed = spec.get("AllowedValues")
    if isinstance(allowed, list) and value not in [str(a) for a in allowed]:
        return f"{value!r} is not one of AllowedValues {[str(a) for a in allowed]}"
    pattern = spec.get("AllowedPattern")
    if isinstance(pattern, str) and kind in ("String", "CommaDelimitedList"):
        items = value.split(",") if kind == "CommaDelimitedList" else [value]
        try:
            regex = re.compile(pattern)
        except re.error:
            return None  # a pattern Python cannot read: CloudFormation will judge it
        for item in items:
            if not regex.fullmatch(item):
                return f"{item!r} does not match AllowedPattern {pattern}"
    shortest, longest = _int(spec.get("MinLength")), _int(spec.get("MaxLength"))
    if shortest is not None and len(value) < shortest:
        return f"{value!r} is shorter than MinLength {shortest}"
    if longest is not None and len(value) > longest:
        return f"{value!r} is longer than MaxLength {longest}"
    return None


def _number_problem(spec: Mapping[str, Any], value: str) -> str | None:
    try:
        number = float(value)
    except ValueError:
        return f"{value!r} is not a number (Type: {spec.get('Type', 'Number')})"
    low, high = _float(spec.get("MinValue")), _float(spec.get("MaxValue"))
    if low is not None and number < low:
        return f"{value} is below MinValue {spec['MinValue']}"
    if high is not None and number > high:
        return f"{value} is above MaxValue {spec['MaxValue']}"
    allowed = spec.get("AllowedValues")
    if isinstance(allowed, list) and number not in [_float(a) for a in allowed]:
        return f"{value} is not one of AllowedValues {allowed}"
    return None


def _hint(spec: Mapping[str, Any]) -> str:
    parts = [f"{key} {spec[key]}" for key in ("MinValue", "MaxValue", "AllowedPattern", "AllowedValues")
             if key in spec]
    return f" ({', '.join(parts)})" if parts else ""


def _float(value: Any) -> float | None:
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _int(value: Any) -> int | None:
    number = _float(value)
    return None if number is None else int(number)
