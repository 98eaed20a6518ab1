"""Backoff bounds, full jitter by default, what turning jitter off does, and the one retry loop (``Retries``)."""

from __future__ import annotations

import random

import pytest

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS, BackoffPolicy, Retries, visibility_seconds
from sqsjobs._errors import ConfigurationError


class RecordingRandom:
    """A random source that returns the top of the range and remembers what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, float]] = []

    def uniform(self, a: float, b: float) -> float:
        self.calls.append((a, b))
        return b


def test_bounds_double_from_the_base_up_to_the_cap() -> None:
    policy = BackoffPolicy(base=30, cap=600)
    assert [policy.bound(n) for n in range(1, 8)] == [30, 60, 120, 240, 480, 600, 600]
    # Attempt numbers below 1 are treated as the first attempt; huge ones do not overflow.
    assert policy.bound(0) == policy.bound(-5) == 30
    assert policy.bound(10_000) == 600


def test_full_jitter_draws_uniformly_between_zero_and_the_bound() -> None:
    policy = BackoffPolicy(base=10, cap=100)
    source = RecordingRandom()
    assert [policy.next_delay(n, source) for n in (1, 2, 3, 4, 5)] == [10, 20, 40, 80, 100]
    assert source.calls == [(0, 10), (0, 20), (0, 40), (0, 80), (0, 100)]


def test_seeded_jitter_is_reproducible_and_stays_within_bounds() -> None:
    policy = BackoffPolicy(base=30, cap=600)
    first = [policy.next_delay(n, random.Random(42)) for n in range(1, 10)]
    again = [policy.next_delay(n, random.Random(42)) for n in range(1, 10)]
    assert first == again
    source = random.Random(7)
    for attempt in range(1, 12):
        for _ in range(50):
            assert 0 <= policy.next_delay(attempt, source) <= policy.bound(attempt)


def test_jitter_spreads_retries_that_failed_together() -> None:
    # 200 jobs failed at once against the same dependency: with jitter their retries spread over the window,
    # without it they all come back in the same second (the stampede docs/jobs.md warns about).
    source = random.Random(1234)
    jittered = {visibility_seconds(BackoffPolicy(base=60, cap=600).next_delay(3, source)) for _ in range(200)}
    lockstep = {visibility_seconds(BackoffPolicy(base=60, cap=600, jitter=False).next_delay(3, source))
                for _ in range(200)}
    assert lockstep == {240}
    assert len(jittered) > 100 and min(jittered) < 60 and max(jittered) > 180


def test_jitter_off_is_the_bound_and_asks_no_random() -> None:
    policy = BackoffPolicy(base=5, cap=60, jitter=False)
    source = RecordingRandom()
    assert [policy.next_delay(n, source) for n in range(1, 6)] == [5, 10, 20, 40, 60]
    assert source.calls == []


def test_jitter_is_on_unless_turned_off() -> None:
    assert BackoffPolicy().jitter is True
    assert BackoffPolicy(base=1, cap=2).jitter is True


def test_a_zero_base_retries_at_once() -> None:
    assert BackoffPolicy(base=0, cap=0).next_delay(5, random.Random(1)) == 0


@pytest.mark.parametrize(
    ("base", "cap", "fragment"),
    [(-1, 10, "backoff_base must be >= 0"), (1, -1, "backoff_cap must be within"),
     (1, MAX_VISIBILITY_SECONDS + 1, "SQS's longest visibility")],
)
def test_impossible_policies_are_refused(base: float, cap: float, fragment: str) -> None:
    with pytest.raises(ConfigurationError, match=fragment):
        BackoffPolicy(base=base, cap=cap)


def test_visibility_seconds_floors_and_clamps_to_what_sqs_takes() -> None:
    assert visibility_seconds(0.99) == 0
    assert visibility_seconds(17.6) == 17
    assert visibility_seconds(-3) == 0
    assert visibility_seconds(10**9) == MAX_VISIBILITY_SECONDS


class Clock:
    """An injected clock that moves only when the code under test sleeps."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_retries_try_at_most_tries_times_with_a_full_jitter_pause_before_each_retry() -> None:
    clock, asked = Clock(), RecordingRandom()
    retries = Retries(tries=5, backoff=BackoffPolicy(base=0.1, cap=0.3))
    assert list(retries.attempts(sleep=clock.sleep, random=asked)) == [1, 2, 3, 4, 5]
    # RecordingRandom answers the top of each range: the pauses are the bounds, asked once a retry.
    assert asked.calls == [(0, 0.1), (0, 0.2), (0, 0.3), (0, 0.3)]
    assert clock.slept == [0.1, 0.2, 0.3, 0.3]


def test_retries_stop_before_a_pause_that_would_outlast_the_time_left() -> None:
    clock = Clock()
    deadline = 0.65
    retries = Retries(tries=10, backoff=BackoffPolicy(base=0.1, cap=10, jitter=False))
    tried = list(retries.attempts(sleep=clock.sleep, time_left=lambda: deadline - clock.now))
    # Pauses 0.1, 0.2 fit (0.3 s slept); the next, 0.4, would end at 0.7, after the deadline.
    assert tried == [1, 2, 3]
    assert clock.slept == [0.1, 0.2]
    assert clock.now < deadline


def test_retries_stop_when_the_caller_breaks_and_never_sleep_after_the_last_try() -> None:
    clock = Clock()
    retries = Retries(tries=3, backoff=BackoffPolicy(base=1, cap=1))
    for attempt in retries.attempts(sleep=clock.sleep, random=random.Random(3)):
        if attempt == 2:
            break
    assert len(clock.slept) == 1
    clock = Clock()
    assert list(Retries(tries=3, backoff=BackoffPolicy(base=1, cap=1)).attempts(
        sleep=clock.sleep, random=random.Random(3), time_left=lambda: None)) == [1, 2, 3]
    assert len(clock.slept) == 2  # none after the third and last try
    with pytest.raises(ConfigurationError, match="tries"):
        Retries(tries=0, backoff=BackoffPolicy())
