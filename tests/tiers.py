"""The cost tiers: every test marked by what it needs beyond Python (tests/conftest.py applies them).

A test is marked by its directory or module (``PATH_COSTS``), by the fixtures it uses (``FIXTURE_COSTS``, and
any fixture that starts moto), or by an explicit mark in its module. ``make check`` runs the tests with none
of these marks (the fast tier); ``make test`` runs all of them. A test whose own body starts moto must say so
with ``@pytest.mark.moto``: collection stops, naming it, when it does not.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent


class Cost(StrEnum):
    """What a test needs beyond Python, one pytest marker each (pyproject.toml registers them)."""

    MOTO = "moto"  #: in-process moto (mock_aws) or a moto server on 127.0.0.1
    LOCAL_CLOUD = "local_cloud"  #: the local cloud: template.yaml deployed on a moto server, the poller emulated
    SAM = "sam"  #: the SAM CLI of .venv-sam, or the .aws-sam/build it leaves
    BROWSER = "browser"  #: Chromium through Playwright
    SLOW = "slow"  #: tens of seconds or more on its own, whatever it talks to
    #: the durable SDK and its local runner (the [durable] extra): never installed beside the oldest botocore
    DURABLE = "durable"


#: paths under tests/ (a directory or a module) → what every test there costs; the longest match wins
PATH_COSTS: dict[str, tuple[Cost, ...]] = {
    "chaos/test_chaos.py": (Cost.SLOW,),
    "docs/test_producer_examples.py": (Cost.MOTO,),
    "durable": (Cost.DURABLE,),
    "e2e": (Cost.MOTO, Cost.LOCAL_CLOUD),
    "e2e/test_console.py": (Cost.MOTO, Cost.LOCAL_CLOUD, Cost.BROWSER),
    "infra/test_bundle.py": (Cost.SAM,),
    "infra/test_check_cli.py": (Cost.SLOW,),  # a cfn-lint child process per test
    "infra/test_moto_stack.py": (Cost.MOTO,),
    "integration": (Cost.MOTO,),
    "integration/local": (Cost.MOTO, Cost.LOCAL_CLOUD),
    "integration/test_redrive_local_cloud.py": (Cost.MOTO, Cost.LOCAL_CLOUD),
    "scaffold": (Cost.SAM, Cost.SLOW),
    "stock_moto": (Cost.MOTO, Cost.SLOW),  # a user's suite in a pytest of its own, a moto server among its backends
    "scaffold/test_init_projects.py": (Cost.SAM, Cost.SLOW, Cost.MOTO, Cost.LOCAL_CLOUD),  # `sqsjobs local up`
    "unit/test_extras.py": (Cost.SLOW,),  # a child interpreter per extra
    "unit/test_limiter_contention.py": (Cost.SLOW,),  # hypothesis over crowds of invocations
}
#: fixtures (by name) → what a test using them costs
FIXTURE_COSTS: dict[str, tuple[Cost, ...]] = {
    "local_cloud": (Cost.MOTO, Cost.LOCAL_CLOUD),
}
#: a test body or fixture that does this talks to moto
_STARTS_MOTO = re.compile(r"\bmock_aws\(|\bthreaded_server\(|\bThreadedMotoServer\(")


def _path_costs(path: Path) -> tuple[Cost, ...]:
    try:
        relative = path.relative_to(TESTS).as_posix()
    except ValueError:
        return ()
    best = ""
    for prefix in PATH_COSTS:
        if (relative == prefix or relative.startswith(prefix + "/")) and len(prefix) > len(best):
            best = prefix
    return PATH_COSTS.get(best, ())


def _source(function: Callable[..., Any]) -> str:
    try:
        return inspect.getsource(function)
    except (OSError, TypeError):
        return ""


def _fixture_costs(item: pytest.Item) -> set[Cost]:
    costs: set[Cost] = set()
    info = getattr(item, "_fixtureinfo", None)
    definitions = getattr(info, "name2fixturedefs", {})
    for name in getattr(item, "fixturenames", ()):
        costs.update(FIXTURE_COSTS.get(name, ()))
        for definition in definitions.get(name, ()):
            if _STARTS_MOTO.search(_source(definition.func)):
                costs.add(Cost.MOTO)
    return costs


def mark(items: list[pytest.Item]) -> None:
    """Mark each test with its costs, and refuse a test that starts moto itself without saying so."""
    unmarked: list[str] = []
    for item in items:
        costs = set(_path_costs(Path(str(item.path)))) | _fixture_costs(item)
        function = getattr(item, "function", None)
        if function is not None and _STARTS_MOTO.search(_source(function)) and Cost.MOTO not in costs \
                and item.get_closest_marker(Cost.MOTO) is None:
            unmarked.append(item.nodeid)
        for cost in sorted(costs):
            if item.get_closest_marker(cost) is None:
                item.add_marker(getattr(pytest.mark, cost))
    if unmarked:
        raise pytest.UsageError("these tests start moto without @pytest.mark.moto (tests/tiers.py, Cost): "
                                + ", ".join(sorted(set(unmarked))))
