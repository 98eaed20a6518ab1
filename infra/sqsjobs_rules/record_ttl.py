"""E9107: idempotency records must outlive the dead letters that can replay them.

A redriven letter is one more delivery: the guard acknowledges it as a
duplicate only while the job's record exists. The record expires
``SQSJOBS_RECORD_TTL_SECONDS`` after its last write, so a function whose TTL is
shorter than the ``MessageRetentionPeriod`` of a DLQ it works with lets a
letter outlive the record, and a replay of a job that completed meanwhile runs
it again.

The DLQs a function works with are those of the queues it consumes and of the
queues its environment names (``Wiring.dead_letter_queues_of``). A function
without the variable uses the default, 21 days, which no SQS retention (14
days at most) exceeds.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path as FilePath
from typing import Any

try:
    from sqsjobs_rules import _base
except ImportError:  # pragma: no cover - loaded by path from a checkout, package not installed
    sys.path.append(str(FilePath(__file__).resolve().parent.parent))
    from sqsjobs_rules import _base

#: lib/sqsjobs/_settings.py's ENV_RECORD_TTL (the rules load without the sqsjobs package; a test ties them)
RECORD_TTL_VARIABLE = "SQSJOBS_RECORD_TTL_SECONDS"
#: what the default TTL adds to the DLQ's retention: a week to redrive
REDRIVE_WINDOW_SECONDS = 7 * 24 * 3600


class RecordTtlBelowRetention(_base.WiringRule):
    """E9107: a function's record TTL is shorter than a related DLQ's retention.

    Example:
        >>> RecordTtlBelowRetention().id
        'E9107'
    """

    id = "E9107"
    shortdesc = "Idempotency record TTL shorter than the dead-letter queue's retention"
    description = (
        "SQSJOBS_RECORD_TTL_SECONDS must be at least the MessageRetentionPeriod of every DLQ the function "
        "works with, or a replay of a dead letter can find its job's record expired and run a completed job again."
    )

    def check(self, wiring: _base.Wiring) -> Iterator[tuple[_base.Path, str]]:
        for function in wiring.functions.values():
            if RECORD_TTL_VARIABLE not in function.environment:
                continue
            value = function.environment[RECORD_TTL_VARIABLE]
            ttl = wiring.resolve.number(value)
            if ttl is None:
                continue
            for dlq in wiring.dead_letter_queues_of(function.logical_id):
                if dlq.retention is None or ttl >= dlq.retention:
                    continue
                yield (
                    function.variable_path(RECORD_TTL_VARIABLE),
                    f"{function.logical_id}'s {RECORD_TTL_VARIABLE} ({ttl} s) is shorter than "
                    f"{dlq.logical_id}'s MessageRetentionPeriod ({dlq.retention} s): a letter can outlive its "
                    f"job's idempotency record, and a replay of a job that completed meanwhile runs it again. "
                    f"Fix: set {_target(value)} to at least {dlq.retention}; "
                    f"{dlq.retention + REDRIVE_WINDOW_SECONDS} adds a week to redrive.",
                )


def _target(value: Any) -> str:
    """What to change: the parameter the variable comes from, or the variable itself."""
    if isinstance(value, dict) and set(value) == {"Ref"}:
        return f"parameter {value['Ref']} ({RECORD_TTL_VARIABLE})"
    return RECORD_TTL_VARIABLE
