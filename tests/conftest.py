"""Shared fixtures: fake AWS credentials, a controllable clock, seeded randomness; and the cost tiers (tiers.py)."""

from __future__ import annotations

import os
import random
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import tiers

from sqsjobs.testing.tester import ManualClock

ROOT = Path(__file__).resolve().parent.parent

# A shell's background job (`pytest &`) starts with SIGINT ignored, and its children inherit that: the tests
# that stop `sqsjobs local up` with Ctrl-C's signal would wait for it forever. A handled signal is reset to
# its default in every child.
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test with what it costs (tiers.py)."""
    tiers.mark(items)


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


class Clock(ManualClock):
    """A clock tests move by hand (epoch seconds); ``advance`` calls the worker's timers that fall due on the way
    (``sqsjobs.testing.ManualClock``), while setting ``now`` moves it without them."""


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



@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The wheel and sdist of this checkout (scaffold_support.Dist), as `make dist` makes them: once a session
    for tests/scaffold and tests/dist, which run in one process of `make test` (tests/shards.py's ``builds``)."""
    from scaffold_support import build_dist

    return build_dist(tmp_path_factory.mktemp("dist"))
