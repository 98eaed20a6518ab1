"""Where the local cloud's messages and the functions' logs go.

One small value passed around instead of ``print`` calls everywhere, so the
CLI prints coloured lines, the demo routes logs to its live view and the
pytest plugin keeps the terminal quiet.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from sqsjobs.worker._outcome_log import OUTCOME_MESSAGE

EventSink = Callable[[str, str], None]
"""(level, text): level is one of info, warn, error, page, alarm-warn, ok."""

LogSink = Callable[[str, str], None]
"""(function logical id, one line the function printed)."""

_STYLES = {
    "info": "cyan",
    "warn": "yellow",
    "error": "bold red",
    "page": "bold white on red",
    "alarm-warn": "bold black on yellow",
    "ok": "green",
}


def _rich_event(level: str, text: str) -> None:
    from rich.console import Console
    from rich.markup import escape

    label = {"page": "PAGE", "alarm-warn": "WARN"}.get(level, level)
    Console(stderr=True, highlight=False, soft_wrap=True).print(
        f"[{_STYLES.get(level, 'white')}]{label:>5}[/] {escape(text)}"
    )


_QUIET_FIELDS = frozenset({"level", "message", "timestamp", "location", "service", "xray_trace_id",
                           "function_name", "function_memory_size", "function_arn", "function_request_id",
                           "cold_start"})


def readable(line: str) -> str:
    """A Powertools JSON log line as ``LEVEL message key=value ...``; any other line unchanged.

    Example:
        >>> readable('{"level":"WARNING","message":"job failed","timestamp":"t","job":"invoice-email","attempt":2}')
        'WARNING job failed job=invoice-email attempt=2'
        >>> readable("plain text")
        'plain text'
    """
    record = _record(line)
    if record is None or "level" not in record or "message" not in record:
        return line
    fields = " ".join(f"{k}={v}" for k, v in record.items() if k not in _QUIET_FIELDS)
    return f"{record['level']} {record['message']} {fields}".rstrip()


#: how an outcome reads in ``local up`` (the worker's ``Outcome`` values)
OUTCOME_LABELS = {"succeeded": "done", "duplicate": "duplicate", "retry": "retry", "dead_lettered": "dead-lettered",
                  "unstarted": "returned", "group_blocked": "waiting"}
#: what ``-q`` / nothing / ``-v`` show: errors only; outcomes and INFO+; everything (DEBUG too)
QUIET, OUTCOMES, DEBUG = -1, 0, 1
_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


def outcome_line(record: dict[str, object]) -> str:
    """One line per job outcome: what happened, the job, its key and SQS message id, its attempt, and why.

    Example:
        >>> outcome_line({"outcome": "retry", "job": "invoice-email", "key": "invoice-email:42",
        ...               "message_id": "5d1f", "attempt": 2, "delay": 12.5, "error": "TimeoutError: slow"})
        'retry in 12.5s   invoice-email key=invoice-email:42 message=5d1f attempt=2 TimeoutError: slow'
        >>> outcome_line({"outcome": "duplicate", "job": "invoice-email", "key": "invoice-email:42",
        ...               "message_id": "77ab", "attempt": None})
        'duplicate        invoice-email key=invoice-email:42 message=77ab'
        >>> outcome_line({"outcome": "succeeded", "job": "invoice-email", "key": "invoice-email:42",
        ...               "message_id": "9c3e", "attempt": 1, "attempts": 3})  # redriven after 2 failed runs
        'done             invoice-email key=invoice-email:42 message=9c3e attempt=1 attempts=3'
    """
    outcome = str(record.get("outcome"))
    label = OUTCOME_LABELS.get(outcome, outcome)
    if outcome == "retry" and record.get("delay") is not None:
        label = f"retry in {record['delay']}s"
    elif outcome == "dead_lettered" and record.get("reason"):
        label = f"dead-lettered ({record['reason']})"
    text = f"{label:<16} {record.get('job')} key={record.get('key')} message={record.get('message_id')}"
    if record.get("attempt") is not None:  # a duplicate, a cancelled key...: no attempt ran
        text += f" attempt={record['attempt']}"
    if record.get("attempts") is not None:  # the key's runs in all (attempts start again after a dead letter)
        text += f" attempts={record['attempts']}"
    if outcome != "succeeded" and outcome != "duplicate" and record.get("error"):
        text += f" {record['error']}"
    return text


def render(line: str, verbosity: int = OUTCOMES) -> str | None:
    """What ``local up`` prints for one line a function wrote at ``verbosity`` (None: nothing).

    Example:
        >>> render('{"level": "DEBUG", "message": "job outcome", "outcome": "succeeded", "job": "a", '
        ...        '"key": "a:1", "message_id": "m-1", "attempt": 1}')
        'done             a key=a:1 message=m-1 attempt=1'
        >>> render('{"level": "DEBUG", "message": "cache warm"}') is None, render("printed", QUIET) is None
        (True, True)
    """
    record = _record(line)
    if record is not None and record.get("message") == OUTCOME_MESSAGE and "outcome" in record:
        return outcome_line(record) if verbosity >= OUTCOMES else None
    level = _LEVELS.get(str(record.get("level", "")).upper(), 20) if record is not None else 20
    if verbosity <= QUIET:
        return readable(line) if level >= _LEVELS["ERROR"] else None
    if level < _LEVELS["INFO"] and verbosity < DEBUG:
        return None
    return readable(line)


def terminal_log(verbosity: int = OUTCOMES) -> LogSink:
    """A log sink printing ``[Function] line`` to standard output, filtered by ``verbosity``."""

    def log(function: str, line: str) -> None:
        shown = render(line, verbosity)
        if shown is not None:
            sys.stdout.write(f"[{function}] {shown}\n")
            sys.stdout.flush()

    return log


def _record(line: str) -> dict[str, object] | None:
    if not line.startswith("{"):
        return None
    try:
        record = json.loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


_plain_log = terminal_log(OUTCOMES)


@dataclass(frozen=True)
class Output:
    """Sinks for local cloud events and function log lines.

    Example:
        >>> lines = []
        >>> out = Output(event=lambda level, text: lines.append((level, text)), log=lambda f, l: None)
        >>> out.event("info", "hello")
        >>> lines
        [('info', 'hello')]
    """

    event: EventSink = field(default=_rich_event)
    log: LogSink = field(default=_plain_log)
    show_emf: bool = False

    @classmethod
    def quiet(cls, keep: list[tuple[str, str]] | None = None) -> Output:
        """Collect events into ``keep`` (when given) and drop function logs."""
        sink = keep if keep is not None else []
        return cls(event=lambda level, text: sink.append((level, text)), log=lambda function, line: None)
