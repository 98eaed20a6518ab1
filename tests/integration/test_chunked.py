"""Chunked jobs against moto: a 10,000-item reindex page by page, through duplicates, crashes and deadlines."""

from __future__ import annotations

import bisect
import json
from collections import Counter
from typing import Any

import pytest

from sqsjobs import EnqueueError, Outcome, time_left
from sqsjobs.testing import FakeContext, messages_in, receive_event
from sqsjobs.workflows._chunked import run_key

ITEMS = list(range(1, 10_001))
PAGE = 500


class Crash(BaseException):
    """The process dying: not an Exception, so nothing in the worker catches it."""


@pytest.fixture
def reindex_app(make_app: Any) -> Any:
    app = make_app(backoff_base=0)
    app.indexed = Counter()  # item id -> times indexed
    app.crash_at: int | None = None  # crash right before indexing this id (once)
    app.item_cost = 0.0  # seconds of the injected clock each item takes

    @app.job("reindex-products", key="reindex-products:{run_id}:{cursor}", chunked=True)
    def reindex_products(run_id: str, cursor: int = 0) -> int | None:
        start = bisect.bisect_right(ITEMS, cursor)
        rows = ITEMS[start:start + PAGE]
        for position, item in enumerate(rows):
            left = time_left()
            if left is not None and left < 1.0 and position > 0:
                return rows[position - 1]  # out of budget: continue from the last item done
            if app.crash_at == item:
                app.crash_at = None
                raise Crash(f"killed while indexing {item}")
            app.indexed[item] += 1
            app.runtime.parts.clock.advance(app.item_cost)
        return rows[-1] if len(rows) == PAGE else None

    app.reindex = reindex_products
    return app


def handle(app: Any, aws: Any, event: dict[str, Any], context: Any = None) -> Any:
    """One invocation as Lambda's SQS poller runs it: acknowledged records are deleted, failures stay."""
    result = app.process_batch(event, context)
    acked = [r for r in event["Records"] if r["messageId"] not in result.failures]
    for record in acked:
        aws.sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=record["receiptHandle"])
    return result


def receive(aws: Any) -> dict[str, Any]:
    # Visibility 0: a message whose invocation crashed is visible again at once (no real waiting).
    return receive_event(aws.sqs, aws.queue_url, visibility_timeout=0)


def drain(app: Any, aws: Any, *, context: Any = None, rounds: int = 200) -> int:
    """Receive and handle until the queue is empty; returns the number of invocations."""
    for batches in range(rounds):
        event = receive(aws)
        if not event["Records"]:
            return batches
        handle(app, aws, event, context() if context else None)
    raise AssertionError("the chain did not finish")


def test_ten_thousand_items_in_pages_of_500_each_processed_once(reindex_app: Any, aws: Any) -> None:
    run_id = reindex_app.reindex.start(run_id="full")
    started = reindex_app.run_status("reindex-products", run_id)
    assert (started.status, started.pages_done, started.cursor) == ("RUNNING", 0, 0)

    pages = drain(reindex_app, aws)

    assert pages == 21  # 20 full pages, then an empty one that returns None (the seed's loop)
    assert len(reindex_app.indexed) == 10_000
    assert set(reindex_app.indexed.values()) == {1}
    status = reindex_app.run_status("reindex-products", run_id)
    assert status.finished and status.pages_done == 21 and status.cursor is None
    assert status.started_at is not None and status.finished_at is not None


def test_duplicate_page_deliveries_never_fork_the_chain(reindex_app: Any, aws: Any) -> None:
    run_id = reindex_app.reindex.start(run_id="dup")
    drain_one = receive(aws)
    first_page = drain_one["Records"][0]["body"]
    handle(reindex_app, aws, drain_one)
    # The producer (or SQS) delivers page 0 again, twice, while page 1 waits: the guard absorbs both.
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=first_page)
    aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=first_page)
    outcomes = Counter()
    for _ in range(60):
        event = receive(aws)
        if not event["Records"]:
            break
        outcomes.update(d.outcome for d in handle(reindex_app, aws, event).deliveries)
        # A late duplicate of page 3, after the guard's record of it is gone (TTL), is stale for the run.
        if reindex_app.run_status("reindex-products", run_id).pages_done == 6:
            aws.dynamodb.delete_item(TableName=aws.table, Key={"pk": {"S": f"reindex-products:{run_id}:1500"}})
            body = json.loads(first_page)
            body["args"]["cursor"] = 1500
            body["key"] = f"reindex-products:{run_id}:1500"
            aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=json.dumps(body))

    assert outcomes[Outcome.DUPLICATE] == 2
    assert len(reindex_app.indexed) == 10_000 and set(reindex_app.indexed.values()) == {1}
    assert reindex_app.run_status("reindex-products", run_id).pages_done == 21


def test_a_crash_in_the_middle_of_a_page_redoes_only_that_page(reindex_app: Any, aws: Any, clock: Any) -> None:
    reindex_app.crash_at = 3_700  # page 8 (items 3501..4000), 200 items in
    run_id = reindex_app.reindex.start(run_id="crash")
    with pytest.raises(Crash):
        drain(reindex_app, aws)
    # The invocation died holding the page's claim; its message comes back once the lease is over.
    clock.advance(1_000)

    assert drain(reindex_app, aws) == 14  # pages 8..20 and the empty last one
    assert len(reindex_app.indexed) == 10_000
    twice = sorted(item for item, n in reindex_app.indexed.items() if n == 2)
    assert twice == list(range(3_501, 3_700))  # the crashed page's first 199 items, redone (upserts)
    assert max(reindex_app.indexed.values()) == 2
    assert reindex_app.run_status("reindex-products", run_id).pages_done == 21


def test_continuation_lost_after_the_checkpoint_is_resent_without_rerunning_the_page(
        reindex_app: Any, aws: Any) -> None:
    run_id = reindex_app.reindex.start(run_id="lost")
    real_send = reindex_app.runtime.send
    failures = {"left": 1}

    def send(message: Any) -> str:
        # SQS refuses the continuation of page 4 (cursor 2000 → 2500) once, after the page checkpointed.
        if message.key.endswith(":2500") and failures["left"]:
            failures["left"] -= 1
            raise EnqueueError("SQS unavailable")
        return str(real_send(message))

    reindex_app.runtime.send = send
    outcomes = Counter()
    for _ in range(60):
        event = receive(aws)
        if not event["Records"]:
            break
        outcomes.update(d.outcome for d in handle(reindex_app, aws, event).deliveries)

    assert failures["left"] == 0 and outcomes[Outcome.RETRY] == 1
    assert len(reindex_app.indexed) == 10_000 and set(reindex_app.indexed.values()) == {1}  # page 4 ran once
    assert reindex_app.run_status("reindex-products", run_id).pages_done == 21


def test_a_crash_between_checkpoint_and_continuation_does_not_rerun_the_page(
        reindex_app: Any, aws: Any, clock: Any) -> None:
    run_id = reindex_app.reindex.start(run_id="gap")
    real_send = reindex_app.runtime.send

    def send(message: Any) -> str:
        if message.key.endswith(":1000"):
            reindex_app.runtime.send = real_send
            raise Crash("killed after the run record advanced, before the continuation left")
        return str(real_send(message))

    reindex_app.runtime.send = send
    with pytest.raises(Crash):
        drain(reindex_app, aws)
    assert reindex_app.run_status("reindex-products", run_id).cursor == 1000  # checkpointed
    assert sum(reindex_app.indexed.values()) == 1000
    clock.advance(1_000)  # the dead invocation's lease runs out; the page's message comes back

    drain(reindex_app, aws)
    assert len(reindex_app.indexed) == 10_000 and set(reindex_app.indexed.values()) == {1}
    assert reindex_app.run_status("reindex-products", run_id).pages_done == 21


def test_pages_stop_early_at_the_invocation_budget_and_continue(reindex_app: Any, aws: Any, clock: Any) -> None:
    reindex_app.item_cost = 0.25  # 500 items would take 125 s; an invocation has 60 s, minus the 5 s margin
    run_id = reindex_app.reindex.start(run_id="budget")

    invocations = drain(reindex_app, aws, context=lambda: FakeContext(remaining_ms=60_000, clock=clock))

    assert len(reindex_app.indexed) == 10_000 and set(reindex_app.indexed.values()) == {1}
    status = reindex_app.run_status("reindex-products", run_id)
    assert status.finished and status.pages_done == invocations
    # 217 items per invocation, not 500: an item starts while >= 1 s is left, (55 - 1) / 0.25 + 1;
    # 46 invocations of 217 and one of the last 18.
    assert invocations == 47
    assert messages_in(aws.sqs, aws.queue_url) == []


def test_start_is_shown_by_run_status_and_unknown_runs_are_none(reindex_app: Any) -> None:
    assert reindex_app.run_status("reindex-products", "nope") is None
    assert run_key("reindex-products", "x") == "run#reindex-products:x"
    assert reindex_app.reindex(run_id="direct", cursor=9_500) == 10_000  # calling it runs one page in-process
    assert reindex_app.reindex(run_id="direct", cursor=10_000) is None
    assert len(reindex_app.indexed) == 500
    assert repr(reindex_app.reindex).endswith("reindex_products (chunked)>")

