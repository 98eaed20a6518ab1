"""Child process: import a function's handler module the way Lambda does and describe its ``JobApp``.

Run by :mod:`sqsjobs.validation.app_consistency` (never by hand) with the
function's ``CodeUri`` as the only import root, so the validating process never
imports user code, and two templates' ``app`` modules never meet::

    python -m sqsjobs.validation.inspect_app handlers worker

It prints one JSON line: ``{"ok": true, "apps": [{"jobs": [...], "schedules": {...}}]}``
or ``{"ok": false, "error": "ModuleNotFoundError: ..."}``.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any


def describe(module_name: str) -> dict[str, Any]:
    """The jobs and schedules of every ``JobApp`` the module holds at top level.

    Example:
        >>> describe("sqsjobs.validation.inspect_app")["apps"]
        []
    """
    from sqsjobs._app import JobApp

    module = importlib.import_module(module_name)
    apps = {id(v): v for v in vars(module).values() if isinstance(v, JobApp)}
    return {"ok": True, "apps": [
        {"jobs": sorted(app.jobs),
         "schedules": {name: spec.expression for name, spec in app.runtime.registry.schedules.items()}}
        for app in apps.values()
    ]}


def main(argv: list[str]) -> None:
    """``inspect_app CODE_DIR MODULE``: print the description (or the import error) as JSON."""
    code_dir, module_name = argv
    sys.path.insert(0, code_dir)
    try:
        answer = describe(module_name)
    except BaseException as error:  # user code at import can raise anything
        answer = {"ok": False, "error": f"{type(error).__name__}: {error}".splitlines()[0][:300]}
    sys.stdout.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
