"""Batch handlers on the deployed template (issue 26): the reference app's ``product-search-bulk`` on the local cloud.

Counts only, never wall time: every item written once, one attempt each, the missing product dead-lettered alone
with the worker's reason, and the handler called with more than one item (from the lines it logged).
BENCHMARKS.md ("Batch handlers") has the measured throughput against per-item jobs.
"""

from __future__ import annotations

import itertools
import json

from e2e.test_flow_control import records, send_all

from sqsjobs.local.pytest_plugin import LocalCloudSession

_ids = itertools.count(1)


def written(cloud: LocalCloudSession, ids: list[int]) -> set[int]:
    table = cloud.function_env("WorkerFunction")["SQSJOBS_ORDERS_TABLE"]
    dynamodb = cloud.clients.get("dynamodb")
    found = set()
    for i in ids:
        if "Item" in dynamodb.get_item(TableName=table, Key={"pk": {"S": f"search#{i}"}}):
            found.add(i)
    return found


def test_a_batch_handler_writes_every_item_once_and_dead_letters_only_the_missing_one(
        local_cloud: LocalCloudSession) -> None:
    ids = [30_000 + 100 * next(_ids) + n for n in range(40)]
    missing = -ids[0]  # a product that does not exist: its item fails for good, the others of its call do not
    before = len(local_cloud.logs)
    send_all(local_cloud, [local_cloud.app.message("product-search-bulk", product_id=i) for i in [missing, *ids]])
    local_cloud.drain(timeout=300)

    assert written(local_cloud, ids) == set(ids)
    statuses = records(local_cloud, [f"product-search-bulk:{i}" for i in ids])
    assert all(s is not None and s.state == "succeeded" and s.attempts == 1 for s in statuses)
    (gone,) = records(local_cloud, [f"product-search-bulk:{missing}"])
    assert gone is not None and gone.state == "dead_lettered"
    letters = [d for d in local_cloud.dead_letters() if f"product-search-bulk:{missing}" in d["Body"]]
    assert len(letters) == 1
    assert letters[0]["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "permanent"
    # One call took several items (the poller hands out batches of up to 10), and every item was in one call.
    sizes = [entry["items"] for _, line in local_cloud.logs[before:] if "writing search documents" in line
             for entry in [json.loads(line)] if isinstance(entry, dict)]
    assert sum(sizes) == len(ids) + 1 and max(sizes) > 1
