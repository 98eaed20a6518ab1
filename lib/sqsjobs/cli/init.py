"""`sqsjobs init DIR`: write a new project (template, one job, worker, tests, configs) into DIR.

Thin over :mod:`sqsjobs.scaffold`: the project passes ``sqsjobs check``,
``sam validate --lint``, its own ``pytest`` and ``sqsjobs local up`` as written,
for every combination of ``--fifo`` and ``--with`` (tests/scaffold proves it), and ``sam build``
makes lean functions of it (docs/deploy.md, "The bundle and cold starts").

Example:
    >>> [c.name for c in commands.registered_commands]
    ['init']
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sqsjobs._errors import ConfigurationError
from sqsjobs.cli.exits import EXIT_USAGE, exit_with

if TYPE_CHECKING:
    from sqsjobs.scaffold.source import SqsjobsSource

#: what the project's tests import from its [dev] extra: pytest, the local cloud (moto), the checks (cfn-lint)
DEV_MODULES = ("pytest", "moto", "cfnlint")

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
                                "its own), durable (a durable function awaiting a job and a group); "
                                "comma-separated."),
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
    from sqsjobs.scaffold import ProjectOptions, default_name, parse_extras, source_of, write
    from sqsjobs.scaffold.source import parse_spec

    with exit_with(EXIT_USAGE, ConfigurationError):
        options = ProjectOptions(name=name or default_name(directory), fifo=fifo, extras=parse_extras(extras),
                                 source=parse_spec(sqsjobs_spec) if sqsjobs_spec else None)
        source = source_of(options)
        written = write(directory, replace(options, source=source))
    for path in written:
        typer.echo(f"wrote {path}")
    if source.note:
        typer.echo(f"\nnote: {source.note}")
    typer.echo(f"\nnext: {next_steps(directory, source)}")


def next_steps(directory: Path, source: SqsjobsSource) -> str:
    """The commands after ``init``, as docs/getting-started.md runs them: in this environment, no second venv.

    The project's tests need its ``[dev]`` extra (pytest, the local cloud, the checks): where this environment
    lacks it, the line installs the project into it first. Another machine follows the project's README.

    Example:
        >>> from sqsjobs.scaffold.source import parse_spec
        >>> line = next_steps(Path("billing-jobs"), parse_spec("sqsjobs==0.1.0"))
        >>> line.startswith("cd billing-jobs && ") and line.endswith("pytest && sqsjobs local up --reload")
        True
    """
    from importlib.util import find_spec

    from sqsjobs.scaffold.source import VENDORED

    steps = [f"cd {directory}"]
    if not all(find_spec(module) for module in DEV_MODULES):
        find_links = f"--find-links {VENDORED} " if source.wheel is not None else ""
        steps.append(f"pip install {find_links}-e '.[dev]'")
    steps += ["sqsjobs check template.yaml", "pytest", "sqsjobs local up --reload"]
    return " && ".join(steps)
