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
    if not line.startswith("{"):
        return line
    try:
        record = json.loads(line)
    except ValueError:
        return line
    if not isinstance(record, dict) or "level" not in record or "message" not in record:
        return line
    fields = " ".join(f"{k}={v}" for k, v in record.items() if k not in _QUIET_FIELDS)
    return f"{record['level']} {record['message']} {fields}".rstrip()


def _plain_log(function: str, line: str) -> None:
    sys.stdout.write(f"[{function}] {readable(line)}\n")
    sys.stdout.flush()


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
