"""The docstring examples of the operator-side modules (redrive, status, the DLQ reader, local cloud) run."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "sqsjobs.message",
    "sqsjobs.dlq_message",
    "sqsjobs.queues",
    "sqsjobs.redrive",
    "sqsjobs.redrive_report",
    "sqsjobs.redrive_targets",
    "sqsjobs.status",
    "sqsjobs.cli.render",
    "sqsjobs.local.model",
    "sqsjobs.local.intrinsics",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
