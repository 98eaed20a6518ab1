"""bench/capacity.py: the drain arithmetic matches the research's figures, and every hot item has its verdict."""

from __future__ import annotations

import pytest

from bench import capacity


@pytest.mark.parametrize(("label", "expected"), [
    ("standard: from 5, +300/min, at most 1,250 (account concurrency raised)", 200),
    ("standard, already at 1,250", 80),
    ("provisioned: MinimumPollers 2 (about 20), +1,000/min, account concurrency 1,000", 130),
    ("provisioned: MinimumPollers 2, account concurrency raised", 109),
    ("provisioned: MinimumPollers 125 (1,250 at once), +1,000/min", 58),
])
def test_drain_times_are_the_arithmetic_of_the_scaling_rules(label: str, expected: float) -> None:
    drains = {name: seconds for name, seconds, _ in capacity.model().drains}
    assert drains[label] == pytest.approx(expected, abs=2)


def test_a_new_on_demand_table_not_lambda_bounds_the_drain() -> None:
    drains = {name: (seconds, rate) for name, seconds, rate in capacity.model().drains}
    seconds, rate = drains["standard, a new on-demand table (4,000 WCU/s at first)"]
    assert rate == capacity.NEW_ON_DEMAND_TABLE_WCU / capacity.WCU_PER_JOB
    assert seconds > 2 * drains["standard: from 5, +300/min, at most 1,250 (account concurrency raised)"][0]


def test_every_kind_of_hot_item_is_named_and_only_the_blind_probes_pass_an_item_s_limit() -> None:
    items = capacity.hot_items()
    assert {i.name for i in items} >= {"job record", "rate-limit schedule", "concurrency slot", "group counter shard",
                                       "chunked run record", "period lock"}
    over = [(i.name, i.scenario) for i in items if i.over]
    assert over and all("(before)" in scenario for _, scenario in over)
    after = [i for i in items if i.name == "concurrency slot" and "read first" in i.scenario]
    assert after and not after[0].over and after[0].rcu_per_second <= capacity.PARTITION_RCU
    # A rate limiter is one item written once a batch; saturated, its crowd refuses itself (flow/_schedule.py).
    schedule = [i for i in items if i.name == "rate-limit schedule"]
    assert len(schedule) == 2 and not any(i.over for i in schedule)
