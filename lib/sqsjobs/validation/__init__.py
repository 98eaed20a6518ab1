"""One validation of a template, its parameter values and the app it runs, for ``sqsjobs check`` and ``local up``.

Both commands call :func:`validate` and print :meth:`Problem.line` for each
finding: parameters (unknown, wrong type, out of bounds, and, for ``local up``,
missing), the files the template points at (``CodeUri``, the handler module,
a ``makefile`` build's ``ContextPath``), the clients a function's code makes against the botocore
services its trimmed bundle keeps (``services``), a template no queue feeds, the app's
jobs against the template's schedules and filters, each function's environment
against what its app needs (``environment``: a missing or misspelled variable), and (``lint_rules=True``)
the sqsjobs lint rules with the parameter values applied. ``sqsjobs check``
leaves the rules to its cfn-lint run, which applies the same values.

Example:
    >>> import pathlib, tempfile
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "template.yaml").write_text("Resources:\\n  Q:\\n    Type: AWS::SQS::Queue\\n")
    >>> [p.where for p in validate(folder / "template.yaml", {"Nope": "1"})]
    ['parameter Nope', 'Resources']
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sqsjobs.validation.problems import Problem, Severity

__all__ = ["Problem", "Severity", "load_document", "validate"]


def load_document(template: Path) -> dict[str, Any]:
    """The template as a dict (CloudFormation's short tags understood); ``ValueError`` saying why not."""
    from samtranslator.yaml_helper import yaml_parse

    try:
        text = template.read_text()
    except OSError as error:
        raise ValueError(f"cannot read it: {error.strerror or error}") from None
    try:
        document = yaml_parse(text)
    except Exception as error:  # the YAML/JSON parsers raise many kinds
        raise ValueError(f"not valid YAML or JSON: {str(error).splitlines()[0]}") from None
    if not isinstance(document, dict) or not isinstance(document.get("Resources"), dict):
        raise ValueError("it has no Resources section")
    return document


def validate(template: Path, parameters: Mapping[str, str], *, require_values: bool = False,
             lint_rules: bool = False, app_checks: bool = True) -> list[Problem]:
    """Every problem found, errors and warnings, in the order a reader fixes them."""
    from sqsjobs.validation.layout import check_layout
    from sqsjobs.validation.parameters import check_parameters
    from sqsjobs.validation.services import check_services
    from sqsjobs.validation.wiring import check_queues, check_rules, wiring

    try:
        document = load_document(template)
    except ValueError as error:
        return [Problem(where="template", message=str(error), fix="fix the file, or pass the right template")]
    declared = document.get("Parameters") or {}
    problems = check_parameters(declared if isinstance(declared, dict) else {}, parameters,
                                require_values=require_values)
    # Values the template would refuse resolve to nothing sensible: check the rest with the defaults.
    bad = {p.where.removeprefix("parameter ") for p in problems}
    usable = {name: value for name, value in parameters.items() if name not in bad}
    base = template.resolve().parent
    problems += check_layout(document, base)
    problems += check_services(document, base)
    problems += check_queues(document, usable)
    if lint_rules:
        problems += check_rules(document, usable)
    if app_checks:
        from sqsjobs.validation.app_consistency import check_app_consistency

        problems += check_app_consistency(document, base, wiring(document, usable))
    return problems
