"""The optional parts of sqsjobs, and the one-line hint when one is used without its extra.

A Lambda function runs the base install only (``pip install sqsjobs``: boto3,
Powertools, pynamodb). The command line, the lint rules and the local cloud
need packages a function never imports, so they come as extras
(``pyproject.toml``) and are left out of the Lambda bundle
(``infra/bundle/Makefile``).

Example:
    >>> missing(Extra.CHECK) is None  # the dev install has every extra
    True
    >>> print(install_hint(Extra.LOCAL, "moto"))
    the local cloud needs the [local] extra (moto is missing): pip install 'sqsjobs[local]'
"""

from __future__ import annotations

import importlib.util
from enum import StrEnum


class Extra(StrEnum):
    """An optional-dependency group of the ``sqsjobs`` distribution (``pip install 'sqsjobs[<name>]'``)."""

    CLI = "cli"
    CHECK = "check"
    LOCAL = "local"
    CONSOLE = "console"


#: what each extra is for, in the hint's words
PURPOSE = {
    Extra.CLI: "the sqsjobs command line",
    Extra.CHECK: "sqsjobs check (cfn-lint)",
    Extra.LOCAL: "the local cloud",
    Extra.CONSOLE: "the sqsjobs console",
}
#: the top-level modules each extra brings that sqsjobs imports
MODULES: dict[Extra, tuple[str, ...]] = {
    # Not click: typer brings what it needs (recent typer no longer installs click at all).
    Extra.CLI: ("typer", "rich"),
    Extra.CHECK: ("cfnlint", "samtranslator"),
    Extra.LOCAL: ("moto", "flask", "samtranslator", "rich"),
    Extra.CONSOLE: ("starlette", "uvicorn", "jinja2"),
}


def missing(extra: Extra) -> str | None:
    """The first module of ``extra`` that is not installed, or None when the extra is there."""
    return next((name for name in MODULES[extra] if importlib.util.find_spec(name) is None), None)


def install_hint(extra: Extra, module: str) -> str:
    """One line: what needs ``extra``, which module is missing, and the command that installs it."""
    return f"{PURPOSE[extra]} needs the [{extra}] extra ({module} is missing): pip install 'sqsjobs[{extra}]'"
