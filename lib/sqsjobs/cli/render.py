"""The CLI's output, written once: the console, tables, times and ages, and text never read as markup.

Every command prints through :func:`command_console`: a terminal's width when it writes to one, and no
width at all when its output goes to a pipe or a file (rich would wrap every table at 80
columns there); ``COLUMNS`` wins over both. Its tables are :func:`titled_table` (rows of columns) and
:func:`print_fields` (one record, a field a line).

Whatever a DLQ letter carries (a job name, an error message, an attribute
value) ends up in a table cell or a note. rich reads ``[...]`` in a string as
markup, and an unmatched ``[/x]`` raises; :func:`plain` escapes such text, so
a letter cannot style, hide or crash the report that shows it.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

#: the width of a console that writes to a pipe or a file: wide enough that no table wraps
UNWRAPPED_WIDTH = 10_000


def command_console(*, stderr: bool = False, **options: Any) -> Console:
    """A rich console for a command's output, on stdout (or stderr): the full width of what it writes to.

    Example:
        >>> import io
        >>> command_console(file=io.StringIO()).width
        10000
    """
    from rich.console import Console

    made = Console(stderr=stderr, **options)
    if "width" not in options and not made.is_terminal and not os.environ.get("COLUMNS"):
        made = Console(stderr=stderr, width=UNWRAPPED_WIDTH, **options)
    return made


def format_age(seconds: float | None) -> str:
    """A short human age.

    Example:
        >>> format_age(3725.0)
        '1h02m'
    """
    if seconds is None:
        return "?"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{(s % 3600) // 60:02d}m"
    return f"{s // 86400}d{(s % 86400) // 3600:02d}h"


def plain(text: str) -> str:
    """``text`` escaped for rich markup: shown as written.

    Example:
        >>> plain("[/red] job [bold]")
        '\\\\[/red] job \\\\[bold]'
    """
    from rich.markup import escape

    return escape(text)


def reason_text(reason: str, verified: bool) -> str:
    """A dead letter's reason; a claim no idempotency table proved says so (``status``, ``redrive`` without --table).

    Example:
        >>> reason_text("permanent", True), reason_text("permanent", False)
        ('permanent', 'permanent (unverified)')
    """
    return plain(reason) if verified else f"{plain(reason)} (unverified)"


def iso_time(epoch: float | None) -> str | None:
    """An epoch as ISO 8601 in UTC, to the second (a record's times); None stays None.

    Example:
        >>> iso_time(1767225600.0), iso_time(None)
        ('2026-01-01T00:00:00+00:00', None)
    """
    return None if epoch is None else datetime.fromtimestamp(epoch, UTC).isoformat(timespec="seconds")


def short_time(epoch: float | None) -> str:
    """An epoch as ``YYYY-MM-DD HH:MM:SS`` in UTC (a table's cell); ``-`` for none.

    Example:
        >>> short_time(1767225600.0), short_time(None)
        ('2026-01-01 00:00:00', '-')
    """
    return "-" if epoch is None else datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")


def titled_table(title: str, columns: Iterable[str], *, right: Collection[str] = (), fold: bool = False) -> Table:
    """A rich table of ``columns``: those in ``right`` right-justified, every cell folded (not cut) with ``fold``.

    Example:
        >>> [c.justify for c in titled_table("queues", ("queue", "visible"), right={"visible"}).columns]
        ['left', 'right']
    """
    from rich.table import Table

    table = Table(title=title)
    for name in columns:
        table.add_column(name, justify="right" if name in right else "left", overflow="fold" if fold else "ellipsis")
    return table


def print_fields(console: Console, title: str, rows: Iterable[tuple[str, Any]]) -> None:
    """One record as a two-column table, a field a line (``-`` for a value of None).

    Example:
        >>> import io
        >>> from rich.console import Console
        >>> console = Console(width=60, record=True, file=io.StringIO())
        >>> print_fields(console, "job greet:7", [("state", "succeeded"), ("last error", None)])
        >>> [line.split() for line in console.export_text().splitlines()[2:4]]
        [['│', 'state', '│', 'succeeded', '│'], ['│', 'last', 'error', '│', '-', '│']]
    """
    from rich.table import Table

    table = Table(title=title, show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in rows:
        table.add_row(name, "-" if value is None else str(value))
    console.print(table)
