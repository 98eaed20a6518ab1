"""A job group on the deployed template: members run once, the callback once, with duplicate sends and poison.

``make test`` runs a few hundred members; ``make chaos`` runs 2,000
(``SQSJOBS_GROUP_SCALE_MEMBERS``), the issue's scale, which takes minutes on a loaded two-core machine.
"""

from __future__ import annotations

import os
import random
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from sqsjobs.dynamodb_store import DynamoDBStore
from sqsjobs.local.pytest_plugin import LocalCloudSession

MEMBERS = int(os.environ.get("SQSJOBS_GROUP_SCALE_MEMBERS", "300"))
DUPLICATES = 0.10
POISON_EVERY = 50  # 2% of the invoices do not exist: their e-mails fail for good


@pytest.fixture
def app(local_cloud: LocalCloudSession) -> Iterator[Any]:
    """The reference app, producing onto the local cloud's queue and reading its table."""
    worker = local_cloud.function_env("WorkerFunction")
    dynamodb = local_cloud.clients.get("dynamodb")
    with local_cloud.app.use(store=DynamoDBStore(dynamodb, worker["SQSJOBS_TABLE"]),
                             sqs_client=local_cloud.clients.get("sqs"),
                             settings={"queue_url": worker["SQSJOBS_QUEUE_URL"],
                                       "table_name": worker["SQSJOBS_TABLE"]}) as app:
        yield app


def test_a_group_completes_once_with_duplicate_sends_and_poison(local_cloud: LocalCloudSession, app: Any) -> None:
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
    local_cloud.drain(timeout=60 + MEMBERS / 4)

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
    letters = [m for m in local_cloud.dead_letters() if group_id in m["Body"]]
    assert len(letters) == poison
