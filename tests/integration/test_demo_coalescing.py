"""The demo's debounce and dedupe phase (demo/coalescing.py) on moto: what `make demo` runs on the local cloud."""

from __future__ import annotations

from typing import Any

from demo import coalescing


def test_the_phase_coalesces_twenty_edits_and_refuses_a_second_export(aws: Any) -> None:
    outcome = coalescing.run(aws.sqs, aws.dynamodb, aws.table)
    assert outcome.problems() == [], outcome.lines()
    assert outcome.reindexed == ["edit 19"] and outcome.superseded == 19
