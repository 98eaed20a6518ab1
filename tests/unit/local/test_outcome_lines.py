"""`local up` prints one line per job outcome, at the verbosity asked for (issue 14)."""

from __future__ import annotations

import json

import pytest

from sqsjobs.local.output import DEBUG, OUTCOMES, QUIET, render


def outcome(kind: str, **extra: object) -> str:
    return json.dumps({"level": "DEBUG", "message": "job outcome", "job": "invoice-email", "key": "invoice-email:42",
                       "message_id": "5d1f6c7e-0b8a", "attempt": 2, "outcome": kind, **extra})


@pytest.mark.parametrize(("line", "shown"), [
    (outcome("succeeded"), "done             invoice-email key=invoice-email:42 message=5d1f6c7e-0b8a attempt=2"),
    (outcome("duplicate"), "duplicate        invoice-email key=invoice-email:42 message=5d1f6c7e-0b8a attempt=2"),
    (outcome("retry", delay=12.5, error="TimeoutError: slow"),
     "retry in 12.5s   invoice-email key=invoice-email:42 message=5d1f6c7e-0b8a attempt=2 TimeoutError: slow"),
    (outcome("dead_lettered", reason="permanent", error="PermanentError: gone"),
     "dead-lettered (permanent) invoice-email key=invoice-email:42 message=5d1f6c7e-0b8a attempt=2 "
     "PermanentError: gone"),
])
def test_each_outcome_is_one_line_with_job_key_and_message_id(line: str, shown: str) -> None:
    assert render(line, OUTCOMES) == shown
    assert render(line, QUIET) is None


def test_verbosity_decides_the_other_lines() -> None:
    debug = json.dumps({"level": "DEBUG", "message": "cache warm", "timestamp": "t"})
    info = json.dumps({"level": "INFO", "message": "welcomed", "user_id": 7})
    error = json.dumps({"level": "ERROR", "message": "DLQ send failed"})
    assert [render(line, OUTCOMES) for line in (debug, info, error, "printed")] == [
        None, "INFO welcomed user_id=7", "ERROR DLQ send failed", "printed"]
    assert render(debug, DEBUG) == "DEBUG cache warm"
    assert [render(line, QUIET) for line in (info, error, "printed")] == [None, "ERROR DLQ send failed", None]
