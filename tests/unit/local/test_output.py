"""How `local up` shows the functions' log lines."""

from __future__ import annotations

from sqsjobs.local.output import readable


def test_powertools_json_lines_become_one_readable_line() -> None:
    line = ('{"level":"WARNING","location":"_execute:239","message":"job failed","timestamp":"2026-11-30",'
            '"service":"sqsjobs","job":"invoice-email","key":"invoice-email:7","attempt":1,"outcome":"retry"}')

    assert readable(line) == "WARNING job failed job=invoice-email key=invoice-email:7 attempt=1 outcome=retry"


def test_other_lines_are_left_alone() -> None:
    for line in ("plain", "{not json", '{"level": "INFO"}', "[1, 2]"):
        assert readable(line) == line
