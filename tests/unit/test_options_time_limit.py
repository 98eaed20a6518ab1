"""The time limit (lib/sqsjobs/worker/_time_limit.py): it raises inside the job's own code and nowhere else.

Where an alarm lands is chosen here, not left to a timer: the handler is called
directly with frames captured at chosen points, or ``signal.raise_signal``
delivers SIGALRM synchronously in a chosen frame. One test lets the real timer
fire, with no assertion about when.
"""

from __future__ import annotations

import contextlib
import doctest
import gc
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any

import pytest

from sqsjobs._errors import RetryableError, TimeLimitExceeded
from sqsjobs.worker import _time_limit as time_limit
from sqsjobs.worker._time_limit import TIME_LIMIT_REPEAT, TimeLimit, run_with_time_limit

#: long enough that the armed timer never fires during a test: alarms here are delivered by hand
NEVER = 3600


def alarm_here(outcomes: list[str]) -> None:
    """SIGALRM delivered now, in this frame; records whether the handler raised here."""
    try:
        signal.raise_signal(signal.SIGALRM)
    except TimeLimitExceeded:
        outcomes.append("raised")
        raise
    outcomes.append("returned")


def assert_timer_restored(before: tuple[float, float]) -> None:
    """Our timer is gone; one that was running before (pytest-timeout's) is back, less the time spent."""
    after = signal.getitimer(signal.ITIMER_REAL)
    if before[0] == 0:
        assert after == (0.0, 0.0)
    else:
        assert 0 < after[0] <= before[0] and after[1] == before[1]


@pytest.fixture
def restored() -> Iterator[None]:
    """Every test leaves the SIGALRM handler and ITIMER_REAL as it found them."""
    handler = signal.getsignal(signal.SIGALRM)
    timer = signal.getitimer(signal.ITIMER_REAL)
    yield
    assert signal.getsignal(signal.SIGALRM) is handler
    assert_timer_restored(timer)


pytestmark = pytest.mark.usefixtures("restored")


def test_the_modules_examples_run() -> None:
    result = doctest.testmod(time_limit, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 4 and result.failed == 0


# -- inside the job: it raises, every time --------------------------------------------------------------------
def test_an_alarm_in_the_jobs_own_frames_raises_there() -> None:
    outcomes: list[str] = []
    limit = TimeLimit(NEVER, "export")

    def deeper() -> None:
        alarm_here(outcomes)

    def job() -> str:
        with pytest.raises(TimeLimitExceeded):
            alarm_here(outcomes)  # a callee of the job
        with pytest.raises(TimeLimitExceeded):
            deeper()
        with pytest.raises(TimeLimitExceeded):
            limit.on_alarm(signal.SIGALRM, sys._getframe())  # the job's frame itself
        return "finished"

    with pytest.raises(TimeLimitExceeded, match="job 'export' ran past its time_limit of 3600 s"):
        limit.run(job, {})
    assert outcomes == ["raised", "raised"] and limit.expired


def test_the_exception_is_retryable_and_names_the_job_and_limit() -> None:
    def job() -> None:
        signal.raise_signal(signal.SIGALRM)

    with pytest.raises(TimeLimitExceeded) as caught:
        run_with_time_limit(job, {}, 30, "export")
    assert isinstance(caught.value, RetryableError)
    assert str(caught.value) == "job 'export' ran past its time_limit of 30 s"


def test_a_job_that_swallows_it_and_carries_on_gets_it_again_and_the_timer_repeats() -> None:
    caught: list[str] = []
    timer: list[tuple[float, float]] = []

    def stubborn() -> None:
        timer.append(signal.getitimer(signal.ITIMER_REAL))
        try:
            signal.raise_signal(signal.SIGALRM)
        except TimeLimitExceeded:
            caught.append("first")
        signal.raise_signal(signal.SIGALRM)  # what the repeating timer does next
        caught.append("never reached")

    with pytest.raises(TimeLimitExceeded):
        run_with_time_limit(stubborn, {}, 30, "stubborn")
    assert caught == ["first"]
    ((remaining, interval),) = timer
    assert 0 < remaining <= 30 and interval == TIME_LIMIT_REPEAT


def test_a_job_that_swallowed_it_and_returned_still_counts_as_exceeded() -> None:
    def sly() -> str:
        with contextlib.suppress(Exception):  # a broad except in job code catches TimeLimitExceeded too
            signal.raise_signal(signal.SIGALRM)
        return "done anyway"

    with pytest.raises(TimeLimitExceeded, match=r"ran past its time_limit of 30 s$"):
        run_with_time_limit(sly, {}, 30, "sly")


def test_a_limit_turned_into_another_error_is_still_the_time_limit() -> None:
    def wrapper() -> None:
        try:
            signal.raise_signal(signal.SIGALRM)
        except TimeLimitExceeded as error:
            raise ValueError("export aborted") from error

    with pytest.raises(TimeLimitExceeded) as caught:
        run_with_time_limit(wrapper, {}, 30, "wrapper")
    assert str(caught.value) == ("job 'wrapper' ran past its time_limit of 30 s "
                                 "(then raised ValueError: export aborted)")
    assert isinstance(caught.value.__cause__, ValueError)


def test_a_job_in_time_returns_its_result_and_its_own_errors_pass_unchanged() -> None:
    limit = TimeLimit(60, "quick")
    assert limit.run(lambda a, b: a + b, {"a": 2, "b": 3}) == 5 and not limit.expired

    def broken() -> None:
        raise KeyError("missing")

    with pytest.raises(KeyError):
        run_with_time_limit(broken, {}, 60, "broken")


# -- outside the job: recorded, never raised ------------------------------------------------------------------
def test_an_alarm_in_the_runner_frame_is_recorded_not_raised() -> None:
    limit = TimeLimit(NEVER, "export")
    outcomes: list[str] = []

    def job() -> str:
        runner = sys._getframe(1)
        assert runner.f_code is TimeLimit.run.__code__
        try:
            limit.on_alarm(signal.SIGALRM, runner)  # the job is running, but the alarm is not in it
        except TimeLimitExceeded:
            outcomes.append("raised")
        else:
            outcomes.append("returned")
        return "finished"

    with pytest.raises(TimeLimitExceeded):  # the job still counts as over its limit
        limit.run(job, {})
    assert outcomes == ["returned"] and limit.expired


class DisarmWatcher:
    """Stands in for the ``signal`` module in lib/sqsjobs/worker/_time_limit.py: at the disarm, runs ``at_disarm``."""

    def __init__(self, at_disarm: Callable[[], None]) -> None:
        self.at_disarm = at_disarm
        self.disarms = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(signal, name)

    def setitimer(self, which: int, seconds: float, interval: float = 0.0) -> tuple[float, float]:
        if seconds == 0:  # the disarm: the job has returned, our handler is still installed
            self.disarms += 1
            self.at_disarm()
        return signal.setitimer(which, seconds, interval)


def test_an_alarm_during_the_disarm_after_the_job_returned_is_recorded_not_raised(
        monkeypatch: pytest.MonkeyPatch) -> None:
    limit = TimeLimit(NEVER, "export")
    frames: dict[str, FrameType] = {}
    outcomes: list[str] = []

    def job() -> None:
        frames["job"] = sys._getframe()
        frames["runner"] = sys._getframe(1)

    def alarms() -> None:
        outcomes.append("ours" if signal.getsignal(signal.SIGALRM) == limit.on_alarm else "not ours")
        alarm_here(outcomes)  # a real SIGALRM in a callee of the runner
        for name in ("runner", "job"):  # the runner after the job's return; the frame the job left
            try:
                limit.on_alarm(signal.SIGALRM, frames[name])
            except TimeLimitExceeded:
                outcomes.append(f"raised in the {name} frame")

    watcher = DisarmWatcher(alarms)
    monkeypatch.setattr(time_limit, "signal", watcher)
    with pytest.raises(TimeLimitExceeded):
        limit.run(job, {})
    assert watcher.disarms == 1
    assert outcomes == ["ours", "returned"] and limit.expired


def test_an_alarm_after_the_run_is_recorded_not_raised() -> None:
    limit = TimeLimit(NEVER, "export")
    assert limit.run(lambda: "finished", {}) == "finished"

    limit.on_alarm(signal.SIGALRM, sys._getframe())
    assert limit.expired


class Dropped:
    """An object whose finalizer an alarm interrupts."""

    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = outcomes

    def __del__(self) -> None:
        alarm_here(self.outcomes)


class Referent:
    """Something a weak reference can point at."""


def in_del(outcomes: list[str]) -> None:
    dropped = Dropped(outcomes)
    del dropped


def in_weakref_callback(outcomes: list[str]) -> None:
    referent = Referent()
    reference = weakref.ref(referent, lambda dead: alarm_here(outcomes))
    del referent
    assert reference() is None


def in_weakref_finalize(outcomes: list[str]) -> None:
    referent = Referent()
    weakref.finalize(referent, alarm_here, outcomes)
    del referent


def in_unraisable_hook(outcomes: list[str]) -> None:
    class Failing:
        def __del__(self) -> None:
            raise ValueError("cleanup failed")

    def hook(unraisable: Any) -> None:
        alarm_here(outcomes)

    previous, sys.unraisablehook = sys.unraisablehook, hook
    try:
        failing = Failing()
        del failing
    finally:
        sys.unraisablehook = previous


def in_gc_callback(outcomes: list[str]) -> None:
    def callback(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            alarm_here(outcomes)

    gc.callbacks.append(callback)
    try:
        gc.collect()
    finally:
        gc.callbacks.remove(callback)


def in_generator_finalization(outcomes: list[str]) -> None:
    def rows() -> Iterator[int]:
        try:
            yield 1
        finally:
            alarm_here(outcomes)  # runs when the garbage collector closes the generator

    pending = rows()
    next(pending)
    del pending


@pytest.mark.parametrize("finalizer", [in_del, in_weakref_callback, in_weakref_finalize, in_unraisable_hook,
                                       in_gc_callback, in_generator_finalization])
def test_an_alarm_in_a_finalizer_during_the_job_is_recorded_not_raised(
        finalizer: Callable[[list[str]], None]) -> None:
    outcomes: list[str] = []
    progress: list[str] = []

    def job() -> None:
        finalizer(outcomes)
        progress.append("carried on")

    with pytest.raises(TimeLimitExceeded):  # counted once the job's call ended
        run_with_time_limit(job, {}, NEVER, "tidy")
    assert outcomes == ["returned"] and progress == ["carried on"]


def test_at_every_bytecode_the_runner_and_disarm_are_outside_the_job_and_the_job_inside() -> None:
    # Python runs a signal handler between two bytecodes: tracing opcodes asks "would an alarm raise
    # here?" at every point where one can land, without a single timer.
    limit = TimeLimit(NEVER, "every-opcode")
    module_file = time_limit.__file__
    seen: dict[str, set[bool]] = {"framework": set(), "job": set()}
    counts = {"framework": 0, "job": 0}

    def job(rows: int) -> int:
        total = 0
        for row in range(rows):
            total += row
        return total

    def where(frame: FrameType) -> str | None:
        if frame.f_code.co_filename == module_file:
            return "framework"
        return "job" if frame.f_code is job.__code__ else None

    def tracer(frame: FrameType, event: str, arg: Any) -> Any:
        side = where(frame)
        if side is None:
            return None
        frame.f_trace_opcodes = True
        if event == "opcode":
            seen[side].add(limit.in_job(frame))
            counts[side] += 1
        return tracer

    previous = sys.gettrace()
    sys.settrace(tracer)
    try:
        result = limit.run(job, {"rows": 5})
    finally:
        sys.settrace(previous)

    assert result == 10 and not limit.expired
    assert seen == {"framework": {False}, "job": {True}}
    assert counts["framework"] > 20 and counts["job"] > 20


# -- the timer and the handler ---------------------------------------------------------------------------------
def test_the_timer_is_armed_with_the_limit_and_the_handler_installed_only_during_the_call() -> None:
    limit = TimeLimit(45, "armed")
    during: list[Any] = []

    def job() -> None:
        during.append((signal.getitimer(signal.ITIMER_REAL), signal.getsignal(signal.SIGALRM)))

    limit.run(job, {})
    (((remaining, interval), handler),) = during
    assert 0 < remaining <= 45 and interval == TIME_LIMIT_REPEAT and handler == limit.on_alarm


def test_an_outer_timer_and_handler_are_put_back_with_the_time_spent_taken_off() -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    outer = signal.setitimer(signal.ITIMER_REAL, 500, 7)
    try:
        def job() -> None:
            assert 59 < signal.getitimer(signal.ITIMER_REAL)[0] <= 60

        run_with_time_limit(job, {}, 60, "nested")
        remaining, interval = signal.getitimer(signal.ITIMER_REAL)
        assert 0 < remaining <= 500 and interval == 7
        assert fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, *outer)
        signal.signal(signal.SIGALRM, previous)


def test_without_a_limit_or_outside_the_main_thread_nothing_is_armed() -> None:
    handler = signal.getsignal(signal.SIGALRM)
    seen: list[Any] = []

    def job() -> str:
        seen.append(signal.getsignal(signal.SIGALRM))
        return "ran"

    assert run_with_time_limit(job, {}, None, "unlimited") == "ran"
    results: list[str] = []
    thread = threading.Thread(target=lambda: results.append(run_with_time_limit(job, {}, 30, "threaded")))
    thread.start()
    thread.join()
    # Signals only reach the main thread: no handler of ours was installed for either run.
    assert results == ["ran"] and seen == [handler, handler]


# -- the one test with a real timer ----------------------------------------------------------------------------
def test_the_real_timer_stops_a_job_spinning_in_pure_python() -> None:
    interrupted: list[int] = []

    def spin() -> None:
        spins = 0
        give_up = time.monotonic() + 120  # bounds a hang only: the alarm comes after 0.2 s of it
        try:
            while time.monotonic() < give_up:  # no I/O, no sleep: only the signal can stop this
                spins += 1
        except TimeLimitExceeded:
            interrupted.append(spins)
            raise

    with pytest.raises(TimeLimitExceeded):
        run_with_time_limit(spin, {}, 0.2, "spin")
    assert len(interrupted) == 1
