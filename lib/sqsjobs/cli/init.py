"""`sqsjobs init DIR`: write a new project (template, one job, worker, tests, configs) into DIR.

Thin over :mod:`sqsjobs.scaffold`: the project passes ``sqsjobs check``,
``sam validate --lint``, its own ``pytest`` and ``sqsjobs local up`` as written,
for every combination of ``--fifo`` and ``--with`` (tests/scaffold proves it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sqsjobs.cli.exits import EXIT_USAGE


def register(app: typer.Typer) -> None:
    """Add ``sqsjobs init`` to ``app``.

    Example:
        >>> app = typer.Typer()
        >>> register(app)
        >>> [c.name for c in app.registered_commands]
        ['init']
    """

    @app.command("init")
    def init_command(
        directory: Annotated[Path, typer.Argument(help="Where to write the project (new or empty).")],
        name: Annotated[
            str | None, typer.Option(help="Project, stack and service name (default: from DIR), e.g. billing-jobs.")
        ] = None,
        fifo: Annotated[bool, typer.Option("--fifo", help="A FIFO jobs queue (per-group order).")] = False,
        extras: Annotated[
            str | None,
            typer.Option("--with", help="Also: outbox (transactional enqueue), chunked (page-by-page job), "
                                        "scheduled (a daily job), delays (a job two days later), groups (a job "
                                        "group and its callback), limits (a rate limit), critical (a queue of "
                                        "its own); comma-separated."),
        ] = None,
        sqsjobs_spec: Annotated[
            str | None,
            typer.Option("--sqsjobs-spec", help="Where the project installs sqsjobs from (default: where this "
                                                "sqsjobs came from): 'sqsjobs==0.1.0' (an index), "
                                                "'sqsjobs @ git+https://...' (VCS), or a wheel's path."),
        ] = None,
    ) -> None:
        """Write a new sqsjobs project into DIRECTORY: template.yaml, handlers/, tests/, configs, README."""
        from sqsjobs._errors import ConfigurationError
        from sqsjobs.scaffold import ProjectOptions, default_name, parse_extras, write
        from sqsjobs.scaffold.source import parse_spec

        try:
            options = ProjectOptions(name=name or default_name(directory), fifo=fifo, extras=parse_extras(extras),
                                     source=parse_spec(sqsjobs_spec) if sqsjobs_spec else None)
            written = write(directory, options)
        except ConfigurationError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_USAGE) from None
        for path in written:
            typer.echo(f"wrote {path}")
        typer.echo(f"\nnext: cd {directory} && python3 -m venv .venv && . .venv/bin/activate && "
                   "pip install -e '.[dev]' && pytest && sqsjobs local up --reload\n"
                   "(docs/getting-started.md walks through it)")
