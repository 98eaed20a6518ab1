"""A job group on the deployed template: members run once, the callback once, with duplicate sends and poison.

``make test`` runs 200 members; ``make chaos`` runs 2,000
(``SQSJOBS_GROUP_SCALE_MEMBERS``), which takes minutes on a loaded two-core machine. The group gets its own
local cloud, with a worker timeout long enough for a batch of ten on a moto server that is busy with thousands
of messages (the shared e2e cloud's 8 s is about waiting less for lost invocations).
"""

from __future__ import annotations

import json
import os
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.e2e_support import E2E_PARAMETERS

from sqsjobs.local.pytest_plugin import LocalCloudSession
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.testing import messages_in

MEMBERS = int(os.environ.get("SQSJOBS_GROUP_SCALE_MEMBERS", "200"))
DUPLICATES = 0.10
POISON_EVERY = 50  # 2% of the invoices do not exist: their e-mails fail for good
PARAMETERS = {**E2E_PARAMETERS, "WorkerTimeoutSeconds": "30", "QueueVisibilityTimeoutSeconds": "60"}


@pytest.fixture(scope="module")
def group_cloud(local_cloud_template: Path) -> Iterator[LocalCloudSession]:
    """A local cloud of its own for the group (see the module's docstring)."""
    from sqsjobs.local.cloud import LocalCloud

    cloud = LocalCloud.start(local_cloud_template, parameters=PARAMETERS, stack_name="sqsjobs-groups")
    try:
        yield LocalCloudSession(cloud)
    finally:
        cloud.stop()


@pytest.fixture
def app(group_cloud: LocalCloudSession) -> Iterator[Any]:
    """The reference app, producing onto the local cloud's queue and reading its table."""
    worker = group_cloud.function_env("WorkerFunction")
    dynamodb = group_cloud.clients.get("dynamodb")
    with group_cloud.app.use(store=DynamoDBStore(dynamodb, worker["SQSJOBS_TABLE"]),
                             sqs_client=group_cloud.clients.get("sqs"),
                             settings={"queue_url": worker["SQSJOBS_QUEUE_URL"],
                                       "table_name": worker["SQSJOBS_TABLE"]}) as app:
        yield app


def test_a_group_completes_once_with_duplicate_sends_and_poison(group_cloud: LocalCloudSession, app: Any) -> None:
    local_cloud = group_cloud
    draw = random.Random(17)
    run = uuid.uuid4().hex[:8]
    first = 200_000 + draw.randrange(10**6) * 10_000
    invoices = [-n if i % POISON_EVERY == 0 else n for i, n in enumerate(range(first, first + MEMBERS))]
    email, report = app.jobs["invoice-email"], app.jobs["billing-run-report"]

    group = app.group(on_complete=report.message(run=run), name=f"billing run {run}")
    group.add_many(email.message(invoice_id=n) for n in invoices)
    group_id = group.enqueue()
    copies = [m for m in group.messages if draw.random() < DUPLICATES]
    assert app.enqueue_many(copies).ok and copies
    local_cloud.drain(timeout=120 + MEMBERS)  # seconds: far more than it takes, on a loaded machine

    status = app.group_status(group_id)
    poison = sum(1 for n in invoices if n < 0)
    assert (status.total, status.pending, status.succeeded, status.dead_lettered) == \
        (MEMBERS, 0, MEMBERS - poison, poison)
    assert status.state == "completed_with_failures"
    reports = local_cloud.clients.get("dynamodb").get_item(
        TableName=local_cloud.function_env("WorkerFunction")["SQSJOBS_ORDERS_TABLE"],
        Key={"pk": {"S": f"report#billing-run#{run}"}})["Item"]
    assert reports["runs"] == {"N": "1"}  # the callback ran once
    sent = Counter(str(m["subject"]) for m in local_cloud.emails())
    assert all(sent[f"Invoice {n}"] == 1 for n in invoices if n > 0)
    queue = local_cloud.deployment.queues[local_cloud.app_queue()]
    dlq = local_cloud.deployment.queue_by_arn(queue.dead_letter_arn).url
    letters = [m for m in messages_in(local_cloud.clients.get("sqs"), dlq) if group_id in m["Body"]]
    # Every message of a poison member runs and is dead-lettered by the worker with its reason: a dead-lettered
    # key is open to another message of it (worker/_job_records.py, ALREADY_DEAD_LETTERED only for the same
    # message), so a duplicate send of a poison member is a letter of its own. Copies of one letter (a kill
    # after the DLQ send) name the same original message.
    poison_keys = {f"invoice-email:{n}" for n in invoices if n < 0}
    poison_messages = poison + sum(1 for m in copies if m.key in poison_keys)
    originals = {(json.loads(m["Body"])["key"], m["MessageAttributes"]["sqsjobs.original_message_id"]["StringValue"])
                 for m in letters}
    assert len(originals) == poison_messages
    assert {key for key, _ in originals} == poison_keys
    assert {m["MessageAttributes"]["sqsjobs.reason"]["StringValue"] for m in letters} == {"permanent"}
