"""The worker's cost metrics on moto (issue 34): a mixed batch's DynamoDB units and SQS requests go to the job
that made them, counted from what the worker sent (sqsjobs._usage), and ``cost_metrics=False`` writes none."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsjobs import Outcome, PermanentError
from sqsjobs import _metrics as m
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.testing import FakeContext, receive_event


def usage_by_job(lines: list[str]) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for doc in map(json.loads, lines):
        for name in m.USAGE:
            if name in doc and m.DIMENSION_JOB in doc:
                found.setdefault(doc[m.DIMENSION_JOB], {})[name] = doc[name][0]
    return found


def test_a_mixed_batchs_units_and_requests_go_to_the_job_that_made_them(make_app: Any, aws: Any, clock: Any) -> None:
    lines: list[str] = []
    app = make_app(emit_metrics=lines.append, backoff_base=1, backoff_cap=1)

    @app.job("ok", key="ok:{n}")
    def ok(n: int) -> None:
        clock.advance(1 / 256)  # each run takes 3.90625 ms by the worker's clock (exact in binary)

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise ConnectionError("down")  # retried: its record says so, a ChangeMessageVisibilityBatch sets its delay

    @app.job("bad", key="bad:{n}")
    def bad(n: int) -> None:
        raise PermanentError("no such invoice")  # dead-lettered: a DLQ send, its record, its evidence

    app.enqueue_many([ok.message(n=1), ok.message(n=2), flaky.message(n=1), bad.message(n=1)])
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url), FakeContext(memory_limit_in_mb=1024))

    assert len(result.deliveries) == 4
    usage = usage_by_job(lines)
    # Every delivery: its claim and its record (1 WCU each, items under 1 KB); the dead letter also its evidence.
    assert {job: u[m.WRITE_UNITS] for job, u in usage.items()} == {"ok": 4.0, "flaky": 2.0, "bad": 3.0}
    # The poller's receive (one chunk) and delete (the three acknowledged) a quarter and a third each; flaky's
    # retry delay and bad's DLQ send are theirs alone.
    poller_receive, poller_delete = 1 / 4, 1 / 3
    assert usage["ok"][m.SQS_REQUESTS] == pytest.approx(2 * (poller_receive + poller_delete), rel=0.2)
    assert usage["flaky"][m.SQS_REQUESTS] == pytest.approx(poller_receive + 1.0, rel=0.2)
    assert usage["bad"][m.SQS_REQUESTS] == pytest.approx(poller_receive + poller_delete + 1.0, rel=0.2)
    # 7.8125 ms of runs (the batch's time by its clock) billed as 8 ms, at 1 GB: the ok runs carry the most.
    gb_s = {job: u[m.LAMBDA_GB_SECONDS] for job, u in usage.items()}
    assert sum(gb_s.values()) == pytest.approx(8 / 1000)
    assert gb_s["ok"] > gb_s["flaky"] > 0


@pytest.mark.parametrize("statements", [True, False], ids=["batched", "single requests"])
def test_a_duplicates_refused_claim_is_billed_whichever_way_the_store_writes(make_app: Any, aws: Any,
                                                                              statements: bool) -> None:
    lines: list[str] = []
    store = DynamoDBStore(aws.dynamodb, aws.table, statements=statements)
    app = make_app(emit_metrics=lines.append, store=store)

    @app.job("ok", key="ok:{n}")
    def ok(n: int) -> None: ...

    app.enqueue_many([ok.message(n=1), ok.message(n=2)])
    event = receive_event(aws.sqs, aws.queue_url)
    app.process_batch(event, FakeContext(memory_limit_in_mb=1024))
    lines.clear()
    again = app.process_batch(event, FakeContext(memory_limit_in_mb=1024))  # the batch delivered again

    assert [d.outcome for d in again.deliveries] == [Outcome.DUPLICATE] * 2
    # Each claim was refused by its condition and wrote nothing: DynamoDB bills it all the same.
    assert usage_by_job(lines)["ok"][m.WRITE_UNITS] == 2.0


def test_jobs_in_flight_at_once_share_the_invocations_billed_time_and_keep_their_durations(make_app: Any, aws: Any,
                                                                                         clock: Any) -> None:
    import asyncio

    lines: list[str] = []
    app = make_app(emit_metrics=lines.append)
    in_flight: list[int] = []
    most = [0]

    async def run(n: int) -> None:
        in_flight.append(n)
        most[0] = max(most[0], len(in_flight))
        await asyncio.sleep(0)  # the others start meanwhile: every job of the batch is in flight
        clock.advance(1 / 256)  # 3.90625 ms of the batch by the worker's clock (exact in binary)
        in_flight.remove(n)

    @app.job("a", key="a:{n}")
    async def a(n: int) -> None:
        await run(n)

    @app.job("b", key="b:{n}")
    async def b(n: int) -> None:
        await run(n + 100)

    app.enqueue_many([a.message(n=1), a.message(n=2), b.message(n=1), b.message(n=2)])
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url), FakeContext(memory_limit_in_mb=1024))

    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 4
    assert most[0] == 4
    docs = [doc for doc in map(json.loads, lines) if m.DIMENSION_JOB in doc]
    # Each job's two runs: two durations, two successes, whatever ran beside them.
    assert {doc[m.DIMENSION_JOB]: (len(doc[m.DURATION]), doc[m.SUCCEEDED]) for doc in docs} == {
        "a": (2, [2.0]), "b": (2, [2.0])}
    # The runs overlapped: their shares still add up to the invocation's billed time (15.625 ms -> 16 ms, 1 GB).
    assert sum(usage_by_job(lines)[job][m.LAMBDA_GB_SECONDS] for job in ("a", "b")) == pytest.approx(16 / 1000)


def test_without_cost_metrics_the_worker_writes_only_its_counters(make_app: Any, aws: Any) -> None:
    lines: list[str] = []
    app = make_app(emit_metrics=lines.append, cost_metrics=False)

    @app.job("ok", key="ok:{n}")
    def ok(n: int) -> None: ...

    ok.enqueue(n=1)
    app.process_batch(receive_event(aws.sqs, aws.queue_url), FakeContext(memory_limit_in_mb=1024))

    names = {name for doc in map(json.loads, lines) for name in doc if name in m.ALL_METRICS}
    assert names == {m.SUCCEEDED, m.DURATION}
