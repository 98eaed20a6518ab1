"""Child process: import a function's handler module the way Lambda does and describe its ``JobApp``.

Run by :mod:`sqsjobs.validation.app_consistency` (never by hand) with the
function's ``CodeUri`` as the only import root, so the validating process never
imports user code, and two templates' ``app`` modules never meet::

    python -m sqsjobs.validation.inspect_app handlers worker

It prints one JSON line: ``{"ok": true, "apps": [{"jobs": [...], "schedules": {...}, "settings": {...},
"queues": [...], "enqueues_on_schedule": false}]}`` or ``{"ok": false, "error": "ModuleNotFoundError: ...",
"configuration": false}`` (``configuration``: the module refused its own configuration, a
``ConfigurationError`` Lambda would meet at every cold start). ``settings`` says which of the settings a
function may need have a value, as the app was built with the function's environment
(:mod:`sqsjobs.validation.environment` compares them with what the app needs).
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from sqsjobs._app import JobApp
from sqsjobs.enqueue._routing import QUEUE


def describe(module_name: str) -> dict[str, Any]:
    """The jobs and schedules of every ``JobApp`` the module holds at top level.

    Example:
        >>> describe("sqsjobs.validation.inspect_app")["apps"]
        []
    """
    module = importlib.import_module(module_name)
    apps = {id(v): v for v in vars(module).values() if isinstance(v, JobApp)}
    return {"ok": True, "apps": [_app(app) for app in apps.values()]}


#: the settings a function's environment gives an app (``sqsjobs.validation.environment`` says which it needs)
SETTINGS = ("queue_url", "dlq_url", "table_name", "outbox_table", "schedule_group", "scheduler_role_arn")


def _app(app: Any) -> dict[str, Any]:
    settings = app.settings
    schedules = app.runtime.registry.schedules
    return {
        "jobs": sorted(app.jobs),
        "schedules": {name: spec.expression for name, spec in schedules.items()},
        "settings": {name: bool(getattr(settings, name)) for name in SETTINGS},
        # every named queue a job declares, and whether the app has its URL
        "queues": {queue: bool(settings.queues.get(queue)) for queue in
                   sorted({QUEUE.of(job.options) for job in app.jobs.values()} - {"default"})},
        "enqueues_on_schedule": any(spec.enqueue for spec in schedules.values()),
        # the jobs workflows await (callbacks=True): their function's role must answer them
        "callback_jobs": sorted(name for name, job in app.jobs.items() if job.options.sets("callbacks")),
    }


def main(argv: list[str]) -> None:
    """``inspect_app CODE_DIR MODULE``: print the description (or the import error) as JSON."""
    code_dir, module_name = argv
    sys.path.insert(0, code_dir)
    try:
        answer = describe(module_name)
    except BaseException as error:  # user code at import can raise anything
        from sqsjobs._errors import ConfigurationError

        answer = {"ok": False, "error": f"{type(error).__name__}: {error}".splitlines()[0][:300],
                  "configuration": isinstance(error, ConfigurationError)}
    sys.stdout.write(json.dumps(answer) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
