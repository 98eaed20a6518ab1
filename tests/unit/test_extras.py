"""Installed without an extra, each optional part says in one line how to install it, and exits 2."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sqsjobs._extras import MODULES, Extra, install_hint, missing

# Runs the console script's entry point with some modules made unimportable, as if never installed
# (a None entry in sys.modules makes both `import` and importlib.util.find_spec fail for that name).
RUN_WITHOUT = """
import sys
for name in sys.argv[1].split(","):
    sys.modules[name] = None
sys.argv = ["sqsjobs", *sys.argv[2:]]
from sqsjobs.cli import main
main()
"""


def sqsjobs_without(modules: tuple[str, ...], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", RUN_WITHOUT, ",".join(modules), *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("module", MODULES[Extra.CLI])
def test_the_command_line_without_its_extra_prints_one_line_and_exits_2(module: str) -> None:
    done = sqsjobs_without((module,), "status", "--queue", "jobs")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"sqsjobs: the sqsjobs command line needs the [cli] extra ({module} is missing): pip install 'sqsjobs[cli]'"
    ]
    assert done.stdout == ""


def test_local_commands_without_the_local_extra_say_so_and_exit_2() -> None:
    done = sqsjobs_without(("moto",), "local", "up")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "sqsjobs local: the local cloud needs the [local] extra (moto is missing): pip install 'sqsjobs[local]'"
    )


@pytest.mark.parametrize(("extra", "module", "command"), [
    # no queue given either: the missing extra is what it says
    *((Extra.CONSOLE, module, ("console",)) for module in ("starlette", "uvicorn", "jinja2")),
    *((Extra.CHECK, module, ("check", "template.yaml")) for module in ("cfnlint", "samtranslator")),
])
def test_each_extra_gated_command_without_its_extra_prints_one_line_and_exits_2(extra: Extra, module: str,
                                                                                command: tuple[str, ...]) -> None:
    done = sqsjobs_without((module,), *command)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [f"sqsjobs {command[0]}: {install_hint(extra, module)}"]
    assert done.stdout == ""


def test_with_every_extra_installed_nothing_is_missing() -> None:
    # The dev install (.[dev]) has them all.
    assert {extra: missing(extra) for extra in Extra} == dict.fromkeys(Extra)
    assert MODULES[Extra.CONSOLE] == ("starlette", "uvicorn", "jinja2")  # what `sqsjobs console` imports


def test_the_hint_names_the_extra_and_the_module() -> None:
    assert install_hint(Extra.CHECK, "cfnlint") == (
        "sqsjobs check (cfn-lint) needs the [check] extra (cfnlint is missing): pip install 'sqsjobs[check]'"
    )
