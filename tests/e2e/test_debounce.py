"""Debounce and dedupe on the deployed template (issue 26): the reference app's ``product-reindex`` and
``account-export`` on the local cloud.

Counts only, never wall time: a burst of five edits of one product runs the job once, with the last edit's title,
and leaves the key's record succeeded; the four earlier deliveries are acknowledged as superseded.
"""

from __future__ import annotations

import itertools
import json

from e2e.test_flow_control import records

from sqsjobs.local.pytest_plugin import LocalCloudSession

_ids = itertools.count(1)


def test_a_burst_of_edits_runs_one_reindex_with_the_last_edit(local_cloud: LocalCloudSession) -> None:
    product = 90_000 + next(_ids)
    before = len(local_cloud.logs)
    with local_cloud.use_app() as app:  # the enqueue writes the burst's token to the local table
        for n in range(5):
            app.jobs["product-reindex"].enqueue(product_id=product, title=f"edit {n}")
    local_cloud.drain(timeout=300)

    lines = [json.loads(line) for _, line in local_cloud.logs[before:] if "reindexing product" in line]
    assert [line["title"] for line in lines if line.get("product_id") == product] == ["edit 4"]
    (status,) = records(local_cloud, [f"product-reindex:{product}"])
    assert status is not None and status.state == "succeeded" and status.attempts == 1
    outcomes = [o["outcome"] for o in local_cloud.outcomes() if o.get("key") == f"product-reindex:{product}"]
    assert sorted(outcomes) == ["succeeded"] + ["superseded"] * 4


def test_a_second_export_while_one_is_queued_is_refused_at_the_producer(local_cloud: LocalCloudSession) -> None:
    account = 70_000 + next(_ids)
    before = len(local_cloud.logs)
    with local_cloud.use_app() as app, local_cloud.paused():  # both requests meet the first one queued
        first = app.jobs["account-export"].enqueue(account_id=account)
        again = app.jobs["account-export"].enqueue(account_id=account)
    local_cloud.drain(timeout=300)

    assert not first.duplicate and again.duplicate and again == first
    lines = [json.loads(line) for _, line in local_cloud.logs[before:] if "exporting account" in line]
    assert [line["account_id"] for line in lines] == [account]
    (status,) = records(local_cloud, [f"account-export:{account}"])
    assert status is not None and status.state == "succeeded"
