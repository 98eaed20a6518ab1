"""The project name ``sqsjobs init`` accepts: one name that is a distribution, a module and a stack at once.

The name is written into ``pyproject.toml`` (the distribution ``pip`` installs),
``samconfig.toml`` (the CloudFormation stack) and the template (the service and
metrics namespace), and ``name.replace("-", "_")`` is the Python module a
package of the project would take. So it must be, all at once:

- a normalized distribution name (PEP 503/PEP 508): lower-case letters and
  digits in words joined by single ``-``, so ``pip`` reads back the same name;
- a stack name (CloudFormation: a letter first, letters, digits and ``-``);
- a Python identifier once ``-`` is ``_``, and not a keyword (``class``);
- at most 63 characters (the service name and the resource names derived from
  the stack stay within their limits);
- not the name of a distribution the project installs (``sqsjobs``, ``boto3``,
  ``pytest``...): ``pip`` would take the project for that dependency.

A refused name gets one line saying what is allowed, with a name that is.

Example:
    >>> check_name("billing-jobs")
    'billing-jobs'
    >>> check_name("jobs-")
    Traceback (most recent call last):
    ...
    sqsjobs.ConfigurationError: project name 'jobs-' is not allowed: ... try --name jobs
    >>> suggest_name("My_Jobs v2"), suggest_name("class"), suggest_name("42")
    ('my-jobs-v2', 'class-jobs', 'jobs-42')
"""

from __future__ import annotations

import keyword
import re
from functools import lru_cache
from importlib import metadata

from sqsjobs import ConfigurationError

#: lower-case words of letters and digits joined by single '-', a letter first
PROJECT_NAME = re.compile(r"[a-z][a-z0-9]*(?:-[a-z0-9]+)*")
MAX_NAME = 63
#: what a refusal says is allowed
RULE = (f"a name is lower-case words of letters and digits joined by single '-', a letter first, at most {MAX_NAME} "
        "characters (it names the Python project, the stack and the service)")
#: the distributions every project installs (its dependencies' own are found in the installed metadata)
_ROOTS = ("sqsjobs", "pytest")


def check_name(name: str) -> str:
    """``name`` if a project can carry it, else a one-line ``ConfigurationError`` with a name that can."""
    problem = _problem(name)
    if problem is None:
        return name
    raise ConfigurationError(f"project name {name!r} is not allowed: {problem}; {RULE}; try --name "
                             f"{suggest_name(name)}")


def is_allowed(name: str) -> bool:
    """Whether ``check_name`` accepts ``name``."""
    return _problem(name) is None


def suggest_name(text: str) -> str:
    """An allowed name close to ``text``: lower-cased, other characters as ``-``, a letter first.

    Example:
        >>> suggest_name("jobs--"), suggest_name("sqsjobs"), suggest_name("")
        ('jobs', 'sqsjobs-app', 'jobs')
    """
    name = re.sub(r"[^a-z0-9]+", "-", str(text).lower()).strip("-")
    if not name:
        return "jobs"
    if not name[0].isalpha():
        name = f"jobs-{name}"
    name = name[:MAX_NAME].rstrip("-")
    if keyword.iskeyword(name.replace("-", "_")):
        return f"{name}-jobs"
    if name in installed_names():
        return f"{name}-app"[:MAX_NAME].rstrip("-")
    return name


def _problem(name: object) -> str | None:
    if not isinstance(name, str) or not name:
        return "it is empty"
    if len(name) > MAX_NAME:
        return f"it has {len(name)} characters"
    if not PROJECT_NAME.fullmatch(name):
        return _shape_problem(name)
    if keyword.iskeyword(name.replace("-", "_")):
        return f"{name.replace('-', '_')} is a Python keyword"
    if name in installed_names():
        return f"the project installs a package of that name ({name})"
    return None


def _shape_problem(name: str) -> str:
    other = sorted({c for c in name if not (c.isascii() and (c.islower() or c.isdigit() or c == "-"))})
    if other:
        return "it has " + ", ".join(repr(c) for c in other[:3])
    if not name[0].isalpha():
        return "it does not start with a letter"
    if name.endswith("-"):
        return "it ends with '-'"
    return "it has '--'"


@lru_cache(maxsize=1)
def installed_names() -> frozenset[str]:
    """The normalized names of sqsjobs, pytest and every distribution they need, as installed here.

    Example:
        >>> {"sqsjobs", "boto3", "pytest"} <= installed_names()
        True
    """
    seen: set[str] = set()
    pending = list(_ROOTS)
    while pending:
        name = _normal(pending.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            requirements = metadata.requires(name) or []
        except metadata.PackageNotFoundError:
            continue
        for requirement in requirements:
            # "moto[server]>=5.0; extra == 'local'": every extra counts (the project's dev extra takes several)
            match = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)", requirement)
            if match:
                pending.append(match.group(1))
    return frozenset(seen)


def _normal(name: str) -> str:
    """PEP 503's normalized form."""
    return re.sub(r"[-_.]+", "-", name).lower()
