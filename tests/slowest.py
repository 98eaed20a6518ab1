"""The slowest tests of one or more pytest runs, from their JUnit XML reports (``make test``'s two shards).

``pytest --durations`` reports one process; ``make test`` runs two side by side (Makefile, ``unit``), so the
15 slowest of the whole run are read back from both reports::

    python tests/slowest.py 15 one.xml two.xml
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path


def slowest(reports: list[Path], count: int) -> list[tuple[float, str]]:
    """The ``count`` longest test cases (setup, call and teardown) over ``reports``, longest first."""
    cases: list[tuple[float, str]] = []
    for report in reports:
        for case in ET.parse(report).iter("testcase"):
            name = f"{case.get('classname', '')}::{case.get('name', '')}"  # tests.unit.test_x::test_y
            cases.append((float(case.get("time", "0")), name))
    return sorted(cases, reverse=True)[:count]


def main(argv: list[str]) -> int:
    count, *paths = argv
    reports = [Path(p) for p in paths if Path(p).is_file()]
    print(f"==== slowest {count} tests of {len(reports)} run(s) (setup + call + teardown) ====")
    for seconds, name in slowest(reports, int(count)):
        print(f"{seconds:8.2f}s  {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
