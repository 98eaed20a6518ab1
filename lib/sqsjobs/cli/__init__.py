"""The ``sqsjobs`` command: one sub-module per command group.

Each command module declares its commands at module level on its own Typer
app, ``commands``; this module only assembles them, so a command's imports
(cfn-lint, moto, rich tables) are paid only by the process that runs the
``sqsjobs`` command, never by a Lambda handler. The options several commands
share are :mod:`~sqsjobs.cli.options`, their output :mod:`~sqsjobs.cli.render`,
their exit codes :mod:`~sqsjobs.cli.exits`.

The command line is an extra (``pip install 'sqsjobs[cli]'``): this module
imports typer only inside ``build_app``, so ``main`` can say so in one line
when it is missing.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING

from sqsjobs._extras import Extra, install_hint, missing
from sqsjobs.cli.exits import EXIT_USAGE

if TYPE_CHECKING:
    import typer

COMMAND_MODULES = (
    "check", "schema", "jobs", "enqueue", "status", "redrive", "lifecycle", "groups", "console", "local", "init",
)


def build_app() -> typer.Typer:
    """Assemble the CLI from the command modules that are present.

    Example:
        >>> build_app().info.name
        'sqsjobs'
    """
    import typer

    app = typer.Typer(
        name="sqsjobs",
        no_args_is_help=True,
        add_completion=False,
        help="Background jobs on SQS + Lambda: check templates, enqueue, inspect and redrive.",
    )
    for name in COMMAND_MODULES:
        commands: typer.Typer = importlib.import_module(f"sqsjobs.cli.{name}").commands
        app.registered_commands += commands.registered_commands
        app.registered_groups += commands.registered_groups
    return app


def main() -> None:
    """Console-script entry point (``sqsjobs``); without the [cli] extra, a one-line hint and exit 2."""
    module = missing(Extra.CLI)
    if module is not None:
        print(f"sqsjobs: {install_hint(Extra.CLI, module)}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    build_app()()
