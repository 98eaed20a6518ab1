"""make test's shards (tests/shards.py): every test in exactly one, and the slowest read from their reports."""

from __future__ import annotations

from pathlib import Path

import shards

TESTS = Path(__file__).resolve().parents[1]


def test_the_shards_split_every_test_once() -> None:
    rest, builds, local = shards.SHARDS
    # The heavy tier and its complement, over the whole suite; the heavy tier split by path.
    assert rest.args == ("tests", "-m", f"not ({shards.HEAVY})")
    assert builds.args == (*shards.BUILDS, "-m", shards.HEAVY)
    assert local.args == ("tests", *(f"--ignore={p}" for p in shards.BUILDS), "-m", shards.HEAVY)
    assert all((TESTS.parent / path).is_dir() for path in shards.BUILDS)
    assert [s.shown_live for s in shards.SHARDS] == [True, False, False]


def test_the_slowest_come_from_every_report_longest_first(tmp_path: Path) -> None:
    one, two = tmp_path / "one.xml", tmp_path / "two.xml"
    one.write_text('<testsuites><testsuite><testcase classname="tests.unit.test_a" name="test_x" time="1.5"/>'
                   '<testcase classname="tests.unit.test_a" name="test_y" time="0.1"/></testsuite></testsuites>')
    two.write_text('<testsuites><testsuite><testcase classname="tests.e2e.test_b" name="test_z" time="9.25"/>'
                   "</testsuite></testsuites>")
    assert shards.slowest([one, two, tmp_path / "missing.xml"], 2) == [
        (9.25, "tests.e2e.test_b::test_z"), (1.5, "tests.unit.test_a::test_x")]
