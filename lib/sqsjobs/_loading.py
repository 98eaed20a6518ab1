"""Finding the application's ``JobApp`` from a ``module:attribute`` spec.

The worker's handler imports its app directly (``from app import app``); the
tools that run beside it — the CLI's ``enqueue``, the local cloud's pytest
fixture, ``make demo`` — find it by name, the way ``uvicorn main:app`` does.
They all use this one function, so the app loads the same way everywhere.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from sqsjobs._app import JobApp
from sqsjobs._broken_code import one_line
from sqsjobs._errors import ConfigurationError
from sqsjobs._settings import ENV_APP

#: where the reference app lives (the template's CodeUri is handlers/)
DEFAULT_APP = "handlers.app:app"
#: what to do about an app that cannot be found
HINT = f"(run from the project root, or pass --app module:attribute / set {ENV_APP})"


def load_app(spec: str = DEFAULT_APP, *, root: str | Path | None = None) -> JobApp:
    """Import ``module:attribute`` (``attribute`` defaults to ``app``) with ``root`` on ``sys.path``.

    ``root`` is the project directory (default: the current one). Anything
    that does not lead to a ``JobApp`` is a one-line ``ConfigurationError`` naming the spec; a module
    that is there but does not import (a syntax error, a missing dependency) names its
    ``file:line`` (``sqsjobs._broken_code``).

    Example:
        >>> load_app("sqsjobs.testing:FakeContext")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: 'sqsjobs.testing:FakeContext' is a type, not a JobApp (run from the \
project root, or pass --app module:attribute / set SQSJOBS_APP)
    """
    module_name, _, attribute = spec.partition(":")
    if not module_name or not all(part.isidentifier() for part in module_name.split(".")):
        raise ConfigurationError(f"{spec!r} is not module:attribute (e.g. {DEFAULT_APP}) {HINT}")
    directory = str(root if root is not None else os.getcwd())
    if directory not in sys.path:
        sys.path.insert(0, directory)
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        if _names_the_app(error, module_name):
            raise ConfigurationError(f"cannot import {module_name!r} for the app {spec!r}: {error} {HINT}") from None
        raise ConfigurationError(f"{one_line(error, [directory])} (importing the app {spec!r})") from None
    except Exception as error:  # a syntax error or anything the app's module raises at import: one line
        raise ConfigurationError(f"{one_line(error, [directory])} (importing the app {spec!r})") from None
    found = getattr(module, attribute or "app", None)
    if found is None:
        raise ConfigurationError(f"{module_name!r} has no attribute {attribute or 'app'!r} (the app {spec!r}) {HINT}")
    if not isinstance(found, JobApp):
        raise ConfigurationError(f"{spec!r} is a {type(found).__name__}, not a JobApp {HINT}")
    return found


def _names_the_app(error: ImportError, module_name: str) -> bool:
    """True when the module not found is the app's module (or a package on its way), not one it imports."""
    missing = getattr(error, "name", None)
    parts = module_name.split(".")
    return isinstance(error, ModuleNotFoundError) and missing in {".".join(parts[:n]) for n in range(1, len(parts) + 1)}
