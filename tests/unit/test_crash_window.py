"""The crash window is bounded in time (issue 32, item 4): a finished job's record waits ``flush_after`` at most.

Reproduced before the timer: a quick job, then a job that runs for 600 s and is killed (a Lambda timeout):
the quick job's record was never written, so it ran again. Records are still gathered (two DynamoDB calls for
a batch of quick successes), but a timer on the injected clock writes them once the oldest has waited
``flush_after`` seconds, whatever runs meanwhile, and at the deadline margin. The clock here is a
``ManualClock``: a job "runs for 600 s" by advancing it, and the timer fires inside that advance.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from sqsjobs import JobApp, Outcome
from sqsjobs.testing.tester import EPOCH, ManualClock
from sqsjobs.worker._timer import ClockTimer, timer_for

#: a worker of 15 minutes: the job killed after 600 s dies long before the deadline margin
LAMBDA_TIMEOUT_MS = 900_000


class Killed(BaseException):
    """The invocation dies here (a timeout, out of memory): nothing after it runs."""


def app_with(clock: ManualClock, **settings: Any) -> tuple[JobApp, list[str]]:
    app = JobApp(**settings)
    seen: list[str] = []

    @app.job("quick", key="quick:{n}")
    def quick(n: int) -> None:
        seen.append(f"quick {n}")

    @app.job("slow", key="slow:{n}")
    def slow(n: int) -> None:
        seen.append(f"slow {n}: quick:0 is {state(app, 'quick:0')} at 0 s")
        clock.advance(600)
        raise Killed

    @app.job("brief", key="brief:{n}")
    def brief(n: int) -> None:
        clock.advance(0.5)  # within the bound: still gathered when the kill comes
        raise Killed

    return app, seen


def state(app: JobApp, key: str) -> str:
    item = app.runtime.store.get(key)
    return item.state.value if item is not None else "absent"


def test_a_quick_job_then_one_killed_after_600_s_leaves_the_quick_job_recorded() -> None:
    clock = ManualClock()
    app, seen = app_with(clock)
    with app.testing(clock=clock) as t:
        with pytest.raises(Killed):
            t.run(app.message("quick", n=0), app.message("slow", n=1), remaining_ms=LAMBDA_TIMEOUT_MS)
        assert seen == ["quick 0", "slow 1: quick:0 is HELD at 0 s"]  # gathered at first, as before
        assert state(app, "quick:0") == "DONE" and app.status("quick:0").state == "succeeded"
        assert state(app, "slow:1") == "HELD"  # the killed job alone runs again, once its lease ends


def test_nine_quick_jobs_then_a_killed_one_leave_all_nine_recorded_in_one_write() -> None:
    clock = ManualClock()
    app, _ = app_with(clock)
    with app.testing(clock=clock) as t:
        with pytest.raises(Killed):
            t.run(*[app.message("quick", n=n) for n in range(9)], app.message("slow", n=9),
                  remaining_ms=LAMBDA_TIMEOUT_MS)
        assert [app.status(f"quick:{n}").state for n in range(9)] == ["succeeded"] * 9
        assert t.store.calls == 2  # the claims, then the nine completions together when the timer fired


def test_a_kill_within_the_bound_exposes_only_what_finished_within_it() -> None:
    clock = ManualClock()
    app, _ = app_with(clock)
    with app.testing(clock=clock) as t:
        with pytest.raises(Killed):
            t.run(app.message("quick", n=0), app.message("brief", n=1))
        assert state(app, "quick:0") == "HELD"  # finished 0.5 s before the kill: inside the window, held
        clock.advance(10)
        assert state(app, "quick:0") == "HELD"  # and no timer of the dead invocation writes it later


def test_an_async_job_s_record_is_written_while_another_async_job_runs_on() -> None:
    clock = ManualClock()
    app = JobApp()
    done = asyncio.Event()
    seen: list[str] = []

    @app.job("quick", key="quick:{n}")
    async def quick(n: int) -> None:
        done.set()

    @app.job("slow", key="slow:{n}")
    async def slow(n: int) -> None:
        await done.wait()
        clock.advance(1)
        seen.append(state(app, "quick:0"))
        raise Killed

    with app.testing(clock=clock) as t, pytest.raises(Killed):
        t.run(slow.message(n=1), quick.message(n=0), remaining_ms=LAMBDA_TIMEOUT_MS)
    assert seen == ["DONE"]


def test_flush_after_zero_writes_each_completion_as_its_job_ends() -> None:
    clock = ManualClock()
    app, _ = app_with(clock, flush_after=0)
    with app.testing(clock=clock) as t:
        t.run(*[app.message("quick", n=n) for n in range(10)])
        assert t.store.calls == 11  # the claims, then one write a job (as Powertools)
        with pytest.raises(Killed):
            t.run(app.message("quick", n=20), app.message("brief", n=21))
        assert app.status("quick:20").state == "succeeded"


def test_quick_successes_still_cost_two_calls_a_batch() -> None:
    clock = ManualClock()
    app, _ = app_with(clock)
    with app.testing(clock=clock) as t:
        result = t.run(*[app.message("quick", n=n) for n in range(10)])
        assert t.store.calls == 2 and t.count(Outcome.SUCCEEDED) == 10 and result.unrecorded == ()


def test_the_deadline_margin_writes_the_waiting_records_before_the_bound() -> None:
    clock = ManualClock()
    app, _ = app_with(clock, flush_after=30)
    with app.testing(clock=clock) as t:
        with pytest.raises(Killed):
            # 20 s left, 5 s margin: at 15 s the waiting record is written, long before its 30 s bound.
            t.run(app.message("quick", n=0), app.message("slow", n=1), remaining_ms=20_000)
        assert state(app, "quick:0") == "DONE"


# ---------------------------------------------------------------- the timers
def test_a_manual_clock_calls_its_timers_in_order_at_their_moment_and_not_once_cancelled() -> None:
    clock = ManualClock()
    fired: list[tuple[str, float]] = []
    clock.call_at(EPOCH + 2, lambda: fired.append(("b", clock() - EPOCH)))
    clock.call_at(EPOCH + 1, lambda: fired.append(("a", clock() - EPOCH)))
    dropped = clock.call_at(EPOCH + 1.5, lambda: fired.append(("dropped", clock() - EPOCH)))
    clock.call_at(EPOCH + 9, lambda: fired.append(("later", clock() - EPOCH)))
    dropped.cancel()
    clock.advance(5)
    assert fired == [("a", 1.0), ("b", 2.0)] and clock() - EPOCH == 5.0
    assert timer_for(clock) is clock


def test_a_timer_callback_may_advance_the_clock_itself() -> None:
    clock = ManualClock()
    fired: list[float] = []
    clock.call_at(EPOCH + 1, lambda: clock.advance(3))  # a write retried with a pause, inside the flush
    clock.call_at(EPOCH + 2, lambda: fired.append(clock() - EPOCH))
    clock.advance(2)
    assert fired == [2.0] and clock() - EPOCH == 4.0


def test_the_process_timer_thread_calls_what_is_due_in_order_and_forgets_what_was_cancelled() -> None:
    import time

    from sqsjobs.worker import _timer

    fired: list[str] = []
    done = threading.Event()
    timer = ClockTimer(time.time)
    dropped = timer.call_at(time.time() + 3600, lambda: fired.append("dropped"))
    dropped.cancel()
    assert dropped not in _timer._THREAD._entries
    timer.call_at(time.time() - 2, lambda: fired.append("first"))
    timer.call_at(time.time() - 1, lambda: fired.append("second"))
    timer.call_at(time.time() - 1, done.set)
    assert done.wait(30)
    assert fired == ["first", "second"]
    assert isinstance(timer_for(time.time), ClockTimer)
