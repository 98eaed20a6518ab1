"""Batch handlers on moto (issue 26): one BatchWriteItem per call, each item with its own record, retry, dead letter
and group count; a crash mid-call and a redrive go through the same guard, item by item."""

from __future__ import annotations

from typing import Any, TypedDict

import pytest
from aws_support import Serialized, create_table
from integration.test_groups import Killed, drain, redrive_all, release

from sqsjobs import JobApp, Outcome, PermanentError, RetryableError
from sqsjobs.testing import messages_in, receive_event


class Doc(TypedDict):
    doc_id: int


@pytest.fixture
def world(make_app: Any, aws: Any) -> Any:
    """An app with a batch handler that bulk-writes search documents; ``plan`` says what each doc id does."""
    create_table(aws.dynamodb, "search")
    app: JobApp = make_app(dynamodb_client=Serialized(aws.dynamodb), backoff_base=0, backoff_cap=0)
    calls: list[list[int]] = []
    plan: dict[int, str] = {}  # doc id → "retry_once", "gone" or "crash"

    @app.job("index-docs", key="index-docs:{doc_id}", batch=25, max_attempts=3)
    def index_docs(items: list[Doc]) -> dict[int, BaseException]:
        ids = [item["doc_id"] for item in items]
        calls.append(ids)
        if any(plan.get(i) == "crash" for i in ids):
            plan.update({i: "" for i in ids if plan.get(i) == "crash"})
            raise Killed()
        failed: dict[int, BaseException] = {}
        for index, doc_id in enumerate(ids):
            if plan.get(doc_id) == "retry_once":
                plan[doc_id] = ""
                failed[index] = RetryableError("throttled")
            elif plan.get(doc_id) == "gone":
                failed[index] = PermanentError(f"doc {doc_id} was deleted")
        done = [{"PutRequest": {"Item": {"pk": {"S": f"doc#{d}"}}}} for i, d in enumerate(ids) if i not in failed]
        if done:
            aws.dynamodb.batch_write_item(RequestItems={"search": done})
        return failed

    @app.job("report", key="report:{run}")
    def report(run: str) -> None:
        calls.append([-1])

    return app, calls, plan


def indexed(aws: Any) -> set[str]:
    return {item["pk"]["S"] for item in aws.dynamodb.scan(TableName="search")["Items"]}


def test_items_retry_and_dead_letter_alone_and_a_group_counts_each(world: Any, aws: Any) -> None:
    app, calls, plan = world
    plan.update({3: "retry_once", 7: "gone"})
    group = app.group(on_complete=app.message("report", run="done"))
    group.add_many(app.message("index-docs", doc_id=n) for n in range(10))
    group_id = group.enqueue()
    drain(app, aws)

    # Lambda's poller hands out up to 10 a receive: 10 items, one call; then 3 alone, after its retry.
    assert calls[0] == list(range(10)) and calls[1:] == [[3], [-1]]
    assert indexed(aws) == {f"doc#{n}" for n in range(10) if n != 7}
    assert app.status("index-docs:3").attempts == 2 and app.status("index-docs:0").attempts == 1
    (letter,) = messages_in(aws.sqs, aws.dlq_url)
    assert letter["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "permanent"
    assert app.status("index-docs:7").state == "dead_lettered"
    status = app.group_status(group_id)
    assert (status.succeeded, status.dead_lettered, status.pending, status.state) == (
        9, 1, 0, "completed_with_failures")


def test_a_redrive_and_a_resend_run_only_what_is_not_done(world: Any, aws: Any) -> None:
    app, calls, plan = world
    plan[4] = "gone"
    app.enqueue_many([app.message("index-docs", doc_id=n) for n in range(6)])
    drain(app, aws)
    plan.clear()
    app.enqueue_many([app.message("index-docs", doc_id=n) for n in range(6)])  # every item sent again
    assert redrive_all(app, aws) == 1
    results = drain(app, aws)

    # Seven deliveries (six re-sent, one redriven); the key of 4 runs once more, every other one is a duplicate.
    assert calls == [list(range(6)), [4]]
    outcomes = [d.outcome for r in results for d in r.deliveries]
    assert outcomes.count(Outcome.DUPLICATE) == 6 and outcomes.count(Outcome.SUCCEEDED) == 1
    assert indexed(aws) == {f"doc#{n}" for n in range(6)}


def test_a_call_that_dies_runs_its_items_again_only_after_their_leases(world: Any, aws: Any, clock: Any) -> None:
    app, calls, plan = world
    plan[2] = "crash"
    app.enqueue_many([app.message("index-docs", doc_id=n) for n in range(4)])
    event = receive_event(aws.sqs, aws.queue_url, visibility_timeout=60)
    with pytest.raises(Killed):
        app.process_batch(event)
    release(aws, event)
    busy = app.process_batch(receive_event(aws.sqs, aws.queue_url, visibility_timeout=60))
    assert {d.outcome for d in busy.deliveries} == {Outcome.UNSTARTED}  # held by the dead call's leases
    assert len(calls) == 1
    for d in busy.deliveries:
        aws.sqs.change_message_visibility(QueueUrl=aws.queue_url, ReceiptHandle=d.receipt_handle,
                                          VisibilityTimeout=0)
    clock.now += 2000  # past the lease (function timeout + margin)
    drain(app, aws)
    assert calls == [[0, 1, 2, 3], [0, 1, 2, 3]]
    assert [app.status(f"index-docs:{n}").attempts for n in range(4)] == [2] * 4
    assert indexed(aws) == {f"doc#{n}" for n in range(4)}
