"""A problem the validation found: where, what, and the one edit that fixes it.

Example:
    >>> Problem(where="parameter NoSuchParam", message="the template declares no such parameter",
    ...         fix="remove -p NoSuchParam").line("template.yaml")
    'template.yaml: parameter NoSuchParam: the template declares no such parameter; fix: remove -p NoSuchParam'
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Severity(StrEnum):
    """An error stops ``check`` (non-zero exit) and ``local up``; a warning is printed and passes."""

    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, kw_only=True)
class Problem:
    """One finding, printed as one line."""

    where: str
    message: str
    fix: str = ""
    severity: Severity = Severity.ERROR
    #: the lint rule's id, for problems found by the sqsjobs cfn-lint rules
    rule: str = ""

    def line(self, template: str) -> str:
        """``template: where: message; fix: ...`` (the rule's own text already says its fix)."""
        rule = f"{self.rule} " if self.rule else ""
        fix = f"; fix: {self.fix}" if self.fix else ""
        return f"{template}: {rule}{self.where}: {self.message}{fix}"

    @property
    def is_error(self) -> bool:
        """True for an error (it fails the command)."""
        return self.severity is Severity.ERROR
