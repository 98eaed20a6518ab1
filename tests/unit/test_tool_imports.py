"""The app never imports its tools (issue 33, item 3), as Chalice's app never imports its test client.

The runtime is lib/sqsjobs minus the tools (``TOOLS``: the CLI, the console, the local cloud, the shared
validation, the test harness, ``sqsjobs init``). No runtime module may import a tool module, counting the
imports inside functions and under ``TYPE_CHECKING`` (tests/import_support.py with ``type_checking=True``):
a tool may import the runtime, never the other way round. What used to cross the line now goes around it:

- ``app.testing()`` finds ``sqsjobs.testing.use`` through the package's entry point (lib/sqsjobs/_harness.py);
- the tools' errors live with their tools, and ``sqsjobs`` names them by their home module
  (``sqsjobs._errors.HOMES``), imported on first use: this file proves that first use loads the home only.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from import_support import import_graph, imports_of, modules, write_tree

import sqsjobs
from sqsjobs import JobApp, _errors, _harness

#: the tools: the packages of lib/sqsjobs the runtime never imports (as tests/unit/test_layout.py's)
TOOLS = ("cli", "console", "local", "validation", "testing", "scaffold")


def is_tool(module: str) -> bool:
    """True for a module of one of the tools.

    Example:
        >>> is_tool("sqsjobs.cli.status"), is_tool("sqsjobs.testing"), is_tool("sqsjobs.ops._status")
        (True, True, False)
    """
    parts = module.split(".")
    return len(parts) > 1 and parts[0] == "sqsjobs" and parts[1] in TOOLS


def upward_edges(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a tool module by a runtime module, as ``importer -> imported``."""
    return sorted(f"{module} -> {target}" for module, targets in graph.items() if not is_tool(module)
                  for target in targets if is_tool(target))


def test_the_checker_counts_type_checking_and_function_imports_when_asked(tmp_path: Path) -> None:
    write_tree(tmp_path, {
        "sqsjobs/cli/tool.py": "",
        "sqsjobs/core.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sqsjobs.cli import tool\n",
        "sqsjobs/app.py": "def f():\n    from sqsjobs.cli.tool import x\n",
    })
    assert import_graph(tmp_path)["sqsjobs.core"] == set()
    graph = import_graph(tmp_path, type_checking=True)
    assert graph["sqsjobs.core"] == {"sqsjobs.cli.tool"}
    assert upward_edges(graph) == ["sqsjobs.app -> sqsjobs.cli.tool", "sqsjobs.core -> sqsjobs.cli.tool"]


def test_no_runtime_module_imports_a_tool() -> None:
    graph = import_graph(type_checking=True)
    assert len(graph) > 100 and any(is_tool(m) for m in graph), "the checker found too few modules"
    assert upward_edges(graph) == [], "the runtime imports a tool: move the code down, or let the tool plug in"


def test_each_home_of_an_error_holds_errors_only() -> None:
    # A home is what ``sqsjobs.<Error>`` imports: it needs nothing of sqsjobs but the tree's root.
    found = modules()
    for home in sorted(set(_errors.HOMES.values())):
        path, package = found[home]
        assert imports_of(home, path, package, found, type_checking=True) == {"sqsjobs._errors"}, home


PROBE = """
import json, sys
import sqsjobs
for name in sqsjobs.__all__:
    if name not in sqsjobs._errors.HOMES:
        getattr(sqsjobs, name)
before = sorted(m for m in sys.modules if m.startswith("sqsjobs."))
error = sqsjobs.ConsoleError
after = sorted(m for m in sys.modules if m.startswith("sqsjobs.") and m not in before)
print(json.dumps([before, after, error.__module__, error.__qualname__]))
"""


def test_importing_sqsjobs_loads_no_tool_and_a_tool_error_loads_its_home_only() -> None:
    env = {**os.environ, "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    before, after, module, name = json.loads(done.stdout.strip().splitlines()[-1])
    assert "sqsjobs._app" in before and [m for m in before if is_tool(m) or m.startswith("sqsjobs.ops")] == []
    assert after == ["sqsjobs.console", "sqsjobs.console.errors"]
    assert (module, name) == ("sqsjobs", "ConsoleError")  # a traceback names it as users import it


def test_app_testing_runs_the_harness_the_entry_point_names() -> None:
    from sqsjobs.testing import JobTester, use

    assert _harness.harness("testing") is use
    app = JobApp()
    with app.testing() as tester:
        assert isinstance(tester, JobTester)


def test_an_error_of_a_tool_is_the_class_its_tool_raises() -> None:
    from sqsjobs.console.errors import ConsoleError
    from sqsjobs.local.errors import LocalCloudError, PortInUseError

    assert sqsjobs.ConsoleError is ConsoleError and sqsjobs.LocalCloudError is LocalCloudError
    assert issubclass(PortInUseError, sqsjobs.SqsJobsError)
