"""``async def`` runs wherever sqsjobs calls a user's function, or is refused where it is declared (issue 32, item 1).

Every kind of function sqsjobs calls has a test here: a job, a batch handler, a group's callback, a chain's
step, a scheduled job (fired directly and from the queue), a chunked job's page. Each one's body must run: a
side effect the test sees. What cannot run an async function (an upcaster) or would never run its body (a
generator) is refused at declaration; a plain function that hands back a coroutine anyway fails, never succeeds.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import warnings
from datetime import UTC, datetime
from typing import Any, TypedDict

import pytest

from sqsjobs import ConfigurationError, InMemoryStore, JobApp, Outcome, PermanentError, TimeLimitExceeded
from sqsjobs._calls import is_async
from sqsjobs._tracing import current_trace_id
from sqsjobs.testing.tester import ManualClock
from sqsjobs.worker._budget import time_left
from sqsjobs.worker._cancellation import cancel_requested


class Doc(TypedDict):
    doc_id: int


async def yielded() -> None:
    await asyncio.sleep(0)  # a real suspension: the body runs on the loop, not in the call


def test_an_async_job_runs_its_body_and_its_return_value_is_stored() -> None:
    app = JobApp()
    sent: list[int] = []

    @app.job("receipt", key="receipt:{order_id}", store_result=True)
    async def send_receipt(order_id: int) -> dict[str, int]:
        await yielded()
        sent.append(order_id)
        return {"order_id": order_id}

    with app.testing() as t:
        t.run(send_receipt.message(order_id=7), send_receipt.message(order_id=8))
        assert sent == [7, 8] and t.count(Outcome.SUCCEEDED) == 2
        assert app.status("receipt:7").result == {"order_id": 7}


def test_an_async_job_s_failures_are_classified_as_a_plain_job_s() -> None:
    app = JobApp()

    @app.job("flaky", key="flaky:{n}", max_attempts=3)
    async def flaky(n: int) -> None:
        await yielded()
        if n == 1:
            raise ConnectionError("partner down")
        raise PermanentError("no such order")

    with app.testing() as t:
        result = t.run(flaky.message(n=1), flaky.message(n=2))
        assert [d.outcome for d in result.deliveries] == [Outcome.RETRY, Outcome.DEAD_LETTERED]
        assert app.status("flaky:1").last_error == "ConnectionError: partner down"


def test_an_async_batch_handler_is_awaited_and_names_its_failed_items() -> None:
    app = JobApp()
    calls: list[list[int]] = []

    @app.job("index-docs", key="index-docs:{doc_id}", batch=3)
    async def index_docs(items: list[Doc]) -> dict[int, BaseException]:
        await yielded()
        calls.append([item["doc_id"] for item in items])
        return {i: ValueError("bad doc") for i, item in enumerate(items) if item["doc_id"] == 4}

    with app.testing() as t:
        result = t.run(*[index_docs.message(doc_id=n) for n in range(5)])
        assert sorted(calls) == [[0, 1, 2], [3, 4]]
        assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 4 + [Outcome.RETRY]


def test_an_async_group_callback_and_an_async_chain_step_run() -> None:
    app = JobApp(store=InMemoryStore())
    ran: list[str] = []

    @app.job("member", key="member:{n}")
    async def member(n: int) -> None:
        await yielded()
        ran.append(f"member {n}")

    @app.job("report", key="report:{run}")
    async def report(run: str) -> None:
        await yielded()
        ran.append(f"report {run}")

    with app.testing() as t:
        group = app.group(on_complete=report.message(run="jan"))
        group.add_many([member.message(n=1), member.message(n=2)])
        group.enqueue()
        app.chain(member.message(n=3), report.message(run="chained")).enqueue()
        t.drain()
        assert sorted(ran) == ["member 1", "member 2", "member 3", "report chained", "report jan"]
        assert app.status("report:jan").state == "succeeded" and app.status("report:chained").state == "succeeded"


def test_an_async_scheduled_job_runs_when_fired_directly_and_from_the_queue() -> None:
    clock = ManualClock()
    app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore(), clock=clock, sleep=clock.advance)
    periods: list[str] = []

    @app.scheduled("nightly", schedule="rate(1 day)")
    async def nightly(period: str) -> None:
        await yielded()
        periods.append(f"fired {period}")

    @app.scheduled("hourly", schedule="rate(1 hour)", enqueue=True)
    async def hourly(period: str) -> None:
        await yielded()
        periods.append(f"queued {period}")

    at = datetime(2026, 1, 2, 3, tzinfo=UTC)
    assert app.fire_schedule({"job": "nightly", "scheduled_time": at.isoformat()})["fired"] is True
    with app.testing() as t:
        app.fire_schedule({"job": "hourly", "scheduled_time": at.isoformat()})
        t.drain()
    assert periods == ["fired 2026-01-02", "queued 2026-01-02T03"]
    assert app.status("nightly:2026-01-02").state == "succeeded"


def test_a_scheduled_job_fired_inside_a_running_loop_still_runs() -> None:
    app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
    periods: list[str] = []

    @app.scheduled("nightly", schedule="rate(1 day)")
    async def nightly(period: str) -> None:
        await yielded()
        periods.append(period)

    async def an_async_test() -> Any:
        return app.fire_schedule({"job": "nightly", "scheduled_time": "2026-01-02T00:00:00Z"})

    assert asyncio.run(an_async_test())["fired"] is True and periods == ["2026-01-02"]


def test_an_async_chunked_job_awaits_each_page_and_continues_the_run() -> None:
    app = JobApp(store=InMemoryStore())
    pages: list[int] = []

    @app.job("export", key="export:{run_id}:{cursor}", chunked=True)
    async def export(run_id: str, cursor: int = 0) -> int | None:
        await yielded()
        pages.append(cursor)
        return None if cursor >= 20 else cursor + 10

    with app.testing() as t:
        export.start(run_id="r1")
        t.drain()
        assert pages == [0, 10, 20] and app.run_status("export", "r1").finished


def test_an_async_job_sees_its_own_trace_id_budget_and_cancellation() -> None:
    app = JobApp()
    seen: list[Any] = []

    @app.job("child", key="child:{n}")
    def child(n: int) -> None: ...

    @app.job("parent", key="parent:{n}")
    async def parent(n: int) -> None:
        await yielded()
        seen.extend([current_trace_id(), time_left() is not None, cancel_requested()])
        app.runtime.store.write(__import__("sqsjobs.worker._job_records", fromlist=["x"]).cancel_request(
            f"parent:{n}", now=0.0))
        seen.append(cancel_requested())
        child.enqueue(n=n)

    with app.testing() as t:
        t.run(parent.message(n=1, trace_id="req-7"))
        assert seen == ["req-7", True, False, True]
        assert [m.trace_id for m in t.enqueued("child")] == ["req-7"]


def test_an_async_job_past_its_time_limit_is_cancelled_and_retried() -> None:
    app = JobApp(function_timeout=60)
    cleaned: list[str] = []

    @app.job("stuck", key="stuck:{n}", time_limit=0.05)
    async def stuck(n: int) -> None:
        try:
            await asyncio.Event().wait()  # never set: only the limit ends it
        finally:
            cleaned.append("cleaned up")

    @app.job("swallows", key="swallows:{n}", time_limit=0.05)
    async def swallows(n: int) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            return  # carries on as if nothing happened: it still ran out of time

    with app.testing() as t:
        result = t.run(stuck.message(n=1), swallows.message(n=1))
        assert [d.outcome for d in result.deliveries] == [Outcome.RETRY, Outcome.RETRY]
        assert all(isinstance(d.error, TimeLimitExceeded) for d in result.deliveries) and cleaned == ["cleaned up"]


# ---------------------------------------------------------------- refused where declared
def test_what_would_never_run_its_body_is_refused_at_declaration() -> None:
    app = JobApp()
    with pytest.raises(ConfigurationError, match="generator function"):
        @app.job("pages")
        def pages(n: int) -> Any:
            yield n

    with pytest.raises(ConfigurationError, match="async generator function"):
        @app.job("stream")
        async def stream(n: int) -> Any:
            yield n

    with pytest.raises(ConfigurationError, match="threads=True is for plain functions"):
        @app.job("both", threads=True)
        async def both(n: int) -> None: ...

    with pytest.raises(ConfigurationError, match="threads=True does not combine with time_limit"):
        app.job("limited", threads=True, time_limit=10)

    @app.job("greet", key="greet:{n}", version=2)
    def greet(n: int, loud: bool) -> None: ...

    with pytest.raises(ConfigurationError, match="upcaster from version 1: add_loud is async"):
        @greet.upcaster(from_version=1)
        async def add_loud(args: dict[str, Any]) -> dict[str, Any]:
            return {**args, "loud": False}

    assert sorted(app.jobs) == ["greet"]


def test_an_async_function_behind_a_plain_wrapper_fails_and_never_counts_as_done() -> None:
    app = JobApp()
    ran: list[int] = []

    def logged(fn: Any) -> Any:  # a decorator that hides the coroutine function (no functools.wraps)
        def wrapper(**kwargs: Any) -> Any:
            return fn(**kwargs)
        wrapper.__signature__ = __import__("inspect").signature(fn)  # type: ignore[attr-defined]
        return wrapper

    @app.job("hidden", key="hidden:{n}")
    @logged
    async def hidden(n: int) -> None:
        ran.append(n)

    with warnings.catch_warnings(record=True) as caught, app.testing() as t:
        warnings.simplefilter("always")
        (d,) = t.run(hidden.message(n=1)).deliveries
        assert d.outcome is Outcome.DEAD_LETTERED and isinstance(d.error, PermanentError)
        assert "returned a coroutine" in str(d.error) and ran == []
        assert app.status("hidden:1").state == "dead_lettered"
        gc.collect()
    assert not [w for w in caught if "never awaited" in str(w.message)]  # closed, not left to the collector


def test_async_is_seen_through_partials_and_callable_objects() -> None:
    class Sender:
        async def __call__(self, to: str) -> None: ...

    async def send(to: str, body: str) -> None: ...

    assert is_async(Sender()) and is_async(functools.partial(send, body="hi"))
    assert not is_async(Sender) and not is_async(functools.partial(print))
