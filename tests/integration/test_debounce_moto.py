"""debounce= and dedupe= against moto's SQS and DynamoDB: the producer's one write, the worker's stage, the CLI view.

The debounce window here is 0.4 s, which SQS takes as DelaySeconds=0: every message of the burst is visible at
once, so the test needs no waiting (the delay itself is SQS's; tests/unit/test_debounce_dedupe.py checks it is set).
"""

from __future__ import annotations

import json
from typing import Any

from typer.testing import CliRunner

from sqsjobs import Outcome
from sqsjobs.testing import FakeContext, receive_event


def queued(aws: Any) -> int:
    attributes = aws.sqs.get_queue_attributes(QueueUrl=aws.queue_url,
                                              AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])


def run_queue(app: Any, aws: Any) -> list[Any]:
    outcomes: list[Any] = []
    while (event := receive_event(aws.sqs, aws.queue_url))["Records"]:
        result = app.process_batch(event, FakeContext())
        outcomes += [d.outcome for d in result.deliveries]
    return outcomes


def test_twenty_edits_reindex_once_with_the_last_one(make_app: Any, aws: Any, monkeypatch: Any) -> None:
    from sqsjobs.cli import build_app, lifecycle

    app = make_app()
    ran: list[str] = []

    @app.job("reindex", key="reindex:{product_id}", debounce=0.4)
    def reindex(product_id: int, title: str) -> None:
        ran.append(title)

    for n in range(20):
        reindex.enqueue(product_id=7, title=f"edit {n}")
    monkeypatch.setattr(lifecycle, "table_app", lambda table, endpoint, region: app)
    shown = CliRunner().invoke(build_app(), ["job", "reindex:7", "--json", "--table", "t"])
    assert shown.exit_code == 0, shown.output
    view = json.loads(shown.stdout)
    assert (view["state"], view["coalesced"]) == ("waiting", 20) and view["due_at"] is not None
    outcomes = run_queue(app, aws)
    assert ran == ["edit 19"]
    assert outcomes.count(Outcome.SUPERSEDED) == 19 and outcomes.count(Outcome.SUCCEEDED) == 1
    reindex.enqueue(product_id=7, title="later")  # a new burst after the completed one
    assert run_queue(app, aws) == [Outcome.SUCCEEDED] and ran == ["edit 19", "later"]


def test_a_deduplicated_export_is_refused_with_no_send(make_app: Any, aws: Any) -> None:
    app = make_app()
    ran: list[int] = []

    @app.job("export", key="export:{account_id}", dedupe="until_done")
    def export(account_id: int) -> None:
        ran.append(account_id)

    first = export.enqueue(account_id=1)
    again = export.enqueue(account_id=1)
    assert not first.duplicate and again.duplicate and again == first and queued(aws) == 1
    report = app.enqueue_many([export.message(account_id=2), export.message(account_id=2),
                               export.message(account_id=1)])
    assert report.sent == 1 and sorted(report.duplicates) == [1, 2] and queued(aws) == 2
    assert sorted(o.value for o in run_queue(app, aws)) == ["succeeded", "succeeded"]
    assert sorted(ran) == [1, 2]
    assert not export.enqueue(account_id=1).duplicate  # done: the key is free (its delivery is a duplicate)


def test_a_window_beyond_900_s_is_one_schedule_replaced_on_each_enqueue(make_app: Any, aws: Any,
                                                                        clock: Any) -> None:
    import boto3

    from sqsjobs.enqueue._delays import schedule_name

    scheduler = boto3.client("scheduler", region_name="us-east-1")
    scheduler.create_schedule_group(Name="jobs-delayed")
    app = make_app(schedule_group="jobs-delayed", scheduler_client=scheduler,
                   scheduler_role_arn="arn:aws:iam::123456789012:role/sqsjobs-SchedulerDeliveryRole")

    @app.job("digest", key="digest:{user_id}", debounce=3600)
    def digest(user_id: int, note: str) -> None: ...

    for n in range(3):
        digest.enqueue(user_id=5, note=f"n{n}")
        clock.advance(60)
    names = [s["Name"] for s in scheduler.list_schedules(GroupName="jobs-delayed")["Schedules"]]
    assert names == [schedule_name("digest:5")] and queued(aws) == 0
    body = json.loads(scheduler.get_schedule(Name=names[0], GroupName="jobs-delayed")["Target"]["Input"])
    record = app.runtime.store.get("digest:5")
    assert record is not None and record.get("debounce_count") == 3
    assert body["args"]["note"] == "n2" and body["debounce"] == record.get("debounce_token")
