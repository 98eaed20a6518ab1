"""A handler imports only the features its app uses: at import, and through its first batch (modules counted).

Each handler below is imported in a fresh interpreter, then answers a first
batch (the store in memory: the feature gates do not depend on the store), and
the ``sqsjobs`` modules it holds are read from ``sys.modules``. A feature's
modules are those of its package (``flow``, ``workflows``, ``schedules``) or
its own modules (debounce and dedupe). An app that uses no feature loads none of
them; one that declares a limiter and a debounced job loads those two and no
other, which is also what shows the probe can see a feature load.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

#: the modules of each optional feature, by prefix
FEATURES = {
    "limiters": ("sqsjobs.flow",),
    "groups and chains": ("sqsjobs.workflows",),
    "schedules": ("sqsjobs.schedules",),
    "debounce and dedupe": ("sqsjobs.enqueue._debounce",),
}

PLAIN = """
from sqsjobs import JobApp

app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs")


@app.job("invoice-email", key="invoice-email:{invoice_id}")
def send_invoice_email(invoice_id: int) -> None:
    pass


FIRST = [send_invoice_email.message(invoice_id=i) for i in range(3)]
"""

LIMITED_AND_DEBOUNCED = """
from sqsjobs import JobApp

app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs")
app.rate_limit("sms", rate=10)


@app.job("sms-reminder", key="sms-reminder:{appointment_id}", limits=["sms"])
def send_sms_reminder(appointment_id: int) -> None:
    pass


@app.job("product-reindex", key="product-reindex:{product_id}", debounce=2)
def reindex_product(product_id: int) -> None:
    pass


FIRST = [send_sms_reminder.message(appointment_id=1), reindex_product.message(product_id=2)]
"""

PROBE = """
import json, sys
sys.path.insert(0, sys.argv[1])
import handler

def ours():
    return {m for m in sys.modules if m == "sqsjobs" or m.startswith("sqsjobs.")}

at_import = ours()
from sqsjobs.store._memory import InMemoryStore

event = {"Records": [
    {"messageId": f"m{i}", "receiptHandle": f"r{i}", "body": message.body, "messageAttributes": {},
     "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "0"}, "eventSource": "aws:sqs",
     "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:jobs"}
    for i, message in enumerate(handler.FIRST)]}
with handler.app.runtime.using(store=InMemoryStore()):
    response = handler.app.handle_batch(event, None)
import threading
print(json.dumps({"import": sorted(at_import), "batch": sorted(ours() - {"sqsjobs.store._memory"}),
                  "response": response, "asyncio": "asyncio" in sys.modules,
                  "threads": sorted(t.name for t in threading.enumerate() if t.name.startswith("sqsjobs"))}))
"""


def loaded(tmp_path: Path, source: str) -> dict[str, Any]:
    """The sqsjobs modules a fresh interpreter holds after importing ``source`` as a handler, then after its
    first batch."""
    (tmp_path / "handler.py").write_text(textwrap.dedent(source))
    env = {"PATH": "", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
           "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    done = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["response"] == {"batchItemFailures": []}
    return report


def features_in(modules: list[str]) -> dict[str, list[str]]:
    """The feature modules of ``modules``, by feature (a feature with none is left out)."""
    found = {feature: sorted(m for m in modules if m.startswith(prefixes)) for feature, prefixes in FEATURES.items()}
    return {feature: names for feature, names in found.items() if names}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return loaded(tmp_path_factory.mktemp("plain"), PLAIN)


def test_an_app_without_features_loads_none_at_import_nor_in_its_first_batch(plain: dict[str, Any]) -> None:
    assert features_in(plain["import"]) == {}
    assert features_in(plain["batch"]) == {}


def test_an_app_of_plain_jobs_makes_no_event_loop_and_no_job_thread(plain: dict[str, Any]) -> None:
    # worker/_job_runners.py: the loop and the job threads are made for a batch with a job that needs them
    assert plain["asyncio"] is False
    assert [name for name in plain["threads"] if name.startswith("sqsjobs-job")] == []


def test_the_one_job_worker_loads_few_modules_of_sqsjobs(plain: dict[str, Any]) -> None:
    # What a worker holds after its first batch, here with the store in memory (BENCHMARKS.md's first invocation
    # counts the DynamoDB store's too). Before the features were gated, the same worker held 18 more.
    # 32 + store/_rate_ops.py, in the store's operation union, + _frozen.py (the store's value classes: one module
    # that spares the cold start 32 dataclasses compiled at import)
    assert len(plain["import"]) <= 34, plain["import"]
    # 56 + the cost metrics' meter (_usage.py) + _rate_ops + _frozen + _statement_answers (the 500-line bound)
    assert len(plain["batch"]) <= 60, plain["batch"]


def test_an_app_with_a_limiter_and_a_debounced_job_loads_those_features_only(tmp_path: Path) -> None:
    report = loaded(tmp_path, LIMITED_AND_DEBOUNCED)
    assert set(features_in(report["batch"])) == {"limiters", "debounce and dedupe"}
    assert "sqsjobs.flow._stage" in report["batch"] and "sqsjobs.enqueue._debounce_stage" in report["batch"]
    assert "sqsjobs.flow._stage" not in report["import"]  # the stages are built by the first batch that needs them


def test_a_stage_built_on_demand_forwards_every_hook_a_stage_has() -> None:
    # worker/_stages.py's OnDemand: a hook it does not forward is silently the base class's no-op for the feature
    # (the limiter's waits_for_start once was: async jobs under a rate limit all began at the last slot).
    from sqsjobs.worker._stages import OnDemand, Stage

    hooks = {name for name, value in vars(Stage).items() if callable(value) and not name.startswith("_")}
    assert hooks - set(vars(OnDemand)) == set()
