"""Exit codes of the ``sqsjobs`` commands, and the one place errors become them.

0: done; 1: AWS failed or the work did not finish; 2: bad usage or input
(ours: an unknown queue, impossible options); 130: interrupted.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


@contextmanager
def exit_on_errors(console: Console) -> Iterator[None]:
    """Print an sqsjobs or botocore error in one line and exit with its code.

    Example:
        >>> import typer
        >>> from rich.console import Console
        >>> from sqsjobs import StatusError
        >>> try:
        ...     with exit_on_errors(Console(quiet=True)):
        ...         raise StatusError("which queue?")
        ... except typer.Exit as done:
        ...     done.exit_code
        2
    """
    import typer  # here, not at the top: ``sqsjobs.cli.main`` reads the codes before typer is known to exist
    from botocore.exceptions import BotoCoreError, ClientError
    from rich.markup import escape

    from sqsjobs._errors import SqsJobsError

    try:
        yield
    except SqsJobsError as exc:  # options, an unknown queue, no move task to cancel
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_USAGE) from exc
    except (BotoCoreError, ClientError) as exc:
        console.print(f"[red]error:[/red] {type(exc).__name__}: {escape(str(exc))}")
        raise typer.Exit(EXIT_FAILED) from exc
