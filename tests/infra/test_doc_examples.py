"""The examples in the rules' and `sqsjobs check`'s docstrings are true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "sqsjobs.cli.check",
    "sqsjobs_rules._wiring",
    "sqsjobs_rules._base",
    "sqsjobs_rules.visibility",
    "sqsjobs_rules.dead_letter",
    "sqsjobs_rules.batch_failures",
    "sqsjobs_rules.alarms",
    "sqsjobs_rules.record_ttl",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
