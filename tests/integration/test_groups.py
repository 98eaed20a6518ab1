"""Job groups and chains through the real worker on moto: counts exact, callbacks once, whatever the duplicates,
redeliveries, redrives, cancels, expiries and crashes."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from aws_support import Serialized

from sqsjobs import JobApp, Outcome, PermanentError
from sqsjobs.ops._redrive import redrive
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.store._lease_ops import Amend
from sqsjobs.testing import messages_in, receive_event
from sqsjobs.worker._delivery import BatchResult
from sqsjobs.workflows._groups import head_key
from sqsjobs.workflows._stage import WorkflowStage


class Killed(BaseException):
    """The invocation dies (not an Exception: nothing in the worker catches it)."""


def drain(app: JobApp, aws: Any, *, rounds: int = 300) -> list[BatchResult]:
    """Lambda's poller: receive, process, delete what was acknowledged; what went back is visible again at once."""
    results = []
    for _ in range(rounds):
        event = receive_event(aws.sqs, aws.queue_url, visibility_timeout=60)
        if not event["Records"]:
            return results
        result = app.process_batch(event)
        results.append(result)
        acked = [d for d in result.deliveries if d.acknowledged]
        returned = [d for d in result.deliveries if not d.acknowledged]
        for i in range(0, len(acked), 10):
            aws.sqs.delete_message_batch(QueueUrl=aws.queue_url, Entries=[
                {"Id": str(j), "ReceiptHandle": d.receipt_handle} for j, d in enumerate(acked[i:i + 10])])
        for d in returned:
            aws.sqs.change_message_visibility(QueueUrl=aws.queue_url, ReceiptHandle=d.receipt_handle,
                                              VisibilityTimeout=0)
    raise AssertionError("the queue did not drain")


def release(aws: Any, event: dict[str, Any]) -> None:
    """A crashed invocation's batch visible again (as after its visibility timeout)."""
    for record in event["Records"]:
        aws.sqs.change_message_visibility(QueueUrl=aws.queue_url, ReceiptHandle=record["receiptHandle"],
                                          VisibilityTimeout=0)


def redrive_all(app: JobApp, aws: Any) -> int:
    options = RedriveOptions(dlq=aws.dlq_url, wait_time_seconds=0)
    return redrive(options, sqs_client=aws.sqs, records=app.runtime.store).moved


@pytest.fixture
def make_app(make_app: Any, aws: Any) -> Any:
    """Apps whose DynamoDB requests are atomic, as DynamoDB's are (``Serialized``)."""
    return lambda **options: make_app(**{"dynamodb_client": Serialized(aws.dynamodb), **options})


@pytest.fixture
def world(make_app: Any) -> Any:
    """An app with a member job (some members fail for good), a callback job, and what each ran."""
    app = make_app(backoff_base=0, backoff_cap=0)
    ran: Counter[int] = Counter()
    reports: list[str] = []
    failing: set[int] = set()

    @app.job("resize", key="resize:{n}")
    def resize(n: int) -> None:
        if n in failing:
            raise PermanentError(f"image {n} is corrupt")
        ran[n] += 1

    @app.job("report", key="report:{run}")
    def report(run: str) -> None:
        reports.append(run)

    class World:
        pass

    w = World()
    w.app, w.ran, w.reports, w.failing, w.resize, w.report = app, ran, reports, failing, resize, report
    return w


def test_a_group_with_a_failure_completes_then_a_redrive_makes_it_a_success(world: Any, aws: Any) -> None:
    app = world.app
    world.failing.add(7)
    group = app.group(on_success=world.report.message(run="success"), on_complete=world.report.message(run="done"),
                      name="thumbnails")
    keys = group.add_many(world.resize.message(n=n) for n in range(12))
    group_id = group.enqueue()
    running = app.group_status(group_id)
    assert (running.total, running.pending, running.state, running.name) == (12, 12, "running", "thumbnails")

    drain(app, aws)
    done = app.group_status(group_id)
    assert (done.total, done.pending, done.succeeded, done.failed, done.dead_lettered) == (12, 0, 11, 1, 1)
    assert done.state == "completed_with_failures" and done.finished_at is not None
    assert world.reports == ["done"]  # on_complete once; on_success not: a member failed
    assert app.status(keys[7]).state == "dead_lettered"

    # The corrupt image is fixed and its letter redriven: the group is a success now, and on_success runs.
    world.failing.clear()
    assert redrive_all(app, aws) == 1
    drain(app, aws)
    fixed = app.group_status(group_id)
    assert (fixed.pending, fixed.succeeded, fixed.failed, fixed.state) == (0, 12, 0, "succeeded")
    assert world.reports == ["done", "success"]
    assert all(world.ran[n] == 1 for n in range(12))


def test_duplicate_sends_and_redeliveries_count_once(world: Any, aws: Any) -> None:
    app = world.app
    group = app.group(on_complete=world.report.message(run="done"))
    group.add_many(world.resize.message(n=n) for n in range(25))
    group_id = group.enqueue()
    app.enqueue_many(group.messages)  # every member sent twice
    drain(app, aws)
    status = app.group_status(group_id)
    assert (status.pending, status.succeeded, status.failed, status.state) == (0, 25, 0, "succeeded")
    assert world.reports == ["done"] and set(world.ran.values()) == {1}
    # The whole group again, after it finished: nothing runs, nothing is counted, no callback is sent.
    app.enqueue_many(group.messages)
    drain(app, aws)
    assert app.group_status(group_id).succeeded == 25 and world.reports == ["done"]


def test_a_group_larger_than_a_shard_counts_every_member_once(world: Any, aws: Any) -> None:
    app = world.app
    world.failing.update({3, 150})
    group = app.group(on_complete=world.report.message(run="done"), on_success=world.report.message(run="ok"))
    group.add_many(world.resize.message(n=n) for n in range(230))
    group_id = group.enqueue()
    heads = app.runtime.store.get(head_key(group_id))
    assert heads.get("shards") == 3
    drain(app, aws)
    status = app.group_status(group_id)
    assert (status.total, status.pending, status.succeeded, status.dead_lettered) == (230, 0, 228, 2)
    assert world.reports == ["done"]


def test_a_crash_after_the_last_count_finishes_the_group_on_redelivery(world: Any, aws: Any, monkeypatch: Any) -> None:
    app = world.app
    group = app.group(on_complete=world.report.message(run="done"))
    group.add(world.resize.message(n=1))
    group_id = group.enqueue()

    def die(self: WorkflowStage, *args: Any) -> None:
        raise Killed("the invocation died after the member's count, before its group was finished")

    monkeypatch.setattr(WorkflowStage, "_finish_group", die)
    event = receive_event(aws.sqs, aws.queue_url, visibility_timeout=60)
    with pytest.raises(Killed):
        app.process_batch(event)
    monkeypatch.undo()
    assert app.group_status(group_id).pending == 0 and world.reports == []
    release(aws, event)
    (result,) = drain(app, aws)[:1]
    assert result.deliveries[0].outcome is Outcome.DUPLICATE
    assert world.reports == ["done"] and world.ran[1] == 1


def test_a_callback_sent_twice_runs_once(world: Any, aws: Any) -> None:
    app = world.app
    group = app.group(on_complete=world.report.message(run="done"))
    group.add(world.resize.message(n=1))
    group_id = group.enqueue()
    drain(app, aws)
    # As if the worker died after sending the callback, before noting it: a duplicate member sends it again.
    assert app.runtime.store.write(Amend(key=head_key(group_id), data={"on_complete_sent": None})).ok
    assert app.runtime.store.get(head_key(group_id)).get("on_complete_sent") is None
    app.enqueue_many(group.messages)
    results = drain(app, aws)
    outcomes = Counter(d.outcome for r in results for d in r.deliveries)
    assert outcomes[Outcome.DUPLICATE] == 2  # the member's copy, and the callback's second copy
    assert world.reports == ["done"]


def test_cancel_group_acknowledges_pending_members_without_running_them(world: Any, aws: Any) -> None:
    app = world.app
    group = app.group(on_complete=world.report.message(run="done"), on_success=world.report.message(run="ok"))
    group.add_many(world.resize.message(n=n) for n in range(6))
    group_id = group.enqueue()
    cancelled = app.cancel_group(group_id, reason="the album was deleted")
    assert (cancelled.state, cancelled.cancelled, cancelled.running, cancelled.already_finished) == \
        ("cancelled", 6, 0, 0)
    drain(app, aws)
    status = app.group_status(group_id)
    assert (status.state, status.pending, status.cancelled, status.failed) == ("cancelled", 0, 6, 6)
    assert not world.ran and world.reports == []  # a cancelled group runs no callback
    assert app.cancel_group(group_id).state == "cancelled"  # nothing left to cancel
    with pytest.raises(Exception, match="no group"):
        app.cancel_group("0" * 32)


def test_members_cancelled_one_by_one_or_expired_are_terminal_too(world: Any, aws: Any, clock: Any) -> None:
    app = world.app
    group = app.group(on_complete=world.report.message(run="done"))
    keys = group.add_many([world.resize.message(n=1), world.resize.message(n=2, expires_in=10),
                           world.resize.message(n=3)])
    group_id = group.enqueue()
    assert app.cancel(keys[0]) == "not_found_but_cancelled"
    clock.advance(60)  # member 2 is older than its expires_in when it arrives
    drain(app, aws)
    status = app.group_status(group_id)
    assert (status.succeeded, status.cancelled, status.expired, status.state) == (1, 1, 1, "completed_with_failures")
    assert world.reports == ["done"] and dict(world.ran) == {3: 1}
    assert app.status(keys[1]).state == "expired"


def test_a_member_this_deploy_cannot_run_is_dead_lettered_and_counted(make_app: Any, aws: Any) -> None:
    producer = make_app()

    @producer.job("resize", key="resize:{n}")
    def resize(n: int) -> None: ...

    @producer.job("report", key="report:{run}")
    def report(run: str) -> None: ...

    worker = make_app()
    reports: list[str] = []

    @worker.job("report", key="report:{run}")
    def worker_report(run: str) -> None:
        reports.append(run)

    group = producer.group(on_complete=report.message(run="done"))
    group.add(resize.message(n=1))
    group_id = group.enqueue()
    drain(worker, aws)
    status = worker.group_status(group_id)
    assert (status.dead_lettered, status.state) == (1, "completed_with_failures") and reports == ["done"]
    (letter,) = messages_in(aws.sqs, aws.dlq_url)
    assert letter["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "malformed"


def test_the_cli_shows_counts_and_the_failed_members(world: Any, aws: Any) -> None:
    from typer.testing import CliRunner

    from sqsjobs.cli import build_app

    app = world.app
    world.failing.add(2)
    group = app.group(name="cli")
    keys = group.add_many(world.resize.message(n=n) for n in range(4))
    group_id = group.enqueue()
    drain(app, aws)
    runner = CliRunner()
    shown = runner.invoke(build_app(), ["group", group_id, "--json", "--table", aws.table])
    assert shown.exit_code == 0, shown.output
    data = json.loads(shown.stdout)
    assert (data["total"], data["succeeded"], data["failed"], data["state"]) == (4, 3, 1, "completed_with_failures")
    (failure,) = data["failures"]
    assert failure["key"] == keys[2] and failure["reason"] == "permanent" and "corrupt" in failure["last_error"]
    table = runner.invoke(build_app(), ["group", group_id, "--table", aws.table])
    assert table.exit_code == 0 and "permanent" in table.output and "completed_with_failures" in table.output
    unknown = runner.invoke(build_app(), ["group", "0" * 32, "--table", aws.table])
    assert unknown.exit_code == 3 and "no group" in unknown.output


# ---------------------------------------------------------------- chains
def test_a_chain_runs_in_order_stops_at_a_dead_letter_and_resumes_after_a_redrive(make_app: Any, aws: Any) -> None:
    from sqsjobs import chain

    app = make_app(backoff_base=0, backoff_cap=0)
    order: list[str] = []
    broken = {"parse"}

    @app.job("fetch", key="fetch:{feed}")
    def fetch(feed: int) -> None:
        order.append("fetch")

    @app.job("parse", key="parse:{feed}")
    def parse(feed: int) -> None:
        if "parse" in broken:
            raise PermanentError("feed 7 is not XML")
        order.append("parse")

    @app.job("publish", key="publish:{feed}")
    def publish(feed: int) -> None:
        order.append("publish")

    steps = chain(fetch.message(feed=7), parse.message(feed=7), publish.message(feed=7), name="feed 7")
    chain_id = steps.enqueue()
    assert app.chain_status(chain_id).state == "running" and app.chain_status(chain_id).step == 0
    drain(app, aws)
    stopped = app.chain_status(chain_id)
    assert (stopped.state, stopped.stopped_at, stopped.reason) == ("stopped", 1, "permanent")
    assert "not XML" in stopped.last_error and [s.state for s in stopped.steps] == \
        ["succeeded", "dead_lettered", "pending"]
    assert order == ["fetch"]

    broken.clear()
    assert redrive_all(app, aws) == 1
    drain(app, aws)
    finished = app.chain_status(chain_id)
    assert (finished.state, finished.step, finished.name) == ("succeeded", 2, "feed 7")
    assert order == ["fetch", "parse", "publish"]
    # A late duplicate of the first step sends the next again (a step's key may have come from another path, so
    # only the key itself can tell): each is a duplicate in turn, and nothing runs again.
    app.enqueue(steps.messages[0])
    results = drain(app, aws)
    assert [d.outcome for r in results for d in r.deliveries] == [Outcome.DUPLICATE] * 3
    assert order == ["fetch", "parse", "publish"]
    assert app.chain_status("0" * 32) is None and app.chain_status("chain#x") is None

    from typer.testing import CliRunner

    from sqsjobs.cli import build_app

    shown = CliRunner().invoke(build_app(), ["chain", chain_id, "--json", "--table", aws.table])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["state"] == "succeeded"
    table = CliRunner().invoke(build_app(), ["chain", chain_id, "--table", aws.table])
    assert table.exit_code == 0 and "publish" in table.output
    assert CliRunner().invoke(build_app(), ["chain", "0" * 32, "--table", aws.table]).exit_code == 3
