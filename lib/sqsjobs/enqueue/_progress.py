"""A progress bar for long sends (``enqueue_many``, ``sqsjobs enqueue --from``), on a terminal only.

On a terminal a rich bar counts the messages SQS accepted; anywhere else
(Lambda, CI, a pipe) nothing is printed and rich is not even imported.

Example:
    >>> with progress_bar(3, "enqueueing", show=False) as advance:
    ...     advance(2); advance(1)
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def progress_bar(total: int, label: str, *, show: bool | None = None) -> Iterator[Callable[[int], None]]:
    """Yield ``advance(n)``; draw a bar on standard error when ``show`` (default: when it is a terminal)."""
    if show is None:
        show = total > 0 and sys.stderr.isatty()
    if not show:
        yield _ignore
        return
    try:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    except ImportError:  # rich is the CLI's; a runtime-only install has no bar
        yield _ignore
        return
    from rich.console import Console

    with Progress(TextColumn(f"[bold]{label}[/bold]"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=False) as progress:
        task = progress.add_task(label, total=total)
        yield lambda n: progress.advance(task, n)


def _ignore(n: int) -> None:
    """No bar: nothing to do."""
