"""The examples in the docstrings of the rules, `sqsjobs check` and the operator-side and adoption modules are true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "sqsjobs.cli.check",
    "sqsjobs._app",
    "sqsjobs._clients",
    "sqsjobs.cli.enqueue",
    "sqsjobs.cli.init",
    "sqsjobs.cli.jobs",
    "sqsjobs.cli.local",
    "sqsjobs.cli.options",
    "sqsjobs._job",
    "sqsjobs.local.control",
    "sqsjobs.local.output",
    "sqsjobs.local.reload",
    "sqsjobs.worker._outcome_log",
    "sqsjobs.enqueue._progress",
    "sqsjobs.scaffold",
    "sqsjobs.enqueue._sizes",
    "sqsjobs.testing",
    "sqsjobs.testing.events",
    "sqsjobs.testing.fake_sqs",
    "sqsjobs.testing.tester",
    "sqsjobs.validation",
    "sqsjobs.validation.app_consistency",
    "sqsjobs.validation.inspect_app",
    "sqsjobs.validation.layout",
    "sqsjobs.validation.parameters",
    "sqsjobs.validation.problems",
    "sqsjobs.validation.wiring",
    "sqsjobs_rules._wiring",
    "sqsjobs_rules._base",
    "sqsjobs_rules.visibility",
    "sqsjobs_rules.dead_letter",
    "sqsjobs_rules.batch_failures",
    "sqsjobs_rules.alarms",
    "sqsjobs_rules.record_ttl",
    "sqsjobs_rules.delayed_jobs",
    "sqsjobs_rules._delayed_jobs",
    # The operator side: the DLQ reader, redrive, status, the local cloud's queues and intrinsics.
    "sqsjobs.enqueue._message",
    "sqsjobs.ops._dlq_letters",
    "sqsjobs.ops._dlq_evidence",
    "sqsjobs.worker._dead_letters",
    "sqsjobs.enqueue._addresses",
    "sqsjobs.ops._queues",
    "sqsjobs.ops._peek",
    "sqsjobs.ops._redrive",
    "sqsjobs.ops._redrive_event",
    "sqsjobs.ops._redrive_held",
    "sqsjobs.ops._redrive_options",
    "sqsjobs.ops._redrive_select",
    "sqsjobs.ops._redrive_report",
    "sqsjobs.ops._redrive_targets",
    "sqsjobs.ops._status",
    "sqsjobs.ops._status_report",
    "sqsjobs.cli.render",
    "sqsjobs.local.model",
    "sqsjobs.local.intrinsics",
    # Delayed jobs: the arithmetic, the schedules (Stubber), the errors, the enqueue API, status, the emulator.
    "sqsjobs.enqueue._delays",
    "sqsjobs.schedules._one_time",
    "sqsjobs.schedules._receipt",
    "sqsjobs._errors",
    "sqsjobs._job",
    "sqsjobs.cli.status",
    "sqsjobs.local.one_time",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
