"""Batch handlers (issue 26): ``@app.job(..., batch=N)`` without AWS, under ``app.testing()`` (InMemoryStore + FakeSQS).

One call takes up to N claimed items of one SQS batch; each item keeps its own
key, claim, attempts, retries and dead letter; limiters and groups count items.
"""

from __future__ import annotations

from typing import Any, TypedDict

import pytest

from sqsjobs import BatchItemsFailed, ConfigurationError, JobApp, Outcome, PermanentError, RetryableError
from sqsjobs._batch_job import item_errors


class Doc(TypedDict):
    doc_id: int


class Move(TypedDict):
    account: str
    doc_id: int


class Bad(TypedDict):
    doc: dict[str, int]


def make_app(batch: int = 4, **options: Any) -> tuple[JobApp, list[list[int]], dict[int, BaseException]]:
    app = JobApp()
    calls: list[list[int]] = []
    failing: dict[int, BaseException] = {}  # doc id → what its item fails with

    @app.job("index-docs", key="index-docs:{doc_id}", batch=batch, backoff_base=10, backoff_cap=10, jitter=False,
             **options)
    def index_docs(items: list[Doc]) -> dict[int, BaseException]:
        calls.append([item["doc_id"] for item in items])
        return {i: failing[item["doc_id"]] for i, item in enumerate(items) if item["doc_id"] in failing}

    @app.job("greet", key="greet:{n}")
    def greet(n: int) -> None: ...

    return app, calls, failing


def test_one_sqs_batch_runs_in_calls_of_n_items_and_each_item_keeps_its_own_record() -> None:
    app, calls, _ = make_app(batch=4)
    with app.testing() as t:
        for n in range(10):
            app.enqueue("index-docs", doc_id=n)
        app.enqueue("greet", n=1)
        (result,) = t.drain(batch_size=11)
        assert calls == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        assert result.response() == {"batchItemFailures": []}
        assert t.count(Outcome.SUCCEEDED, job="index-docs") == 10 and t.count(Outcome.SUCCEEDED, job="greet") == 1
        assert all(app.status(f"index-docs:{n}").state == "succeeded" for n in range(10))
        assert [app.status(f"index-docs:{n}").attempts for n in range(10)] == [1] * 10


def test_a_named_item_retries_alone_and_the_others_are_done() -> None:
    app, calls, failing = make_app(batch=10)
    failing[2] = RetryableError("search index busy")
    with app.testing() as t:
        t.run(*(app.message("index-docs", doc_id=n) for n in range(5)))
        assert calls == [[0, 1, 2, 3, 4]]
        assert [o.outcome for o in t.outcomes] == [Outcome.SUCCEEDED] * 2 + [Outcome.RETRY] + [Outcome.SUCCEEDED] * 2
        failing.clear()
        start = t.clock()
        t.drain(batch_size=5)
        assert calls == [[0, 1, 2, 3, 4], [2]]  # only the failed item came back, after its own backoff
        assert t.clock() - start == 10.0
        assert app.status("index-docs:2").attempts == 2 and app.status("index-docs:0").attempts == 1


def test_batch_items_failed_dead_letters_a_permanent_item_and_retries_a_retryable_one() -> None:
    app = JobApp()
    calls: list[list[int]] = []

    @app.job("load-rows", key="load-rows:{doc_id}", batch=10, max_attempts=2, backoff_base=1, backoff_cap=1)
    def load_rows(items: list[Doc]) -> None:
        calls.append([item["doc_id"] for item in items])
        raise BatchItemsFailed({i: PermanentError(f"row {item['doc_id']} is gone") if item["doc_id"] == 1
                                else RetryableError("throttled") for i, item in enumerate(items)
                                if item["doc_id"] in (1, 3)})

    with app.testing() as t:
        for n in range(4):
            app.enqueue("load-rows", doc_id=n)
        t.drain(batch_size=4)
        assert calls[0] == [0, 1, 2, 3] and calls[1:] == [[3]]  # 3 retried once, then out of attempts
        letters = {letter.key: letter for letter in t.dead_letters()}
        assert set(letters) == {"load-rows:1", "load-rows:3"}
        assert (letters["load-rows:1"].reason, letters["load-rows:1"].error_message) == ("permanent", "row 1 is gone")
        assert letters["load-rows:3"].reason == "exhausted" and letters["load-rows:3"].attempts == 2
        assert [app.status(f"load-rows:{n}").state for n in range(4)] == [
            "succeeded", "dead_lettered", "succeeded", "dead_lettered"]


def test_an_exception_that_names_no_item_fails_every_item_of_the_call() -> None:
    app = JobApp()

    @app.job("push", key="push:{doc_id}", batch=3, max_attempts=1)
    def push(items: list[Doc]) -> None:
        raise ConnectionError("search is down")

    with app.testing() as t:
        t.run(*(push.message(doc_id=n) for n in range(3)))
        assert [o.outcome for o in t.outcomes] == [Outcome.DEAD_LETTERED] * 3
        assert {type(o.error) for o in t.outcomes} == {ConnectionError}


def test_a_duplicate_or_completed_key_is_never_handed_to_the_handler_again() -> None:
    app, calls, _ = make_app(batch=10)
    with app.testing() as t:
        t.run(*(app.message("index-docs", doc_id=n) for n in (1, 2, 1)))
        t.run(*(app.message("index-docs", doc_id=n) for n in (2, 3)))
        assert calls == [[1, 2], [3]]
        assert t.count(Outcome.DUPLICATE, job="index-docs") == 2


def test_a_rate_limit_counts_items_not_calls() -> None:
    app = JobApp()
    app.rate_limit("search", rate=3)
    calls: list[list[int]] = []

    @app.job("reindex", key="reindex:{doc_id}", batch=10, limits=["search"])
    def reindex(items: list[Doc]) -> None:
        calls.append([item["doc_id"] for item in items])

    with app.testing() as t:
        started = t.clock()
        result = t.run(*(reindex.message(doc_id=n) for n in range(8)))
        # Slots (1 s + grace) / 3 apart: the six within the batch's 2 s run, a call each at its slot; the
        # other two are deferred once, to their slots (a copy carries them: nothing left to fail).
        assert calls == [[0], [1], [2], [3], [4], [5]]
        assert t.count(Outcome.DEFERRED) == 2 and result.failures == ()
        assert 1.75 <= t.clock() - started < 2.0


def test_under_a_concurrency_limit_a_call_holds_one_item_and_each_failed_item_is_counted() -> None:
    app = JobApp()
    app.concurrency_limit("search", 2)
    calls: list[list[int]] = []

    @app.job("reindex", key="reindex:{doc_id}", batch=10, limits=["search"])
    def reindex(items: list[Doc]) -> dict[int, BaseException]:
        calls.append([item["doc_id"] for item in items])
        return {0: RetryableError("busy")}

    with app.testing() as t:
        t.run(*(reindex.message(doc_id=n) for n in range(5)))
        # The invocation holds one slot, so one item runs at a time: a call each, never two items at once.
        assert calls == [[0], [1], [2], [3], [4]]
        assert (t.count(Outcome.RETRY), t.count(Outcome.SUCCEEDED)) == (5, 0)
        metrics = "".join(t.metrics).replace(" ", "")
        assert '"JobFailed":[5.0]' in metrics and '"JobRetried":[5.0]' in metrics


def test_a_group_counts_each_item() -> None:
    app, _, failing = make_app(batch=10, max_attempts=1)
    failing[4] = PermanentError("doc 4 is gone")
    done: list[str] = []

    @app.job("report", key="report:{run}")
    def report(run: str) -> None:
        done.append(run)

    with app.testing() as t:
        group = app.group(on_complete=report.message(run="done"))
        group.add_many(app.message("index-docs", doc_id=n) for n in range(6))
        group_id = group.enqueue()
        t.drain(batch_size=10)
        status = app.group_status(group_id)
        assert (status.total, status.succeeded, status.dead_lettered, status.pending) == (6, 5, 1, 0)
        assert done == ["done"]


def test_expired_and_cancelled_items_are_acknowledged_without_reaching_the_handler() -> None:
    app, calls, _ = make_app(batch=10, expires_in=60)
    with app.testing() as t:
        old = app.message("index-docs", doc_id=1)
        t.clock.advance(61)
        app.cancel("index-docs:3")
        t.run(old, app.message("index-docs", doc_id=2), app.message("index-docs", doc_id=3))
        assert calls == [[2]]
        assert {o.key: o.outcome for o in t.outcomes} == {
            "index-docs:1": Outcome.EXPIRED, "index-docs:2": Outcome.SUCCEEDED, "index-docs:3": Outcome.CANCELLED}


def test_a_fifo_call_takes_one_item_of_a_group_and_a_failed_one_holds_its_group_back() -> None:
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo")
    calls: list[list[int]] = []

    @app.job("move", key="move:{doc_id}", group="{account}", batch=10)
    def move(items: list[Move]) -> dict[int, BaseException]:
        calls.append([item["doc_id"] for item in items])
        return {i: RetryableError("later") for i, item in enumerate(items) if item["doc_id"] == 1}

    with app.testing() as t:
        t.run(move.message(account="a", doc_id=1), move.message(account="a", doc_id=2),
              move.message(account="b", doc_id=3), move.message(account="b", doc_id=4))
        assert calls == [[1, 3], [4]]  # 2 waits behind 1, which goes back: FIFO order holds
        assert {o.key: o.outcome for o in t.outcomes}["move:2"] is Outcome.GROUP_BLOCKED


def test_a_fifo_item_behind_another_jobs_message_of_its_group_waits_for_it() -> None:
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo")
    order: list[str] = []

    @app.job("move", key="move:{doc_id}", group="{account}", batch=10)
    def move(items: list[Move]) -> None:
        order.extend(f"move:{item['doc_id']}" for item in items)

    @app.job("note", key="note:{doc_id}", group="{account}")
    def note(account: str, doc_id: int) -> None:
        order.append(f"note:{doc_id}")

    with app.testing() as t:
        t.run(move.message(account="a", doc_id=1), note.message(account="a", doc_id=2),
              move.message(account="a", doc_id=3), move.message(account="b", doc_id=4))
        assert order == ["move:1", "move:4", "note:2", "move:3"]  # group a's order holds across the two jobs
        assert t.count(Outcome.SUCCEEDED) == 4


def test_declaration_refuses_what_cannot_work() -> None:
    app = JobApp()
    with pytest.raises(ConfigurationError, match=r"batch must be an integer in 1\.\.10000"):
        app.job("a", batch=0)
    with pytest.raises(ConfigurationError, match="does not combine with store_result"):
        app.job("b", batch=5, store_result=True)
    with pytest.raises(ConfigurationError, match="a list of items annotated with a TypedDict"):
        @app.job("c", batch=5)
        def plain(doc_id: int) -> None: ...
    with pytest.raises(ConfigurationError, match="IDs and scalars"):
        @app.job("d", batch=5)
        def bad(items: list[Bad]) -> None: ...


def test_an_unreadable_report_fails_every_item_permanently() -> None:
    assert [str(e) for e in item_errors(2, returned=[0])] == [
        "the batch handler's report is unusable: it returned a list; return None or a mapping {item index: "
        "exception}"] * 2
    (first, _) = item_errors(2, returned={5: ValueError()})
    assert isinstance(first, PermanentError) and "named item 5, not an index of its 2 items" in str(first)
    assert item_errors(2, returned={}) == [None, None]
