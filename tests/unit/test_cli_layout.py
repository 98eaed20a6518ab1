"""The CLI's shape (issue 33, item 5): module-level Typer apps with top-level commands, no function over 60 lines.

Each command module declares its commands on its own ``commands`` app at module level (no ``register``
closure holding them), so a command is a function a reader finds, imports and tests by its name; the options
several commands share are lib/sqsjobs/cli/options.py, their output lib/sqsjobs/cli/render.py.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import typer
import typer.main

from sqsjobs.cli import COMMAND_MODULES, build_app

CLI = Path(__file__).resolve().parents[2] / "lib" / "sqsjobs" / "cli"
MAX_FUNCTION_LINES = 60
#: every command and group of ``sqsjobs``, in the order ``--help`` lists them
COMMANDS = ["check", "schema", "jobs", "enqueue", "status", "redrive", "job", "cancel", "unschedule", "group",
            "chain", "console", "init", "local"]
LOCAL_COMMANDS = ["up", "down", "reload", "fire", "env"]


def functions(tree: ast.AST) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)]


def test_no_function_of_the_cli_is_over_the_bound() -> None:
    long = {f"{path.name}:{node.name}": node.end_lineno - node.lineno + 1
            for path in sorted(CLI.glob("*.py")) for node in functions(ast.parse(path.read_text()))
            if node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES}
    assert long == {}


def test_every_command_is_a_module_level_function() -> None:
    for name in COMMAND_MODULES:
        path = CLI / f"{name}.py"
        tree = ast.parse(path.read_text())
        top = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        decorated = {node.name for node in functions(tree)
                     if any(isinstance(d, ast.Call) and isinstance(d.func, ast.Attribute)
                            and d.func.attr in ("command", "callback") for d in node.decorator_list)}
        assert decorated and decorated <= top, f"{path.name}: commands nested in a function: {decorated - top}"
        assert "register" not in top
        assert isinstance(importlib.import_module(f"sqsjobs.cli.{name}").commands, typer.Typer)


def test_the_assembled_cli_has_every_command() -> None:
    root = typer.main.get_command(build_app())
    assert list(root.commands) == COMMANDS
    assert list(root.commands["local"].commands) == LOCAL_COMMANDS


def test_init_s_help_names_every_extra() -> None:
    from sqsjobs.scaffold import Extra

    init = typer.main.get_command(build_app()).commands["init"]
    (extras,) = [param for param in init.params if "--with" in param.opts]
    assert [extra.value for extra in Extra if f"{extra.value} (" not in (extras.help or "")] == []
