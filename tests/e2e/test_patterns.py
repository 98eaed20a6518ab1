"""The patterns on the deployed template: outbox → stream → relay → worker, a chunked run, a leased schedule."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime
from typing import Any

from sqsjobs.local.pytest_plugin import LocalCloudSession
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.workflows._chunked import RunStore

_orders = itertools.count(5000)


def dynamodb(cloud: LocalCloudSession) -> Any:
    return cloud.clients.get("dynamodb")


def test_an_order_committed_with_its_job_is_processed_through_the_relay(local_cloud: LocalCloudSession) -> None:
    order_id = next(_orders)
    orders = local_cloud.function_env("WorkerFunction")["SQSJOBS_ORDERS_TABLE"]
    outbox = local_cloud.deployment.tables["OutboxTable"]

    with local_cloud.app.transaction(client=dynamodb(local_cloud), outbox_table=outbox) as tx:
        tx.put(orders, {"pk": f"order#{order_id}", "total_cents": 990, "status": "NEW"},
               condition="attribute_not_exists(pk)")
        tx.enqueue("process-order", order_id=order_id)
    local_cloud.drain()

    item = dynamodb(local_cloud).get_item(TableName=orders, Key={"pk": {"S": f"order#{order_id}"}})["Item"]
    assert item["status"] == {"S": "PROCESSED"}


def test_a_chunked_reindex_runs_to_the_end(local_cloud: LocalCloudSession) -> None:
    local_cloud.enqueue("reindex-products", run_id="e2e", cursor=0)
    local_cloud.drain()

    table = local_cloud.function_env("WorkerFunction")["SQSJOBS_TABLE"]
    status = RunStore(DynamoDBStore(dynamodb(local_cloud), table), ttl=0).status("reindex-products", "e2e")
    assert status is not None and status.finished
    assert status.pages_done == 5  # 2,000 demo products: four pages of 500 and the empty fifth


def test_the_nightly_report_fires_once_per_period(local_cloud: LocalCloudSession) -> None:
    # A tick in the past: the cloud's own cron (02:00 UTC, real time) never takes this period first,
    # and midnight cannot fall between the two fires.
    tick = datetime(2026, 8, 5, 2, tzinfo=UTC)
    first = local_cloud.fire("SchedulerFunction", at=tick)
    second = local_cloud.fire("SchedulerFunction", at=tick)

    assert first.ok and second.ok, (first.error_message, second.error_message)
    assert first.payload["fired"] is True
    assert first.payload["period"] == "2026-08-05"
    assert second.payload["fired"] is False and second.payload["period"] == first.payload["period"]
    assert second.payload["reason"].startswith("already done by")
