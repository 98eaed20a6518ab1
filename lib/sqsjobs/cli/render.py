"""Small text helpers for the CLI's rich output: ages, and text that must never be read as markup.

Whatever a DLQ letter carries (a job name, an error message, an attribute
value) ends up in a table cell or a note. rich reads ``[...]`` in a string as
markup, and an unmatched ``[/x]`` raises; :func:`plain` escapes such text, so
a letter cannot style, hide or crash the report that shows it.
"""

from __future__ import annotations


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
