"""debounce= and dedupe= (enqueue/_debounce.py, enqueue/_debounce_stage.py) under app.testing() and its manual clock."""

from __future__ import annotations

import json

import pytest

from sqsjobs import ConfigurationError, InvalidArgumentsError, JobApp, Outcome
from sqsjobs.enqueue._debounce import Receipt, dedupe_hold


def debounced_app() -> tuple[JobApp, list[tuple[int, str]]]:
    app = JobApp()
    ran: list[tuple[int, str]] = []

    @app.job("reindex", key="reindex:{product_id}", debounce=30)
    def reindex(product_id: int, title: str) -> None:
        ran.append((product_id, title))

    return app, ran


def test_a_burst_of_twenty_edits_runs_once_with_the_last_arguments() -> None:
    app, ran = debounced_app()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        for n in range(20):
            reindex.enqueue(product_id=7, title=f"edit {n}")
        record = t.store.get("reindex:7")
        assert record is not None and record.get("debounce_count") == 20
        t.drain()
        assert ran == [(7, "edit 19")]
        assert t.count(Outcome.SUCCEEDED) == 1 and t.count(Outcome.SUPERSEDED) == 19
        superseded = json.dumps(t.metrics)
        assert "JobSuperseded" in superseded


def test_each_enqueue_is_one_write_and_one_send() -> None:
    app, _ = debounced_app()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        calls, writes = len(t.calls), t.store.calls
        reindex.enqueue(product_id=1, title="a")
        assert [c.operation for c in t.calls[calls:]] == ["SendMessage"]
        assert t.store.calls - writes == 1
        sent = t.enqueued("reindex")[0]
        assert sent.delay == 30


def test_a_new_burst_after_a_completed_one_runs_again_and_a_stale_copy_is_superseded() -> None:
    app, ran = debounced_app()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        reindex.enqueue(product_id=7, title="first")
        first_body = t.sqs.sent_to(t.queue_url)[0].body
        t.drain()
        reindex.enqueue(product_id=7, title="second")
        t.drain()
        assert ran == [(7, "first"), (7, "second")]
        t.run(first_body)  # a redelivery (or a redrive) of the first burst
        assert t.outcomes[-1].outcome is Outcome.SUPERSEDED
        assert ran == [(7, "first"), (7, "second")]


def test_a_copy_of_the_burst_that_completed_is_a_duplicate() -> None:
    app, ran = debounced_app()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        reindex.enqueue(product_id=7, title="only")
        body = t.sqs.sent_to(t.queue_url)[0].body
        t.drain()
        t.run(body)
        assert [o.outcome for o in t.outcomes] == [Outcome.SUCCEEDED, Outcome.DUPLICATE]
        assert ran == [(7, "only")]


def test_a_burst_enqueued_while_the_previous_one_runs_runs_after_it() -> None:
    app = JobApp()
    ran: list[str] = []

    @app.job("reindex", key="reindex:{product_id}", debounce=5)
    def reindex(product_id: int, title: str) -> None:
        if title == "first":  # a new edit arrives while the first burst's run goes on
            reindex.enqueue(product_id=product_id, title="during")
        ran.append(title)

    with app.testing() as t:
        reindex.enqueue(product_id=3, title="first")
        t.drain()
        assert ran == ["first", "during"]


def test_a_token_replaced_between_the_read_and_the_claim_is_caught_by_the_claims_answer() -> None:
    app, ran = debounced_app()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        reindex.enqueue(product_id=7, title="old")
        old = t.sqs.sent_to(t.queue_url)[0].body
        reindex.enqueue(product_id=7, title="new")
        # the record's token moves on after before_claim read it: the claim's answer still says so
        # the stage is built by the first batch that holds a debounced job (OnDemand, worker/_stages.py)
        stage = next(s for s in app.runtime.consumer.stages.stages if s.name == "DebounceStage")
        read = stage.before_claim
        stage.before_claim = lambda batch: None  # type: ignore[method-assign]
        try:
            t.run(old)
        finally:
            stage.before_claim = read  # type: ignore[method-assign]
        assert t.outcomes[-1].outcome is Outcome.SUPERSEDED and ran == []
        t.drain()
        assert ran == [(7, "new")]


def test_a_window_beyond_900_s_waits_in_one_schedule_replaced_on_each_enqueue() -> None:
    app, ran = debounced_app()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        for n in range(3):
            reindex.enqueue(product_id=7, title=f"edit {n}", debounce=3600)
            t.clock.advance(60)
        assert len(t.scheduled("reindex")) == 1
        t.advance(3600)
        t.drain()
        assert ran == [(7, "edit 2")]


def test_options_are_validated() -> None:
    app = JobApp()
    with pytest.raises(ConfigurationError, match="debounce must be a positive number"):
        app.job("a", debounce=-1)(lambda: None)
    with pytest.raises(ConfigurationError, match="dedupe must be one of"):
        app.job("b", dedupe="forever")(lambda: None)
    with pytest.raises(ConfigurationError, match="do not combine"):
        app.job("c", debounce=5, dedupe="until_done")(lambda: None)
    app2, _ = debounced_app()
    with app2.testing(), pytest.raises(InvalidArgumentsError, match="takes no delay"):
        app2.runtime.job("reindex").enqueue(product_id=1, title="x", delay=10)


def dedupe_app(mode: str) -> tuple[JobApp, list[int]]:
    app = JobApp()
    ran: list[int] = []

    @app.job("export", key="export:{account_id}", dedupe=mode)
    def export(account_id: int) -> None:
        ran.append(account_id)

    return app, ran


def test_an_enqueue_of_a_queued_key_is_refused_with_no_send() -> None:
    app, ran = dedupe_app("until_started")
    export = app.runtime.job("export")
    with app.testing() as t:
        first = export.enqueue(account_id=1)
        sends = len(t.enqueued())
        second = export.enqueue(account_id=1)
        assert isinstance(first, Receipt) and not first.duplicate and first.message_id
        assert second.duplicate and second == first and len(t.enqueued()) == sends
        assert "JobDeduplicated" in json.dumps(t.metrics)
        t.drain()
        assert ran == [1]


def test_until_started_frees_the_key_at_the_claim() -> None:
    app, ran = dedupe_app("until_started")
    export = app.runtime.job("export")
    with app.testing() as t:
        export.enqueue(account_id=1)
        t.drain()
        again = export.enqueue(account_id=1)
        assert not again.duplicate  # sent: the worker then sees a completed key (a duplicate)
        t.drain()
        assert ran == [1] and t.outcomes[-1].outcome is Outcome.DUPLICATE


def test_until_done_refuses_while_running_and_frees_when_done() -> None:
    app = JobApp()
    answers: list[bool] = []

    @app.job("export", key="export:{account_id}", dedupe="until_done")
    def export(account_id: int) -> None:
        answers.append(export.enqueue(account_id=account_id).duplicate)

    with app.testing() as t:
        export.enqueue(account_id=2)
        t.drain()
        assert answers == [True]
        assert not export.enqueue(account_id=2).duplicate


def test_a_lost_message_blocks_the_key_only_until_its_hold_ends() -> None:
    app, _ = dedupe_app("until_done")
    export = app.runtime.job("export")
    with app.testing() as t:
        export.enqueue(account_id=5)
        for lost in t.sqs.receive(t.queue_url, 10):  # the message is lost (purged)
            t.sqs.delete_message(QueueUrl=t.queue_url, ReceiptHandle=lost.receipt_handle)
        hold = dedupe_hold(export.options, app.settings, 0)
        t.clock.advance(hold - 1)
        assert export.enqueue(account_id=5).duplicate
        t.clock.advance(2)
        assert not export.enqueue(account_id=5).duplicate


def test_enqueue_many_dedupes_within_its_own_list() -> None:
    app, ran = dedupe_app("until_started")
    export = app.runtime.job("export")
    with app.testing() as t:
        report = app.enqueue_many([export.message(account_id=1), export.message(account_id=1),
                                   export.message(account_id=2)])
        assert report.sent == 2 and sorted(report.duplicates) == [1]
        t.drain()
        assert sorted(ran) == [1, 2]


def test_app_enqueue_by_name_keeps_both_and_a_prepared_debounced_message_is_refused() -> None:
    app, ran = debounced_app()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        for n in range(3):
            app.enqueue("reindex", product_id=2, title=f"t{n}")
        with pytest.raises(InvalidArgumentsError, match="is debounced"):
            app.enqueue(reindex.message(product_id=2, title="x"))
        with pytest.raises(InvalidArgumentsError, match="is debounced"):
            app.enqueue_many([reindex.message(product_id=2, title="x")])
        t.drain()
        assert ran == [(2, "t2")]
    dd, _ = dedupe_app("until_done")
    export = dd.runtime.job("export")
    with dd.testing():
        assert not dd.enqueue(export.message(account_id=4)).duplicate
        assert dd.enqueue(export.message(account_id=4)).duplicate
        assert dd.enqueue("export", account_id=4).duplicate


def test_sqsjobs_jobs_lists_both_options() -> None:
    from typer.testing import CliRunner

    from sqsjobs.cli import build_app
    from sqsjobs.cli.jobs import describe_jobs

    app, _ = debounced_app()

    @app.job("export", key="export:{account_id}", dedupe="until_started")
    def export(account_id: int) -> None: ...

    rows = {row["name"]: row for row in describe_jobs(app)}
    assert (rows["reindex"]["debounce"], rows["reindex"]["dedupe"]) == (30.0, None)
    assert (rows["export"]["debounce"], rows["export"]["dedupe"]) == (None, "until_started")
    import sys
    import types

    module = types.ModuleType("debounce_cli_app")
    module.app = app  # type: ignore[attr-defined]
    sys.modules["debounce_cli_app"] = module
    try:
        shown = CliRunner().invoke(build_app(), ["jobs", "--app", "debounce_cli_app:app"], env={"COLUMNS": "250"})
    finally:
        del sys.modules["debounce_cli_app"]
    assert shown.exit_code == 0, shown.output
    assert "debounce 30 s" in shown.output and "dedupe until_started" in shown.output


def test_a_failed_send_gives_the_deduplicated_key_back() -> None:
    app, _ = dedupe_app("until_done")
    export = app.runtime.job("export")
    with app.testing() as t:
        t.sqs.refuse("SendMessage", queue_url=t.queue_url, times=10)  # more than botocore's retries
        with pytest.raises(Exception):  # noqa: B017 - whichever error the producer raises for a refused send
            export.enqueue(account_id=9)
        t.sqs.clear_refusals()
        assert not export.enqueue(account_id=9).duplicate  # the key was given back: this one is sent


def test_a_failed_re_arm_sends_the_burst_back_instead_of_taking_it_for_a_duplicate() -> None:
    from sqsjobs.store._enqueue_ops import Rearm
    from sqsjobs.testing.flaky_store import FlakyStore

    app, ran = debounced_app()
    reindex = app.runtime.job("reindex")
    store = FlakyStore()
    with app.testing(store=store) as t:
        reindex.enqueue(product_id=7, title="first")
        t.drain()
        reindex.enqueue(product_id=7, title="second")
        second = t.sqs.sent_to(t.queue_url)[-1].body
        store.fail(lambda op: isinstance(op, Rearm))
        t.clock.advance(30)
        t.run(second, second)  # two copies of the burst in one batch: neither may claim
        assert [o.outcome for o in t.outcomes[-2:]] == [Outcome.RETRY, Outcome.RETRY]  # back, not acknowledged
        assert ran == [(7, "first")]
        t.drain()
        assert ran == [(7, "first"), (7, "second")]


@pytest.mark.parametrize("mode", ["until_started", "until_done"])
def test_an_enqueue_of_a_cancelled_key_sends_nothing_and_its_receipt_says_so(mode: str) -> None:
    """Issue 31 item 4: the request was sent (duplicate=False) and acknowledged `cancelled`, unrun, until the TTL."""
    app, ran = dedupe_app(mode)
    export = app.runtime.job("export")
    with app.testing() as t:
        export.enqueue(account_id=1)
        assert app.cancel("export:1") == "cancelled"
        t.drain()
        sends = len(t.enqueued())
        receipt = export.enqueue(account_id=1)
        assert receipt.cancelled and not receipt.duplicate and receipt.refused and receipt.message_id is None
        assert receipt == "export:1" and len(t.enqueued()) == sends
        assert app.cancel("export:2") == "not_found_but_cancelled"  # a cancel before any request
        report = app.enqueue_many([export.message(account_id=2), export.message(account_id=2),
                                   export.message(account_id=3)])
        assert report.sent == 1 and report.cancelled == {0: "export:2", 1: "export:2"} and not report.duplicates
        assert "JobDeduplicated" not in json.dumps(t.metrics)
        t.drain()
        assert ran == [3]
        t.clock.advance(app.settings.record_ttl + 1)  # the record's TTL ends the cancel
        fresh = export.enqueue(account_id=1)
        assert not fresh.refused and fresh.message_id
        t.drain()
        assert ran == [3, 1]


def test_a_key_runs_more_bursts_than_max_attempts_each_with_fresh_attempts() -> None:
    """Found while tracing a story of tests/model: the key's attempt counter ran on across bursts, so with
    max_attempts=3 its 4th burst was dead-lettered "exhausted" without running."""
    app = JobApp(max_attempts=3)
    ran: list[int] = []

    @app.job("reindex", key="reindex:{product_id}", debounce=30)
    def reindex(product_id: int, v: int) -> None:
        ran.append(v)

    with app.testing() as t:
        for v in range(7):
            reindex.enqueue(product_id=1, v=v)
            t.clock.advance(31)
            t.drain()
        assert ran == list(range(7)) and t.count(Outcome.SUCCEEDED) == 7
        status = app.status("reindex:1")
        assert status is not None and status.attempts == 7  # every run is still counted


def test_a_burst_enqueued_while_an_earlier_one_keeps_failing_gets_its_own_attempts() -> None:
    """Found by tests/model: the new burst inherited the superseded burst's attempts (2 of 3 here), so its first
    failure was its last."""
    app = JobApp(max_attempts=3)
    tries: list[int] = []

    @app.job("reindex", key="reindex:{product_id}", debounce=30)
    def reindex(product_id: int, v: int) -> None:
        tries.append(v)
        if v == 1 or tries.count(2) < 3:
            raise ConnectionError("index busy")

    with app.testing() as t:
        reindex.enqueue(product_id=1, v=1)
        t.clock.advance(31)
        for _ in range(2):  # two failed attempts of burst 1
            t.run(t.sqs.messages(t.queue_url)[0].body)
        reindex.enqueue(product_id=1, v=2)
        t.drain()
        assert tries == [1, 1, 2, 2, 2]  # burst 2 ran 3 times: its own attempts
        assert t.outcomes[-1].outcome is Outcome.SUCCEEDED and not t.dead_letters()
