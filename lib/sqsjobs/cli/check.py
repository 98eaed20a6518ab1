"""`sqsjobs check TEMPLATE`: cfn-lint with the sqsjobs rules, for any template.

The rules ship with the installed package as ``sqsjobs_rules`` (from
``infra/`` in the repository); this module finds that package's directory and
hands it to cfn-lint with ``--append-rules``, in a child process, so the
``sqsjobs`` runtime never imports cfn-lint or the rules.

Parameter values (``--parameter Name=Value``) reach the rules through the
``SQSJOBS_CHECK_PARAMETERS`` environment variable, because cfn-lint drops its
own ``--parameters`` once it has expanded a SAM template.

Example:
    >>> [c.name for c in commands.registered_commands]
    ['check']
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from sqsjobs._extras import Extra
from sqsjobs.cli.errors import CheckUnavailable
from sqsjobs.cli.exits import EXIT_FAILED, require_extra
from sqsjobs.cli.options import parse_parameters

if TYPE_CHECKING:
    from sqsjobs.validation import Problem

RULES_PACKAGE = "sqsjobs_rules"
PARAMETERS_VARIABLE = "SQSJOBS_CHECK_PARAMETERS"
#: the exit code when cfn-lint passed but the validation found an error (cfn-lint's own code for errors)
VALIDATION_FAILED = 2
# cfn-lint's public entry point, the one its console script calls.
_CFN_LINT = "import sys; from cfnlint.runner import main; sys.argv[0] = 'cfn-lint'; sys.exit(main())"



def rules_directory() -> Path:
    """The directory of the installed ``sqsjobs_rules`` package.

    Example:
        >>> rules_directory().name
        'sqsjobs_rules'
    """
    spec = importlib.util.find_spec(RULES_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CheckUnavailable(
            f"the {RULES_PACKAGE} package is missing: reinstall sqsjobs (pip install 'sqsjobs[check]')"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def lint_command(
    template: Path,
    *,
    margin: int | None = None,
    strict: bool = False,
    output_format: str | None = None,
    regions: list[str] | None = None,
) -> list[str]:
    """The cfn-lint command line that ``sqsjobs check`` runs.

    Example:
        >>> cmd = lint_command(Path("template.yaml"), margin=60)
        >>> cmd[cmd.index("--append-rules") + 1].endswith("sqsjobs_rules"), "E9101:margin=60" in cmd
        (True, True)
    """
    if importlib.util.find_spec("cfnlint") is None:
        raise CheckUnavailable("cfn-lint is not installed: pip install 'sqsjobs[check]'")
    command = [sys.executable, "-c", _CFN_LINT, "--append-rules", str(rules_directory())]
    command += ["--non-zero-exit-code", "warning" if strict else "error"]
    if margin is not None:
        command += ["--configure-rule", f"E9101:margin={margin}"]
    if output_format:
        command += ["--format", output_format]
    if regions:
        command += ["--regions", *regions]
    command += ["--", str(template)]
    return command


def run_check(
    template: Path,
    *,
    parameters: dict[str, str] | None = None,
    margin: int | None = None,
    strict: bool = False,
    output_format: str | None = None,
    regions: list[str] | None = None,
) -> int:
    """Lint ``template`` with the sqsjobs rules; cfn-lint prints its messages itself.

    Returns cfn-lint's exit code: 0 when there are no errors (no warnings
    either, with ``strict``), non-zero otherwise.
    """
    command = lint_command(template, margin=margin, strict=strict, output_format=output_format, regions=regions)
    env = dict(os.environ)
    if parameters:
        env[PARAMETERS_VARIABLE] = json.dumps(parameters)
    else:
        env.pop(PARAMETERS_VARIABLE, None)
    return subprocess.run(command, env=env, check=False).returncode


def validate_template(template: Path, parameters: dict[str, str]) -> list[Problem]:
    """Run the validation ``local up`` runs too (parameters, files, queues, the app) and print one line each.

    The lint rules are left to cfn-lint, which gets the same parameter values.
    """
    if importlib.util.find_spec("samtranslator") is None:
        raise CheckUnavailable("aws-sam-translator is not installed: pip install 'sqsjobs[check]'")
    from sqsjobs.validation import validate

    problems = validate(template, parameters, lint_rules=False)
    for problem in problems:
        typer.echo(f"{problem.severity.value}: {problem.line(str(template))}")
    return problems


commands = typer.Typer()

Template = Annotated[Path, typer.Argument(help="SAM or CloudFormation template to lint.")]
Parameters = Annotated[
    list[str] | None,
    typer.Option("--parameter", "-p",
                 help="Name=Value: check with this parameter value instead of its default (repeatable)."),
]
Margin = Annotated[
    int | None, typer.Option(help="Seconds the visibility timeout must exceed timeout + batching window (30).")
]
Strict = Annotated[bool, typer.Option(help="Exit non-zero on warnings too.")]
OutputFormat = Annotated[str | None, typer.Option("--format", help="cfn-lint output format, e.g. parseable, json.")]
Regions = Annotated[
    list[str] | None, typer.Option(help="Region(s) to validate against (cfn-lint's default otherwise).")
]


@commands.command(name="check")
def check(template: Template, parameter: Parameters = None, margin: Margin = None, strict: Strict = False,
          output_format: OutputFormat = None, region: Regions = None) -> None:
    """Lint TEMPLATE with cfn-lint and the sqsjobs rules (visibility, DLQ, batch failures, alarms)."""
    require_extra(Extra.CHECK, "sqsjobs check")
    if not template.is_file():
        raise typer.BadParameter(f"{template} is not a file", param_hint="TEMPLATE")
    parameters = parse_parameters(parameter or [])
    try:
        problems = validate_template(template, parameters)
        code = run_check(template, parameters=parameters, margin=margin, strict=strict, output_format=output_format,
                         regions=region)
    except CheckUnavailable as exc:
        typer.echo(f"sqsjobs check: {exc}", err=True)
        raise typer.Exit(EXIT_FAILED) from exc
    failed = any(p.is_error for p in problems) or (strict and bool(problems))
    if code == 0 and failed:
        code = VALIDATION_FAILED
    if code == 0:
        typer.echo(f"{template}: no errors from cfn-lint and the sqsjobs rules")
    raise typer.Exit(code)
