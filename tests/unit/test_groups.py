"""Groups and chains without AWS: what they refuse (one clear error each), and their counting on the in-memory store."""

from __future__ import annotations

import re
from typing import Any

import pytest
from botocore.stub import Stubber

from sqsjobs import ChainError, GroupError, InMemoryStore, JobApp, JobMessage, chain
from sqsjobs._runtime import Runtime
from sqsjobs.enqueue._envelope import MemberOf
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._lease import LeaseState
from sqsjobs.store._lease_ops import Close, Transact
from sqsjobs.workflows._groups import (
    MEMBERS_PER_SHARD,
    Callback,
    Count,
    GroupRecords,
    GroupState,
    count,
    head_key,
    shard_count,
    shard_key,
)
from sqsjobs.workflows._members import restored, stored


@pytest.fixture
def app() -> JobApp:
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs", store=InMemoryStore(),
                 clock=lambda: 1000.0)

    @app.job("resize", key="resize:{n}")
    def resize(n: int) -> None: ...

    @app.job("report", key="report:{run}")
    def report(run: str) -> None: ...

    @app.job("reindex", key="reindex:{run_id}:{cursor}", chunked=True)
    def reindex(run_id: str, cursor: int = 0) -> int | None: ...

    return app


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text
    return text


# ---------------------------------------------------------------- bad input
@pytest.mark.parametrize(("member", "says"), [
    ("resize:1", "must be a job message (job.message(...)), got str"),
    ({"job": "resize", "args": {"n": 1}}, "got dict"),
    (JobMessage(job="resize", key="resize:1", body="{}"), "which is not registered on this app"),
])
def test_a_member_that_is_not_a_message_of_a_registered_job_is_refused(app: JobApp, member: Any, says: str) -> None:
    group = app.group()
    with pytest.raises(GroupError) as refused:
        group.add(member)
    assert says in one_line(refused.value)
    assert len(group) == 0


def test_a_message_of_another_apps_job_or_of_a_chunked_job_is_refused(app: JobApp) -> None:
    other = JobApp(queue_url="https://sqs.example/q")

    @other.job("resize", key="resize:{n}")
    def resize(n: int) -> None: ...

    with pytest.raises(GroupError, match="not registered on this app"):
        app.group().add(resize.message(n=1))
    with pytest.raises(GroupError, match="chunked job 'reindex'"):
        app.group().add(app.message("reindex", run_id="r", cursor=0))


def test_add_many_adds_all_or_nothing_and_refuses_a_key_twice(app: JobApp) -> None:
    group = app.group(name="thumbnails")
    with pytest.raises(GroupError, match="'resize:2' is already a member"):
        group.add_many([app.message("resize", n=1), app.message("resize", n=2), app.message("resize", n=2)])
    assert len(group) == 0
    with pytest.raises(GroupError, match="member 1 must be a job message"):
        group.add_many([app.message("resize", n=1), 7])  # type: ignore[list-item]
    assert len(group) == 0
    assert group.add_many([app.message("resize", n=1)]) == ["resize:1"]  # the key the job declares


@pytest.mark.parametrize("callback", ["report:1", 7, {"job": "report"}])
def test_a_callback_that_is_not_a_message_is_refused(app: JobApp, callback: Any) -> None:
    for name in ("on_success", "on_complete"):
        with pytest.raises(GroupError, match=f"^{name} must be a job message"):
            app.group(**{name: callback})


def test_a_group_of_no_members_is_refused_and_nothing_is_written(app: JobApp) -> None:
    group = app.group(on_complete=app.message("report", run="x"))
    with pytest.raises(GroupError, match=r"has no members; add jobs with group\.add"):
        group.enqueue()
    assert app.runtime.store.get(head_key(group.id)) is None


def test_a_bad_name_is_refused(app: JobApp) -> None:
    with pytest.raises(GroupError, match=r"name is text of 1\.\.256 characters"):
        app.group(name="")
    with pytest.raises(ChainError, match="name is text"):
        app.chain(app.message("resize", n=1), name="x" * 300)


def test_adding_after_enqueue_is_refused(app: JobApp, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsjobs.enqueue._producer import EnqueueReport

    sent: list[list[JobMessage]] = []
    monkeypatch.setattr(Runtime, "send_many", lambda self, messages: sent.append(list(messages)) or
                        EnqueueReport(message_ids={i: f"m{i}" for i in range(len(sent[-1]))}, calls=1))
    group = app.group()
    group.add(app.message("resize", n=1))
    group.enqueue()
    assert [m.key for m in sent[0]] == ["resize:1"]
    with pytest.raises(GroupError, match="enqueue\\(\\) was called, and a group's members are fixed then"):
        group.add(app.message("resize", n=2))
    with pytest.raises(GroupError, match="was enqueued already"):
        group.enqueue()


def test_a_partly_sent_group_sends_the_rest_when_enqueued_again(app: JobApp, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsjobs._errors import EnqueueError
    from sqsjobs.enqueue._producer import EnqueueReport, FailedEntry

    calls: list[list[str]] = []

    def send_many(self: Runtime, messages: Any) -> EnqueueReport:
        batch = list(messages)
        calls.append([m.key for m in batch])
        if len(calls) == 1:
            return EnqueueReport(message_ids={0: "m0"}, calls=1, failed=(
                FailedEntry(index=1, key=batch[1].key, code="Throttled", message="slow down", sender_fault=False),))
        return EnqueueReport(message_ids={i: f"m{i}" for i in range(len(batch))}, calls=1)

    monkeypatch.setattr(Runtime, "send_many", send_many)
    group = app.group()
    group.add_many([app.message("resize", n=1), app.message("resize", n=2)])
    with pytest.raises(EnqueueError, match=r"1 of 2 members were not sent .*call enqueue\(\) again"):
        group.enqueue()
    assert group.enqueue() == group.id
    assert calls[1] == ["resize:2"]


def test_group_status_of_an_unknown_or_malformed_id_is_none_and_of_a_non_text_id_an_error(app: JobApp) -> None:
    assert app.group_status("0" * 32) is None
    assert app.group_status("abc#shard#0") is None  # never read as a shard
    with pytest.raises(GroupError, match="a group id is text, got int"):
        app.group_status(42)  # type: ignore[arg-type]
    with pytest.raises(GroupError, match="no group"):
        app.cancel_group("0" * 32)


def test_chains_refuse_no_steps_and_steps_of_no_app(app: JobApp) -> None:
    with pytest.raises(ChainError, match="at least one step"):
        chain()
    with pytest.raises(ChainError, match="at least one step"):
        app.chain()
    with pytest.raises(ChainError, match="names no app"):
        chain(JobMessage(job="resize", key="resize:1", body="{}"))
    with pytest.raises(ChainError, match="step 1 must be a job message"):
        chain(app.message("resize", n=1), "resize:2")  # type: ignore[arg-type]
    with pytest.raises(ChainError, match="step 0 is a message of chunked job"):
        chain(app.message("reindex", run_id="r", cursor=0))


def test_a_step_runs_under_the_key_its_job_declares(app: JobApp) -> None:
    steps = chain(app.message("resize", n=1), app.message("resize", n=2)).messages
    assert [s.key for s in steps] == ["resize:1", "resize:2"]
    assert not any(re.search(r"@chain:", s.body) for s in steps)


# ---------------------------------------------------------------- counting
def test_shards_hold_at_most_a_hundred_members() -> None:
    assert shard_count(MEMBERS_PER_SHARD) == 1 and shard_count(MEMBERS_PER_SHARD + 1) == 2
    assert shard_count(10**7) == 100


def member(i: int, shard: int = 0) -> MemberOf:
    return MemberOf("g", shard, i)


def test_the_shards_last_member_is_told_it_settled_it() -> None:
    store = InMemoryStore()
    records = GroupRecords(store, ttl=9e9)
    records.create("g", [f"k{i}" for i in range(3)], name=None, callbacks={}, now=0.0)  # one shard of 3
    answers = [count(store, Count(member=member(i), outcome="succeeded")) for i in range(3)]
    assert [(a.changed, a.settled) for a in answers] == [(True, False), (True, False), (True, True)]
    # A repeat (a duplicate, a redelivery) counts nothing, and tells the shard is settled.
    again = count(store, Count(member=member(0), outcome="succeeded"))
    assert (again.changed, again.settled, again.error) == (False, True, None)
    assert records.status("g").succeeded == 3
    assert store.get(shard_key("g", 0)).get("counted") == frozenset({0, 1, 2})


def test_a_missing_shard_counts_nothing_and_fails_nothing() -> None:
    store = InMemoryStore()
    answer = count(store, Count(member=MemberOf("gone", 4, 9), outcome="succeeded"))
    assert (answer.changed, answer.settled, answer.error) == (False, False, None)


def test_a_redriven_member_moves_its_count_once() -> None:
    store = InMemoryStore()
    records = GroupRecords(store, ttl=9e9)
    records.create("g", ["k"], name=None, callbacks={}, now=0.0)
    assert count(store, Count(member=member(0), outcome="dead_lettered")).settled
    assert records.status("g").state == GroupState.COMPLETED_WITH_FAILURES
    moved = count(store, Count(member=member(0), outcome="succeeded"))
    status = records.status("g")
    assert moved.changed and (status.succeeded, status.dead_lettered, status.pending) == (1, 0, 0)
    again = count(store, Count(member=member(0), outcome="succeeded"))
    assert not again.changed and records.status("g").succeeded == 1


def test_a_count_the_store_refuses_is_an_error_to_retry() -> None:
    from sqsjobs.testing.flaky_store import FlakyStore

    store = FlakyStore()
    GroupRecords(store, ttl=9e9).create("g", ["k"], name=None, callbacks={}, now=0.0)
    store.fail(lambda op: op.key.startswith("group#"), times=1)
    assert count(store, Count(member=member(0), outcome="succeeded")).error is not None
    assert count(store, Count(member=member(0), outcome="succeeded")).changed


def test_due_finishes_once_and_lists_each_callback_until_it_is_marked_sent(app: JobApp) -> None:
    store = InMemoryStore()
    records = GroupRecords(store, ttl=9e9)
    callbacks = {c: app.message("report", run=c.value) for c in Callback}
    records.create("g", ["k"], name=None, callbacks=callbacks, now=0.0)
    assert records.due("g", 1.0) == (None, [])
    count(store, Count(member=member(0), outcome="succeeded"))
    state, due = records.due("g", 2.0)
    assert state is GroupState.SUCCEEDED and sorted(c.value for c, _ in due) == ["on_complete", "on_success"]
    assert restored(dict(due)[next(iter(dict(due)))]).job == "report"
    for callback, _ in due:
        records.mark_sent("g", callback, 3.0)
    assert records.due("g", 4.0) == (GroupState.SUCCEEDED, [])
    assert store.get(head_key("g")).get("finished_at") == 2.0


def test_stored_messages_round_trip(app: JobApp) -> None:
    message = app.message("report", run="x", delay=30)
    back = restored(stored(message))
    assert (back.job, back.key, back.body, back.delay) == (message.job, message.key, message.body, 30)


# ---------------------------------------------------------------- the DynamoDB store's transactions
def test_a_transaction_cancelled_by_a_conflict_is_sent_again() -> None:
    import boto3

    client = boto3.client("dynamodb", region_name="us-east-1")
    pauses: list[float] = []
    store = DynamoDBStore(client, "t", sleep=pauses.append)
    op = Transact(ops=(Close(key="a", now=0.0, expires_at=1.0), Close(key="b", now=0.0, expires_at=1.0)))
    with Stubber(client) as stub:
        for _ in range(2):
            stub.add_client_error("transact_write_items", service_error_code="TransactionCanceledException",
                                  response_meta={}, modeled_fields={"CancellationReasons": [
                                      {"Code": "None"}, {"Code": "TransactionConflict"}]})
        stub.add_response("transact_write_items", {})
        assert store.write(op).ok
    assert len(pauses) == 2
    with Stubber(client) as stub:
        stub.add_client_error("transact_write_items", service_error_code="TransactionCanceledException",
                              modeled_fields={"CancellationReasons": [
                                  {"Code": "None"}, {"Code": "ConditionalCheckFailed",
                                                     "Item": {"pk": {"S": "b"}, "status": {"S": "DONE"}}}]})
        refused = store.write(op)
    assert refused.refused and refused.refused_at == 1 and refused.item.state is LeaseState.DONE
    with Stubber(client) as stub:
        for _ in range(8):
            stub.add_client_error("transact_write_items", service_error_code="TransactionCanceledException",
                                  modeled_fields={"CancellationReasons": [{"Code": "TransactionConflict"},
                                                                          {"Code": "None"}]})
        failed = store.write(op)
    assert failed.error is not None and "TransactWriteItems" in failed.error


def test_shard_keys_are_reserved(app: JobApp) -> None:
    from sqsjobs.store._lease import is_reserved

    assert is_reserved(shard_key("g", 0)) and is_reserved(head_key("g")) and not is_reserved("k")


@pytest.mark.parametrize("name", ["sqsjobs.workflows._groups", "sqsjobs.workflows._group", "sqsjobs.workflows._chains",
                                  "sqsjobs.workflows._members",
                                  "sqsjobs.enqueue._envelope",
                                  "sqsjobs.store._lease", "sqsjobs.store._lease_ops",
                                  "sqsjobs._app", "sqsjobs.cli.groups"])
def test_docstring_examples(name: str) -> None:
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
