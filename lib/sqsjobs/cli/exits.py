"""Exit codes of the ``sqsjobs`` commands, and the one place errors become them.

0: done; 1: AWS failed or the work did not finish; 2: bad usage or input
(ours: an unknown queue, impossible options); 130: interrupted.

A command that prints tables turns errors into a code with :func:`exit_on_errors` (one red line on its
console); one that prints plain lines uses :func:`exit_with` (``error: ...`` on stderr) or :func:`fail`;
a command that needs an extra starts with :func:`require_extra`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, NoReturn

from sqsjobs._errors import SqsJobsError
from sqsjobs._extras import Extra, install_hint, missing

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

    try:
        yield
    except SqsJobsError as exc:  # options, an unknown queue, no move task to cancel
        console.print(f"[red]error:[/red] {escape(str(exc))}")
        raise typer.Exit(EXIT_USAGE) from exc
    except (BotoCoreError, ClientError) as exc:
        console.print(f"[red]error:[/red] {type(exc).__name__}: {escape(str(exc))}")
        raise typer.Exit(EXIT_FAILED) from exc


def fail(message: object, code: int = EXIT_FAILED) -> NoReturn:
    """``error: message`` on stderr, and exit ``code``.

    Example:
        >>> import typer
        >>> try:
        ...     fail("no local cloud is running", EXIT_FAILED)
        ... except typer.Exit as done:
        ...     done.exit_code
        1
    """
    import typer

    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code) from None


@contextmanager
def exit_with(code: int, *errors: type[Exception]) -> Iterator[None]:
    """On one of ``errors``: ``error: <it>`` on stderr (:func:`fail`), and exit ``code``.

    Example:
        >>> import typer
        >>> from sqsjobs import ConfigurationError
        >>> try:
        ...     with exit_with(EXIT_USAGE, ConfigurationError):
        ...         raise ConfigurationError("no app at handlers.app:app")
        ... except typer.Exit as done:
        ...     done.exit_code
        2
    """
    try:
        yield
    except errors as exc:
        fail(exc, code)


def require_extra(extra: Extra, command: str) -> None:
    """Exit 2 with one line saying how to install ``extra`` when a module of it is missing."""
    module = missing(extra)
    if module is not None:
        import typer

        typer.echo(f"{command}: {install_hint(extra, module)}", err=True)
        raise typer.Exit(EXIT_USAGE)
