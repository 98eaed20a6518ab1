"""The ``time_limit`` context manager itself: it always disarms, even when alarms keep coming."""

from __future__ import annotations

import signal
import threading
from contextlib import suppress

import pytest

from sqsjobs import time_limit as consumer
from sqsjobs.errors import RetryableError, TimeLimitExceeded
from sqsjobs.time_limit import time_limit


def assert_timer_restored(before: tuple[float, float]) -> None:
    """Our timer is gone; one that was running before (pytest-timeout's) is back, less the time spent."""
    after = signal.getitimer(signal.ITIMER_REAL)
    if before[0] == 0:
        assert after == (0.0, 0.0)
    else:
        assert 0 < after[0] <= before[0] and after[1] == before[1]


def test_the_timer_is_disarmed_and_the_handler_restored_even_under_a_storm_of_alarms(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # Alarms every half millisecond: some land while the context manager is cleaning up.
    monkeypatch.setattr(consumer, "TIME_LIMIT_REPEAT", 0.0005)
    previous = signal.getsignal(signal.SIGALRM)
    before = signal.getitimer(signal.ITIMER_REAL)
    for _ in range(200):
        with suppress(TimeLimitExceeded), time_limit(0.0005, "storm") as limit:
            while True:
                pass
        assert limit.expired
        assert_timer_restored(before)
        assert signal.getsignal(signal.SIGALRM) is previous


def test_a_block_that_finishes_in_time_is_not_marked_expired() -> None:
    before = signal.getitimer(signal.ITIMER_REAL)
    with time_limit(60, "quick") as limit:
        total = sum(range(1000))
    assert total == 499500 and not limit.expired
    assert_timer_restored(before)


def test_an_outer_timer_is_put_back_with_its_interval() -> None:
    fired: list[int] = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: fired.append(signum))
    outer = signal.setitimer(signal.ITIMER_REAL, 500, 7)
    try:
        with time_limit(60, "nested"):
            assert 59 < signal.getitimer(signal.ITIMER_REAL)[0] <= 60
        remaining, interval = signal.getitimer(signal.ITIMER_REAL)
        assert 499 < remaining <= 500 and interval == 7
        assert fired == []
    finally:
        signal.setitimer(signal.ITIMER_REAL, *outer)
        signal.signal(signal.SIGALRM, previous)


def test_the_exception_is_retryable_and_names_the_job_and_limit() -> None:
    with pytest.raises(TimeLimitExceeded) as caught, time_limit(30, "export"):
        signal.raise_signal(signal.SIGALRM)
    assert isinstance(caught.value, RetryableError)
    assert str(caught.value) == "job 'export' ran past its time_limit of 30 s"


def test_outside_the_main_thread_the_limit_is_not_enforced() -> None:
    seen: list[tuple[bool, tuple[float, float]]] = []

    def run() -> None:
        with time_limit(0.001, "threaded") as limit:
            seen.append((limit.expired, signal.getitimer(signal.ITIMER_REAL)))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    ((expired, (remaining, _)),) = seen
    # No timer of ours (0.001 s) was armed: signals only reach the main thread.
    assert not expired and (remaining == 0 or remaining > 1)
