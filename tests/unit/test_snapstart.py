"""SnapStart hooks: the first batch's set-up runs before the snapshot, and every restore draws fresh randomness."""

from __future__ import annotations

import json
import random
import subprocess
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sqsjobs import ConfigurationError, JobApp, prepare_snapstart
from sqsjobs import _clients as clients_module
from sqsjobs.worker._snapstart import reseed, warm

ROOT = Path(__file__).resolve().parents[2]
QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"


class Runtime(types.ModuleType):
    """A stand-in for Lambda's ``snapshot_restore_py``: records the hooks, runs them on demand."""

    def __init__(self) -> None:
        super().__init__("snapshot_restore_py")
        self.before: list[tuple[Any, tuple[Any, ...]]] = []
        self.after: list[tuple[Any, tuple[Any, ...]]] = []

    def register_before_snapshot(self, fn: Any, *args: Any) -> None:
        self.before.append((fn, args))

    def register_after_restore(self, fn: Any, *args: Any) -> None:
        self.after.append((fn, args))


@pytest.fixture
def runtime(monkeypatch: pytest.MonkeyPatch) -> Iterator[Runtime]:
    fake = Runtime()
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", fake)
    yield fake


@pytest.fixture
def made_clients(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every client sqsjobs._clients makes, by service."""
    made: list[str] = []
    original = clients_module.client

    def counting(service_name: str, **kwargs: Any) -> Any:
        made.append(service_name)
        return original(service_name, **kwargs)

    monkeypatch.setattr(clients_module, "client", counting)
    return made


def test_without_the_runtime_module_nothing_is_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "snapshot_restore_py", None)  # not importable, as outside Lambda
    assert prepare_snapstart(JobApp(queue_url=QUEUE)) is False


def test_an_async_factory_is_refused_since_warm_would_only_make_its_coroutine(runtime: Runtime) -> None:
    async def ses_client() -> None: ...

    with pytest.raises(ConfigurationError, match="prepare_snapstart: ses_client is async"):
        prepare_snapstart(JobApp(queue_url=QUEUE), ses_client)
    assert runtime.before == []


def test_prepare_registers_warm_before_the_snapshot_and_reseed_after_restore(runtime: Runtime) -> None:
    app = JobApp(queue_url=QUEUE, table_name="idempotency")
    factory = lambda: None  # noqa: E731
    assert prepare_snapstart(app, factory) is True
    assert runtime.before == [(warm, (app, factory))]
    assert runtime.after == [(reseed, (app,))]


def test_warm_builds_the_first_batch_set_up_and_the_batch_builds_nothing_more(made_clients: list[str]) -> None:
    app = JobApp(queue_url=QUEUE, table_name="idempotency")
    calls: list[str] = []
    warm(app, lambda: calls.append("ses"))
    assert sorted(made_clients) == ["dynamodb", "sqs"]
    assert calls == ["ses"]
    processor, sqs, store = app.runtime.consumer, app.runtime.sqs, app.runtime.store
    assert (app.runtime.consumer, app.runtime.sqs, app.runtime.store) == (processor, sqs, store)
    assert sorted(made_clients) == ["dynamodb", "sqs"]  # nothing built twice


def test_reseed_gives_each_restored_instance_its_own_jitter() -> None:
    # Two instances restored from one snapshot start from the same generator state.
    app = JobApp(queue_url=QUEUE, random=random.Random(1234))
    twin = random.Random(1234)
    random.seed(99)
    module_twin = random.getstate()
    reseed(app)
    assert [app.runtime.random.random() for _ in range(4)] != [twin.random() for _ in range(4)]
    after = random.random()
    random.setstate(module_twin)
    assert after != random.random()


WORKER_UNDER_SNAPSTART = """
import json, sys, types
runtime = types.ModuleType("snapshot_restore_py")
runtime.before, runtime.after = [], []
runtime.register_before_snapshot = lambda fn, *a: runtime.before.append((fn, a))
runtime.register_after_restore = lambda fn, *a: runtime.after.append((fn, a))
sys.modules["snapshot_restore_py"] = runtime
sys.path.insert(0, "handlers")
import worker
for fn, args in reversed(runtime.before):  # Lambda runs them before the snapshot, in reverse order
    fn(*args)
import app as reference
from sqsjobs import _job_clients
print(json.dumps({
    "before": [fn.__name__ for fn, _ in runtime.before],
    "after": [fn.__name__ for fn, _ in runtime.after],
    "factories": [f.__name__ for f in runtime.before[0][1][1:]],
    "built": sorted(service for service, _ in _job_clients._shared[1]),  # sqsjobs.client's shared clients
}))
"""


def test_the_worker_handler_warms_the_reference_app_without_calling_aws() -> None:
    # An endpoint nothing listens on: a call made before the snapshot would fail this run.
    env = {"PATH": "", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing",
           "AWS_SECRET_ACCESS_KEY": "testing", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
           "AWS_EC2_METADATA_DISABLED": "true", "SQSJOBS_QUEUE_URL": QUEUE, "SQSJOBS_TABLE": "idempotency",
           "SQSJOBS_SENDER": "billing@example.com"}
    done = subprocess.run([sys.executable, "-c", WORKER_UNDER_SNAPSTART], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report == {"before": ["warm"], "after": ["reseed"], "factories": ["ses_client", "orders_client"],
                      "built": ["dynamodb", "ses"]}
