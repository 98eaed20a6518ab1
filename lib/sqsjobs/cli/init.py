"""`sqsjobs init DIR`: write a new project (template, one job, worker, tests, configs) into DIR.

Thin over :mod:`sqsjobs.scaffold`: the project passes ``sqsjobs check``,
``sam validate --lint``, its own ``pytest`` and ``sqsjobs local up`` as written,
for every combination of ``--fifo`` and ``--with`` (tests/scaffold proves it).

Example:
    >>> [c.name for c in commands.registered_commands]
    ['init']
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sqsjobs._errors import ConfigurationError
from sqsjobs.cli.exits import EXIT_USAGE, exit_with

commands = typer.Typer()

Directory = Annotated[Path, typer.Argument(help="Where to write the project (new or empty).")]
Name = Annotated[
    str | None, typer.Option(help="Project, stack and service name (default: from DIR), e.g. billing-jobs.")
]
Fifo = Annotated[bool, typer.Option("--fifo", help="A FIFO jobs queue (per-group order).")]
Extras = Annotated[
    str | None,
    typer.Option("--with", help="Also: outbox (transactional enqueue), chunked (page-by-page job), "
                                "scheduled (a daily job), delays (a job two days later), groups (a job "
                                "group and its callback), limits (a rate limit), critical (a queue of "
                                "its own); comma-separated."),
]
SqsjobsSpec = Annotated[
    str | None,
    typer.Option("--sqsjobs-spec", help="Where the project installs sqsjobs from (default: where this "
                                        "sqsjobs came from): 'sqsjobs==0.1.0' (an index), "
                                        "'sqsjobs @ git+https://...' (VCS), or a wheel's path."),
]


@commands.command("init")
def init_command(directory: Directory, name: Name = None, fifo: Fifo = False, extras: Extras = None,
                 sqsjobs_spec: SqsjobsSpec = None) -> None:
    """Write a new sqsjobs project into DIRECTORY: template.yaml, handlers/, tests/, configs, README."""
    from sqsjobs.scaffold import ProjectOptions, default_name, parse_extras, write
    from sqsjobs.scaffold.source import parse_spec

    with exit_with(EXIT_USAGE, ConfigurationError):
        options = ProjectOptions(name=name or default_name(directory), fifo=fifo, extras=parse_extras(extras),
                                 source=parse_spec(sqsjobs_spec) if sqsjobs_spec else None)
        written = write(directory, options)
    for path in written:
        typer.echo(f"wrote {path}")
    typer.echo(f"\nnext: cd {directory} && python3 -m venv .venv && . .venv/bin/activate && "
               "pip install -e '.[dev]' && pytest && sqsjobs local up --reload\n"
               "(docs/getting-started.md walks through it)")
