"""`local up` prints one line per job outcome, at the verbosity asked for (issue 14), and says what the record says
(issue 30, item 7): no `attempt=None` for a duplicate, and after a redrive the runs in all beside the fresh attempt
(the record counted 3, the line said 1)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsjobs import JobApp, Outcome, PermanentError
from sqsjobs.local.output import DEBUG, OUTCOMES, QUIET, render
from sqsjobs.worker._outcome_log import OUTCOME_MESSAGE


def outcome(kind: str, **extra: object) -> str:
    return json.dumps({"level": "DEBUG", "message": "job outcome", "job": "invoice-email", "key": "invoice-email:42",
                       "message_id": "5d1f6c7e-0b8a", "attempt": 2, "outcome": kind, **extra})


@pytest.mark.parametrize(("line", "shown"), [
    (outcome("succeeded"), "done             invoice-email key=invoice-email:42 message=5d1f6c7e-0b8a attempt=2"),
    (outcome("duplicate", attempt=None), "duplicate        invoice-email key=invoice-email:42 message=5d1f6c7e-0b8a"),
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


class Log:
    """A logger keeping the outcome lines as local up's workers print them (JSON, then rendered)."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def debug(self, message: str, extra: dict[str, Any]) -> None:
        if message == OUTCOME_MESSAGE:
            shown = render(json.dumps({"level": "DEBUG", "message": message, **extra}))
            assert shown is not None
            self.lines.append(shown)

    def __getattr__(self, name: str) -> Any:  # the worker's other log calls
        return lambda *args, **kwargs: None


def test_a_duplicate_prints_no_attempt_and_a_redriven_run_prints_the_runs_in_all() -> None:
    log = Log()
    app = JobApp(logger=log)
    calls = {"runs": 0}

    @app.job("sync", key="sync:{n}", max_attempts=2)
    def sync(n: int) -> None:
        calls["runs"] += 1
        if calls["runs"] == 1:
            raise PermanentError("the partner is down")

    with app.testing() as t:
        t.run(sync.message(n=1), attempt=2)  # its second attempt (the record holds one failed run): dead-lettered
        t.run(sync.message(n=1))  # the letter redriven: a fresh first attempt, the key's third run
        t.run(sync.message(n=1))  # and a copy of it: a duplicate
        status = app.status("sync:1")

    assert status is not None and status.attempts == 3
    assert [o.outcome for o in t.outcomes] == [Outcome.DEAD_LETTERED, Outcome.SUCCEEDED, Outcome.DUPLICATE]
    dead, done, duplicate = log.lines
    assert dead.endswith("attempt=2 PermanentError: the partner is down") and "attempts=" not in dead
    assert done.endswith(" attempt=1 attempts=3")
    assert duplicate.startswith("duplicate ") and "attempt" not in duplicate and "None" not in duplicate
