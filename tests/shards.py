"""``make test``'s pytest: every test, in three processes side by side, and the 15 slowest of all of them.

pytest-xdist is no dependency, so the tiers (tests/tiers.py) are split by hand into processes that share
nothing they could race on:

- ``rest``: every test with no local cloud, SAM or browser (moto in-process or a moto server of its own);
  it uses the CPU, and its output is shown as it runs;
- ``builds``: ``sqsjobs init``'s projects, the wheel and the executed docs, one at a time: ``pip wheel``
  and ``python -m build`` of this checkout both write its build files;
- ``local cloud``: the other local-cloud, SAM and browser tests, which mostly wait on their processes.

The two quiet shards' output is printed once each ends. The exit status is non-zero when any shard's is
(pytest's 5, no test collected, among them)::

    python tests/shards.py 15        # 15: how many of the slowest tests to list
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = "local_cloud or sam or browser"
BUILDS = ("tests/scaffold", "tests/dist", "tests/docs")


@dataclass(frozen=True)
class Shard:
    name: str
    args: tuple[str, ...]
    shown_live: bool = False


SHARDS = (
    Shard("rest", ("tests", "-m", f"not ({HEAVY})"), shown_live=True),
    Shard("builds", (*BUILDS, "-m", HEAVY)),
    Shard("local cloud", ("tests", *(f"--ignore={path}" for path in BUILDS), "-m", HEAVY)),
)


def slowest(reports: list[Path], count: int) -> list[tuple[float, str]]:
    """The ``count`` longest test cases (setup, call and teardown) of the JUnit ``reports``, longest first."""
    cases = [(float(case.get("time", "0")), f"{case.get('classname', '')}::{case.get('name', '')}")
             for report in reports if report.is_file() for case in ET.parse(report).iter("testcase")]
    return sorted(cases, reverse=True)[:count]


def main(count: int) -> int:
    with tempfile.TemporaryDirectory() as work:
        out = Path(work)
        running = []
        for i, shard in enumerate(SHARDS):
            report, log = out / f"{i}.xml", out / f"{i}.log"
            command = [sys.executable, "-m", "pytest", *shard.args, "-p", "no:cacheprovider", f"--junitxml={report}"]
            sink = None if shard.shown_live else log.open("w")
            running.append((shard, report, log, subprocess.Popen(command, cwd=ROOT, stdout=sink,
                                                                  stderr=subprocess.STDOUT if sink else None)))
        codes = {}
        for shard, _, log, process in running:
            codes[shard.name] = process.wait()
            if not shard.shown_live:
                print(f"\n---- shard {shard.name!r}: pytest {' '.join(shard.args)}", flush=True)
                print(log.read_text(), flush=True)
        print(f"==== slowest {count} tests of the {len(SHARDS)} shards (setup + call + teardown) ====")
        for seconds, name in slowest([report for _, report, _, _ in running], count):
            print(f"{seconds:8.2f}s  {name}")
        print("shards' exit codes: " + ", ".join(f"{name} {code}" for name, code in codes.items()))
        return 0 if all(code == 0 for code in codes.values()) else 1


if __name__ == "__main__":
    sys.exit(main(int(sys.argv[1]) if len(sys.argv) > 1 else 15))
