"""The examples in the docstrings of the rules, `sqsjobs check` and the operator-side and adoption modules are true."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = [
    "sqsjobs.cli.check",
    "sqsjobs.app",
    "sqsjobs.clients",
    "sqsjobs.cli.enqueue",
    "sqsjobs.cli.init",
    "sqsjobs.cli.jobs",
    "sqsjobs.cli.local",
    "sqsjobs.cli.options",
    "sqsjobs.job",
    "sqsjobs.local.control",
    "sqsjobs.local.output",
    "sqsjobs.local.reload",
    "sqsjobs.outcome_log",
    "sqsjobs.progress",
    "sqsjobs.scaffold",
    "sqsjobs.sizes",
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
    # Delayed jobs: the arithmetic, the schedules (Stubber), the errors, the enqueue API, status, the emulator.
    "sqsjobs.delays",
    "sqsjobs.one_time_schedules",
    "sqsjobs.scheduled_job",
    "sqsjobs.errors",
    "sqsjobs.job",
    "sqsjobs.cli.status",
    "sqsjobs.local.one_time",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
