"""The ``sqsjobs`` command: one sub-module per command group.

Each command module exposes ``register(app)``; this module only assembles
them, so a command's imports (cfn-lint, moto, rich tables) are paid only by
the process that runs the ``sqsjobs`` command, never by a Lambda handler.
"""

from __future__ import annotations

import importlib

import typer

COMMAND_MODULES = ("check", "schema", "enqueue", "status", "redrive", "lifecycle", "groups", "local")


def build_app() -> typer.Typer:
    """Assemble the CLI from the command modules that are present.

    Example:
        >>> build_app().info.name
        'sqsjobs'
    """
    app = typer.Typer(
        name="sqsjobs",
        no_args_is_help=True,
        add_completion=False,
        help="Background jobs on SQS + Lambda: check templates, enqueue, inspect and redrive.",
    )
    for name in COMMAND_MODULES:
        module = importlib.import_module(f"sqsjobs.cli.{name}")
        module.register(app)
    return app


def main() -> None:
    """Console-script entry point (``sqsjobs``)."""
    build_app()()
