"""Small helpers for the CLI's rich output: the console, ages, and text that must never be read as markup.

Every command prints through :func:`command_console`: a terminal's width when it writes to one, and no
width at all when its output goes to a pipe or a file (rich would wrap every table at 80
columns there); ``COLUMNS`` wins over both.

Whatever a DLQ letter carries (a job name, an error message, an attribute
value) ends up in a table cell or a note. rich reads ``[...]`` in a string as
markup, and an unmatched ``[/x]`` raises; :func:`plain` escapes such text, so
a letter cannot style, hide or crash the report that shows it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

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
