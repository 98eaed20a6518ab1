"""One key, one logical operation, on every path (docs/jobs.md "Keys"): the findings of issue 22, each reproduced.

A delivery of a key runs only if no other delivery of it completed it or holds
it, whatever path it came by (standalone, group member, chain step, callback);
a record written by another job is a ``key_conflict`` letter naming both jobs,
never a duplicate.
"""

from __future__ import annotations

import json

import pytest

from sqsjobs import JobApp, Outcome
from sqsjobs.store._lease_ops import Complete, Release, Transact
from sqsjobs.testing.flaky_store import FlakyStore
from sqsjobs.testing.tester import JobTester


@pytest.fixture
def app() -> JobApp:
    return JobApp()


def letters(t: JobTester) -> list[tuple[str, str]]:
    return [(letter.job, letter.reason) for letter in t.dead_letters()]


# ---------------------------------------------------------------- 1, 2: another job or version on the key
def test_another_job_on_the_same_key_is_a_key_conflict_naming_both_jobs(app: JobApp) -> None:
    ran: list[str] = []

    @app.job("welcome-email", key="user:{user_id}")
    def welcome(user_id: int) -> None:
        ran.append("welcome")

    @app.job("provision-account", key="user:{user_id}")
    def provision(user_id: int) -> None:
        ran.append("provision")

    with app.testing() as t:
        welcome.enqueue(user_id=1)
        t.drain()
        provision.enqueue(user_id=1)
        t.drain()
        assert ran == ["welcome"]
        assert letters(t) == [("provision-account", "key_conflict")]
        text = t.dead_letters()[0].error_message
        assert "welcome-email" in text and "provision-account" in text


def test_another_job_at_another_version_is_a_key_conflict_too(app: JobApp) -> None:
    ran: list[str] = []

    @app.job("charge-card", key="order:{order_id}")
    def charge(order_id: int) -> None:
        ran.append("charge")

    @app.job("ship-order", key="order:{order_id}", version=2)
    def ship(order_id: int) -> None:
        ran.append("ship")

    @ship.upcaster(from_version=1)
    def same(args: dict) -> dict:  # type: ignore[type-arg]
        return args

    with app.testing() as t:
        charge.enqueue(order_id=9)
        t.drain()
        ship.enqueue(order_id=9)
        t.drain()
        assert ran == ["charge"]
        assert letters(t) == [("ship-order", "key_conflict")]


# ---------------------------------------------------------------- 3, 4: a member's key is the key the user declared
def declare_index(app: JobApp, ran: list[int]) -> tuple[object, object]:
    @app.job("index-doc", key="index-doc:{doc_id}")
    def index(doc_id: int) -> None:
        ran.append(doc_id)

    reports: list[str] = []

    @app.job("report", key="report:{run}")
    def report(run: str) -> None:
        reports.append(run)

    return index, (report, reports)


def test_a_member_also_sent_on_its_own_runs_once_and_its_group_calls_back_once(app: JobApp) -> None:
    ran: list[int] = []
    index, (report, reports) = declare_index(app, ran)
    with app.testing() as t:
        group = app.group(on_complete=report.message(run="r1"))  # type: ignore[attr-defined]
        group.add_many(index.message(doc_id=i) for i in (12, 13, 14))  # type: ignore[attr-defined]
        group_id = group.enqueue()
        index.enqueue(doc_id=13)  # type: ignore[attr-defined]
        t.drain()
        assert sorted(ran) == [12, 13, 14]
        assert reports == ["r1"]
        status = app.group_status(group_id)
        assert status is not None and (status.state, status.pending, status.succeeded) == ("succeeded", 0, 3)


def test_a_key_completed_before_its_group_counts_as_succeeded_without_running_again(app: JobApp) -> None:
    ran: list[int] = []
    index, (report, reports) = declare_index(app, ran)
    with app.testing() as t:
        index.enqueue(doc_id=13)  # type: ignore[attr-defined]
        t.drain()
        group = app.group(on_complete=report.message(run="r2"))  # type: ignore[attr-defined]
        keys = group.add_many(index.message(doc_id=i) for i in (13, 14))  # type: ignore[attr-defined]
        group_id = group.enqueue()
        t.drain()
        assert keys == ["index-doc:13", "index-doc:14"]
        assert ran == [13, 14]
        assert {sent.key for sent in t.enqueued("index-doc")} == {"index-doc:13", "index-doc:14"}
        assert reports == ["r2"]
        status = app.group_status(group_id)
        assert status is not None and (status.state, status.succeeded) == ("succeeded", 2)
        found = app.status("index-doc:13")
        assert found is not None and found.state == "succeeded"


def test_a_chain_step_runs_under_its_declared_key(app: JobApp) -> None:
    ran: list[int] = []
    index, _ = declare_index(app, ran)
    with app.testing() as t:
        index.enqueue(doc_id=1)  # type: ignore[attr-defined]
        t.drain()
        app.chain(index.message(doc_id=1), index.message(doc_id=2)).enqueue()  # type: ignore[attr-defined]
        t.drain()
        assert ran == [1, 2]  # step 0 was done already: a duplicate, and the chain went on
        assert {sent.key for sent in t.enqueued("index-doc")} == {"index-doc:1", "index-doc:2"}


# ---------------------------------------------------------------- 5, 6, 7: writes that fail
def test_a_store_error_while_dead_lettering_a_member_still_finishes_its_group(app: JobApp) -> None:
    from sqsjobs import PermanentError

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        if n == 2:
            raise PermanentError("no such document")

    done: list[str] = []

    @app.job("after", key="after:{run}")
    def after(run: str) -> None:
        done.append(run)

    store = FlakyStore()
    # The dead-lettered member's record write (and, where it goes with it, its count) fails once.
    store.fail(lambda op: any(isinstance(o, Release) and o.data.get("outcome") == "dead_lettered"
                              for o in (op.ops if isinstance(op, Transact) else (op,))), times=1)
    with app.testing(store=store) as t:
        group = app.group(on_complete=after.message(run="x"))
        group.add_many(flaky.message(n=i) for i in (1, 2, 3))
        group_id = group.enqueue()
        t.drain()
        assert store.failures == 1
        assert done == ["x"]
        status = app.group_status(group_id)
        assert status is not None and (status.state, status.succeeded, status.dead_lettered) == (
            "completed_with_failures", 2, 1)


@pytest.mark.parametrize("in_group", [False, True])
def test_a_completion_write_that_fails_never_runs_the_job_again(app: JobApp, in_group: bool) -> None:
    ran: list[int] = []

    @app.job("charge", key="charge:{n}")
    def charge(n: int) -> None:
        ran.append(n)

    @app.job("receipt", key="receipt:{run}")
    def receipt(run: str) -> None: ...

    store = FlakyStore()
    # Every try of the first completion fails (more than the worker retries inside the invocation).
    store.fail(lambda op: any(isinstance(o, Complete) and o.key == "charge:1"
                              for o in (op.ops if isinstance(op, Transact) else (op,))), times=20)
    with app.testing(store=store) as t:
        if in_group:
            group = app.group(on_complete=receipt.message(run="g"))
            group.add(charge.message(n=1))
            group.enqueue()
        else:
            charge.enqueue(n=1)
        t.drain()
        t.clock.advance(3600)  # long after every lease ran out
        charge.enqueue(n=1)  # the same operation, asked for again
        t.drain()
        assert ran == [1]
        found = app.status("charge:1")
        assert found is not None and found.state == "succeeded"


def test_a_completion_write_is_retried_inside_the_invocation(app: JobApp) -> None:
    ran: list[int] = []

    @app.job("charge", key="charge:{n}")
    def charge(n: int) -> None:
        ran.append(n)

    store = FlakyStore()
    store.fail(lambda op: isinstance(op, Complete), times=2)
    with app.testing(store=store) as t:
        charge.enqueue(n=1)
        [result] = t.drain()
        assert ran == [1] and store.failures == 2
        assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED]
        assert result.store_errors == 0
        found = app.status("charge:1")
        assert found is not None and found.state == "succeeded"


# ---------------------------------------------------------------- 8: bounded event attributes
def test_a_huge_sent_timestamp_is_bounded_and_the_rest_of_the_batch_runs(app: JobApp) -> None:
    from sqsjobs.testing.events import FakeContext

    ran: list[int] = []

    @app.job("count", key="count:{n}", expires_in=60)
    def count(n: int) -> None:
        ran.append(n)

    with app.testing() as t:
        records = []
        for n in (1, 2):
            # No enqueued_at in the body (an older or hand-written producer): expiry reads SentTimestamp.
            body = json.dumps({"v": 1, "job": "count", "key": f"count:{n}", "args": {"n": n}})
            records.append({"messageId": f"m-{n}", "receiptHandle": f"r-{n}", "body": body,
                            "attributes": {"ApproximateReceiveCount": "1", "SentTimestamp": "9" * 400,
                                           "ApproximateFirstReceiveTimestamp": "9" * 5000},
                            "messageAttributes": {}, "eventSourceARN": t.sqs.arn(t.queue_url)})
        result = app.process_batch({"Records": records}, FakeContext(clock=t.clock))
        assert sorted(ran) == [1, 2]
        assert result.failures == ()
