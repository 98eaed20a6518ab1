"""The option combinations of `sqsjobs init`, and writing their projects once per test session."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

from sqsjobs.scaffold import Extra, ProjectOptions, write

ROOT = Path(__file__).resolve().parents[1]
#: every combination: standard or FIFO, times every subset of the extras (16)
COMBINATIONS = [
    ProjectOptions(name="jobs-" + ("fifo" if fifo else "std") + "".join(f"-{e.value}" for e in sorted(extras)),
                   fifo=fifo, extras=frozenset(extras))
    for fifo in (False, True)
    for size in range(len(Extra) + 1)
    for extras in itertools.combinations(sorted(Extra), size)
]


def option_id(options: ProjectOptions) -> str:
    """A test id: ``fifo+outbox+chunked``, ``standard``."""
    parts = (["fifo"] if options.fifo else []) + [e.value for e in sorted(options.extras)]
    return "+".join(parts) or "standard"


def generate(root: Path, options: ProjectOptions) -> Path:
    """Write the project for ``options`` under ``root``; its directory."""
    directory = root / options.name
    write(directory, options)
    return directory


def run_pytest(project: Path, *args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """The project's own pytest, as its user runs it (its directory, its pyproject), with this venv's sqsjobs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQSJOBS_", "PYTEST_"))}
    env["SQSJOBS_LOCAL_STATE"] = str(project / ".local-cloud.json")
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
