"""The option combinations of `sqsjobs init`, a covering subset of them, and running a written project's pytest."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

from sqsjobs.scaffold import Extra, ProjectOptions, write

ROOT = Path(__file__).resolve().parents[1]
#: the options, as bits of a combination's number: --fifo, then each --with extra
FACTORS = ("fifo", *(extra.value for extra in Extra))


def options_of(number: int) -> ProjectOptions:
    """Combination ``number`` (bit i set: option FACTORS[i] chosen), named after its number."""
    chosen = {factor for i, factor in enumerate(FACTORS) if number >> i & 1}
    return ProjectOptions(name=f"jobs-{number:03d}", fifo="fifo" in chosen,
                          extras=frozenset(Extra(e) for e in chosen - {"fifo"}))


#: every combination: standard or FIFO, times every subset of the extras
COMBINATIONS = [options_of(number) for number in range(2 ** len(FACTORS))]


def bits(options: ProjectOptions) -> tuple[bool, ...]:
    """The combination as one flag per factor."""
    return (options.fifo, *(extra in options.extras for extra in Extra))


def covering(strength: int) -> list[ProjectOptions]:
    """Combinations in which every ``strength`` options take every value together (a covering array).

    Greedy and deterministic: the combination covering the most uncovered tuples first (the lowest number on a
    tie). Template pieces that interact (FIFO with delays and the critical queue, the critical queue with every
    function that sends) meet in every way in these; the rest of the combinations get the cheap checks.
    """
    columns = list(itertools.combinations(range(len(FACTORS)), strength))
    uncovered = {(c, v) for c in columns for v in itertools.product((False, True), repeat=strength)}
    chosen: list[ProjectOptions] = []

    def gain(options: ProjectOptions) -> int:
        flags = bits(options)
        return sum((c, tuple(flags[i] for i in c)) in uncovered for c in columns)

    while uncovered:
        best = max(COMBINATIONS, key=lambda o: (gain(o), -COMBINATIONS.index(o)))
        flags = bits(best)
        uncovered -= {(c, tuple(flags[i] for i in c)) for c in columns}
        chosen.append(best)
    return chosen


def option_id(options: ProjectOptions) -> str:
    """A test id: ``fifo+outbox+chunked``, ``standard``."""
    parts = (["fifo"] if options.fifo else []) + [e.value for e in Extra if e in options.extras]
    return "+".join(parts) or "standard"


def generate(root: Path, options: ProjectOptions) -> Path:
    """Write the project for ``options`` under ``root``; its directory."""
    directory = root / options.name
    write(directory, options)
    return directory


def unit_tests_of(project: Path) -> int:
    """How many unit tests the project holds (its tests/ but the e2e one)."""
    return sum(len(re.findall(r"^def test_", path.read_text(), re.M))
               for path in (project / "tests").glob("test_*.py") if path.name != "test_e2e.py")


def run_pytest(project: Path, *args: str, timeout: float = 600,
               python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    """The project's own pytest, as its user runs it (its directory, its pyproject), with ``python``'s sqsjobs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQSJOBS_", "PYTEST_"))}
    env["SQSJOBS_LOCAL_STATE"] = str(project / ".local-cloud.json")
    return subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)
