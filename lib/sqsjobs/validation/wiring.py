"""Queues feeding functions, and the sqsjobs lint rules evaluated with the parameter values in hand.

The rules are the ones ``sqsjobs check`` hands to cfn-lint (``sqsjobs_rules``,
shipped in the wheel); here they run in-process on the template and the
overrides, which is how ``sqsjobs local up -p QueueVisibilityTimeoutSeconds=10``
hears what ``sqsjobs check -p ...`` says (E9101).

Example:
    >>> doc = {"Resources": {"Q": {"Type": "AWS::SQS::Queue"}}}
    >>> [p.message[:38] for p in check_queues(doc)]
    ['no SQS queue feeds a function, so the ']
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from collections.abc import Mapping
from typing import Any

from sqsjobs._settings import ENV_QUEUE_URL
from sqsjobs.validation.problems import Problem, Severity

RULES_PACKAGE = "sqsjobs_rules"
QUEUE_VARIABLE = ENV_QUEUE_URL


def wiring(document: Mapping[str, Any], overrides: Mapping[str, str]) -> Any:
    """The rules' own reading of the template (``sqsjobs_rules._wiring.Wiring``), with ``overrides``."""
    module = importlib.import_module(f"{RULES_PACKAGE}._wiring")
    return module.Wiring(document, overrides)


def check_queues(document: Mapping[str, Any], overrides: Mapping[str, str] | None = None) -> list[Problem]:
    """A template whose functions no queue feeds, or whose ``SQSJOBS_QUEUE_URL`` names no queue of the template."""
    wired = wiring(document, overrides or {})
    problems: list[Problem] = []
    if not wired.sources:
        problems.append(Problem(
            where="Resources",
            message="no SQS queue feeds a function, so the jobs would never run",
            fix="add an AWS::SQS::Queue (with a RedrivePolicy to a DLQ) and an SQS event on the worker function "
                "(sqsjobs init writes one)"))
    for logical_id, function in wired.functions.items():
        value = function.environment.get(QUEUE_VARIABLE)
        target = value.get("Ref") if isinstance(value, Mapping) and set(value) == {"Ref"} else None
        if isinstance(target, str) and target not in wired.queues and not wired.resolve.declares(target):
            problems.append(Problem(
                where=f"{logical_id} {QUEUE_VARIABLE}", message=f"!Ref {target} is not a queue of the template",
                fix=f"reference the jobs queue's logical id ({', '.join(sorted(wired.queues)) or 'none declared'})"))
    return problems


def check_rules(document: Mapping[str, Any], overrides: Mapping[str, str]) -> list[Problem]:
    """Run every sqsjobs rule on the template with ``overrides``; E rules are errors, W rules warnings."""
    package = importlib.import_module(RULES_PACKAGE)
    base = importlib.import_module(f"{RULES_PACKAGE}._base")
    wired = wiring(document, overrides)
    problems: list[Problem] = []
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{RULES_PACKAGE}.{info.name}")
        for _, rule_class in inspect.getmembers(module, inspect.isclass):
            if (not issubclass(rule_class, base.WiringRule) or rule_class is base.WiringRule
                    or rule_class.__module__ != module.__name__):
                continue
            rule: Any = rule_class()
            for path, message in rule.check(wired):
                severity = Severity.ERROR if str(rule.id).startswith("E") else Severity.WARNING
                problems.append(Problem(where=_where(path), message=message, severity=severity, rule=str(rule.id)))
    return problems


def _where(path: tuple[Any, ...]) -> str:
    """``JobsQueue.VisibilityTimeout`` for ``("Resources", "JobsQueue", "Properties", "VisibilityTimeout")``."""
    if len(path) < 2:
        return "template"
    if len(path) >= 4 and path[2] == "Properties":
        return f"{path[1]}.{path[3]}"
    return str(path[1])
