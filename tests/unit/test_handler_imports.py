"""What each Lambda handler loads: the worker's path never reaches the operator's side or the tools.

Two views of the same rule, because each misses what the other sees:

- at run time: each handlers/*.py is imported in a fresh interpreter and its
  ``sys.modules`` is read (what a cold start really loads);
- in the source: the import graph (tests/import_support.py, imports inside
  functions included) from each handler, so a lazy import that only the first
  event would run is caught too.

The redrive function is the one that runs part of ``sqsjobs.ops``: exactly the
modules infra/bundle/redrive-ops.txt lists (its bundle holds only those).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from import_support import import_graph, imports_of, reachable

ROOT = Path(__file__).resolve().parents[2]
HANDLERS = ROOT / "handlers"
#: the tools and the operator's side: extras, or (ops) the redrive function's alone
NOT_ON_THE_WORKER_PATH = ("ops", "cli", "console", "local", "validation", "scaffold", "testing")
REDRIVE_OPS = sorted(
    "sqsjobs.ops" if name == "__init__" else f"sqsjobs.ops.{name}"
    for line in (ROOT / "infra" / "bundle" / "redrive-ops.txt").read_text().splitlines()
    if (name := line.split("#", 1)[0].strip()))
HANDLER_NAMES = sorted(path.stem for path in HANDLERS.glob("*.py"))

PROBE = """
import importlib, json, sys
importlib.import_module(sys.argv[1])
print(json.dumps(sorted(name for name in sys.modules if name == "sqsjobs" or name.startswith("sqsjobs."))))
"""


def _in(package: str, module: str) -> bool:
    return module == f"sqsjobs.{package}" or module.startswith(f"sqsjobs.{package}.")


def forbidden(modules: set[str] | list[str]) -> list[str]:
    """The modules of ``modules`` no worker, relay or scheduler may load."""
    return sorted(m for m in modules if any(_in(package, m) for package in NOT_ON_THE_WORKER_PATH))


def loaded_by(handler: str) -> list[str]:
    """The sqsjobs modules a fresh interpreter holds after importing ``handlers/<handler>.py``."""
    # Fake credentials, one region, an endpoint nothing answers on: importing a handler must not call AWS.
    env = {"PATH": os.environ.get("PATH", ""), "PYTHONPATH": str(HANDLERS), "AWS_DEFAULT_REGION": "us-east-1",
           "AWS_ACCESS_KEY_ID": "handler", "AWS_SECRET_ACCESS_KEY": "handler", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", PROBE, handler], cwd=HANDLERS, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    modules: list[str] = json.loads(done.stdout.strip().splitlines()[-1])
    return modules


@cache
def _graph() -> dict[str, set[str]]:
    """lib/sqsjobs's import graph with the handlers added."""
    graph = import_graph()
    handlers = {path.stem: path for path in HANDLERS.glob("*.py")}
    known = set(graph) | set(handlers)
    graph.update({name: imports_of(name, path, False, known) for name, path in handlers.items()})
    return graph


def reached_from(handler: str) -> set[str]:
    """The sqsjobs modules ``handlers/<handler>.py`` can import, at any depth."""
    return {m for m in reachable(_graph(), {handler}) if m.startswith("sqsjobs")}


def test_the_probe_sees_a_loaded_module_and_the_walk_sees_a_lazy_one() -> None:
    # Both views can fail: the redrive handler loads ops at import, and reaches sqsjobs.store._dynamodb lazily.
    assert "sqsjobs.ops._redrive" in loaded_by("redrive")
    assert "sqsjobs.store._dynamodb" in reached_from("redrive")
    assert forbidden(["sqsjobs.ops._status", "sqsjobs.opsx", "sqsjobs.cli", "sqsjobs.worker"]) == [
        "sqsjobs.cli", "sqsjobs.ops._status"]


@pytest.mark.parametrize("handler", [h for h in HANDLER_NAMES if h != "redrive"])
def test_the_worker_relay_scheduler_and_app_load_no_operator_or_tool_module(handler: str) -> None:
    assert forbidden(loaded_by(handler)) == []
    assert forbidden(reached_from(handler)) == []


def test_the_redrive_handler_loads_only_the_redrive_modules_of_ops() -> None:
    loaded = loaded_by("redrive")
    assert [m for m in forbidden(loaded) if not _in("ops", m)] == []
    assert sorted(m for m in loaded if _in("ops", m)) == REDRIVE_OPS
    reached = reached_from("redrive")
    assert [m for m in forbidden(reached) if not _in("ops", m)] == []
    # infra/bundle/redrive-ops.txt is exact: nothing it lacks is reachable, nothing it lists is dead weight
    # (the handler imports sqsjobs.ops itself: its public redrive_handler).
    assert sorted(m for m in reached if _in("ops", m)) == REDRIVE_OPS


def test_every_handler_is_covered() -> None:
    assert {"worker", "outbox_relay", "scheduler", "redrive", "app"} <= set(HANDLER_NAMES)
