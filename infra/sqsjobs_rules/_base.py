"""The base of every sqsjobs rule: build the template's wiring once per parameter set.

A rule module imports this *module* (``from sqsjobs_rules import _base``) and
subclasses ``_base.WiringRule``; importing the class by name would make
cfn-lint, which instantiates every rule class it finds in a rule module,
register the abstract base as a rule too.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path as FilePath
from typing import Any

from cfnlint.rules import CloudFormationLintRule, RuleMatch

try:
    from sqsjobs_rules._wiring import Path, Queue, SqsSource, Wiring
except ImportError:  # pragma: no cover - loaded by path from a checkout, package not installed
    sys.path.append(str(FilePath(__file__).resolve().parent.parent))
    from sqsjobs_rules._wiring import Path, Queue, SqsSource, Wiring

__all__ = ["Path", "Queue", "SqsSource", "Wiring", "WiringRule"]

# Where the rules are explained (shipped with the project docs, not a web page).
PARAMETERS_VARIABLE = "SQSJOBS_CHECK_PARAMETERS"
SOURCE_URL = "sqsjobs: docs/deploy.md#lint-rules"
TAGS = ["sqsjobs", "sqs", "lambda"]


class WiringRule(CloudFormationLintRule):
    """A rule that reads the template through ``Wiring`` and yields ``(path, message)``.

    Parameter values come from cfn-lint's ``--parameters`` (each set is
    checked) and otherwise from the parameters' defaults.

    Example (a subclass):
        >>> class NoQueues(WiringRule):
        ...     id = "E9199"
        ...     def check(self, wiring):
        ...         if not wiring.queues:
        ...             yield ("Resources",), "no queue"
    """

    source_url = SOURCE_URL
    tags = TAGS

    def check(self, wiring: Wiring) -> Iterator[tuple[Path, str]]:
        """Yield ``(path, message)`` for every problem in ``wiring``."""
        return iter(())

    def match(self, cfn: Any) -> list[RuleMatch]:
        """cfn-lint's entry point: run ``check`` for every parameter set."""
        matches: list[RuleMatch] = []
        seen: set[tuple[Path, str]] = set()
        for overrides in _parameter_sets(cfn):
            for path, message in self.check(Wiring(cfn.template, overrides)):
                if (path, message) not in seen:
                    seen.add((path, message))
                    matches.append(RuleMatch(list(path), message))
        return matches


def _parameter_sets(cfn: Any) -> list[Mapping[str, Any]]:
    """Parameter values to check with: cfn-lint's ``--parameters``, else ``sqsjobs check``'s.

    cfn-lint (1.x) rebuilds its context when it expands a SAM template and
    loses ``--parameters`` on the way, so ``sqsjobs check --parameter`` passes
    its values in ``SQSJOBS_CHECK_PARAMETERS`` (a JSON object) instead.
    """
    sets = getattr(getattr(cfn, "context", None), "parameter_sets", None) or []
    values: list[Mapping[str, Any]] = [
        dict(s.parameters) for s in sets if isinstance(getattr(s, "parameters", None), Mapping)
    ]
    raw = os.environ.get(PARAMETERS_VARIABLE)
    if raw:
        try:
            given = json.loads(raw)
        except ValueError:
            given = None
        if isinstance(given, Mapping):
            values = [{**v, **given} for v in values] or [dict(given)]
    return values or [{}]
