"""The cost tiers (tests/tiers.py) stay true to the tree and to pyproject.toml's markers."""

from __future__ import annotations

import tomllib

import pytest
import tiers
from tiers import FIXTURE_COSTS, PATH_COSTS, TESTS, Cost


def test_every_cost_is_a_registered_marker() -> None:
    config = tomllib.loads((TESTS.parent / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]
    registered = {line.split(":", 1)[0] for line in config["markers"]}
    assert {cost.value for cost in Cost} <= registered
    assert "--strict-markers" in config["addopts"]


@pytest.mark.parametrize("path", sorted(PATH_COSTS))
def test_every_costed_path_exists(path: str) -> None:
    # A renamed module would silently drop its marks: the fast tier would grow a slow test.
    assert (TESTS / path).exists(), f"tests/tiers.py PATH_COSTS names {path}, which is gone"


@pytest.mark.parametrize(("path", "costs"), [
    ("unit/test_decision.py", set()),
    ("integration/test_worker.py", {Cost.MOTO}),
    ("integration/local/test_cli.py", {Cost.MOTO, Cost.LOCAL_CLOUD}),
    ("e2e/test_console.py", {Cost.MOTO, Cost.LOCAL_CLOUD, Cost.BROWSER}),
    ("infra/test_bundle.py", {Cost.SAM}),
    ("infra/test_rules.py", set()),
    ("scaffold/test_init_matrix.py", {Cost.SAM, Cost.SLOW}),
])
def test_the_longest_path_prefix_decides(path: str, costs: set[Cost]) -> None:
    assert set(tiers._path_costs(TESTS / path)) == costs


def test_a_local_cloud_test_is_a_moto_test_too() -> None:
    assert set(FIXTURE_COSTS["local_cloud"]) == {Cost.MOTO, Cost.LOCAL_CLOUD}
    assert all(Cost.MOTO in costs for path, costs in PATH_COSTS.items() if Cost.LOCAL_CLOUD in costs)


def test_what_starts_moto_is_recognised() -> None:
    call = "()"  # spelled apart, or this test's own source would be taken for one that starts moto
    assert tiers._STARTS_MOTO.search(f"    with mock_aws{call}:")
    assert tiers._STARTS_MOTO.search(f"server = threaded_server{call}")
    assert not tiers._STARTS_MOTO.search("from moto import mock_aws")  # importing is not starting
