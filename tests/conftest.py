"""Shared fixtures (fake AWS credentials, a controllable clock, seeded randomness) and the cost tiers.

Every test is marked by what it costs (``Cost``): by its directory or module (``PATH_COSTS``), by the fixtures
it uses (``FIXTURE_COSTS``, and any fixture that starts moto), or by an explicit mark. ``make check`` runs
the tests with none of these marks (the fast tier); ``make test`` runs all of them. A test whose own body
starts moto must say so with ``@pytest.mark.moto``: collection stops, naming it, when it does not.
"""

from __future__ import annotations

import inspect
import os
import random
import re
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
TESTS = ROOT / "tests"


class Cost(StrEnum):
    """What a test needs beyond Python, one pytest marker each (pyproject.toml registers them)."""

    MOTO = "moto"  #: in-process moto (mock_aws) or a moto server on 127.0.0.1
    LOCAL_CLOUD = "local_cloud"  #: the local cloud: template.yaml deployed on a moto server, the poller emulated
    SAM = "sam"  #: the SAM CLI of .venv-sam, or the .aws-sam/build it leaves
    BROWSER = "browser"  #: Chromium through Playwright
    SLOW = "slow"  #: tens of seconds or more on its own, whatever it talks to


#: paths under tests/ (a directory or a module) → what every test there costs; the longest match wins
PATH_COSTS: dict[str, tuple[Cost, ...]] = {
    "integration": (Cost.MOTO,),
    "integration/local": (Cost.MOTO, Cost.LOCAL_CLOUD),
    "integration/test_redrive_local_cloud.py": (Cost.MOTO, Cost.LOCAL_CLOUD),
    "e2e": (Cost.MOTO, Cost.LOCAL_CLOUD),
    "e2e/test_console.py": (Cost.MOTO, Cost.LOCAL_CLOUD, Cost.BROWSER),
    "scaffold": (Cost.SAM, Cost.SLOW),
    "infra/test_bundle.py": (Cost.SAM,),
    "infra/test_moto_stack.py": (Cost.MOTO,),
    "docs/test_producer_examples.py": (Cost.MOTO,),
    "infra/test_check_cli.py": (Cost.SLOW,),
    "chaos/test_chaos.py": (Cost.SLOW,),
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


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
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
        raise pytest.UsageError("these tests start moto without @pytest.mark.moto (tests/conftest.py, Cost): "
                                + ", ".join(sorted(set(unmarked))))


@pytest.fixture(autouse=True)
def _aws_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tests never reach AWS: fake credentials, one region, and no endpoint from the developer's shell."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCOUNT_ID_ENDPOINT_MODE", "disabled")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_REGION", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    for name in ("SQSJOBS_QUEUE_URL", "SQSJOBS_DLQ_URL", "SQSJOBS_TABLE", "SQSJOBS_MAX_ATTEMPTS",
                 "SQSJOBS_FUNCTION_TIMEOUT", "SQSJOBS_SCHEDULE_GROUP", "SQSJOBS_SCHEDULER_ROLE_ARN",
                 "POWERTOOLS_SERVICE_NAME", "POWERTOOLS_METRICS_NAMESPACE"):
        monkeypatch.delenv(name, raising=False)
    for name in [n for n in os.environ if n.startswith("SQSJOBS_QUEUE_URL_")]:  # named queues (enqueue/_routing.py)
        monkeypatch.delenv(name, raising=False)


class Clock:
    """A clock tests move by hand (epoch seconds)."""

    def __init__(self, now: float = 1_767_225_600.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def rng() -> random.Random:
    return random.Random(1234)


@pytest.fixture
def handlers_on_path(monkeypatch: pytest.MonkeyPatch) -> Path:
    """Import the reference app the way Lambda does (CodeUri = handlers/)."""
    path = ROOT / "handlers"
    monkeypatch.syspath_prepend(str(path))
    for name in ("app", "worker"):
        sys.modules.pop(name, None)
    return path
