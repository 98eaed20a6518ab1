"""Retry delays: exponential backoff with full jitter, and the one loop that retries a call with them.

``delay = uniform(0, min(cap, base * 2 ** (attempt - 1)))``, attempt counted
from 1 (the runs that started, as the job's record counts them: docs/architecture.md).
Full jitter is the default on purpose: retries without it arrive in lockstep
and stampede the dependency that just recovered (docs/jobs.md).

``Retries.attempts`` is the loop every in-process retry of the runtime runs
(the store's batch reads and transactions, the producer's batch sends, the
worker's record writes): at most ``tries`` tries, a full-jitter pause before
each after the first, and none that would outlast the time the caller has left.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

from sqsjobs._errors import ConfigurationError

#: SQS refuses a visibility timeout above 12 hours.
MAX_VISIBILITY_SECONDS = 43_200


class RandomSource(Protocol):
    """What backoff needs from a random generator (``random.Random`` fits)."""

    def uniform(self, a: float, b: float) -> float: ...


@dataclass(frozen=True, kw_only=True)
class BackoffPolicy:
    """How long a failed job waits before its next attempt.

    Example:
        >>> import random
        >>> policy = BackoffPolicy(base=30, cap=600)
        >>> policy.bound(1), policy.bound(3), policy.bound(10)
        (30.0, 120.0, 600.0)
        >>> 0 <= policy.next_delay(3, random.Random(7)) <= 120
        True
    """

    base: float = 30.0
    cap: float = 600.0
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.base < 0:
            raise ConfigurationError(f"backoff_base must be >= 0, got {self.base}")
        if not 0 <= self.cap <= MAX_VISIBILITY_SECONDS:
            raise ConfigurationError(
                f"backoff_cap must be within 0..{MAX_VISIBILITY_SECONDS} s (SQS's longest visibility), got {self.cap}"
            )

    def bound(self, attempt: int) -> float:
        """The largest delay for ``attempt`` (1-based): ``min(cap, base * 2 ** (attempt - 1))``."""
        exponent = max(attempt, 1) - 1
        # 2 ** 60 already dwarfs any cap; stop there instead of building huge ints.
        return float(min(self.cap, self.base * 2 ** min(exponent, 60)))

    def next_delay(self, attempt: int, random: RandomSource | None = None) -> float:
        """The delay before the attempt after ``attempt``: full jitter unless turned off."""
        bound = self.bound(attempt)
        if not self.jitter:
            return bound
        return (random or _random).uniform(0, bound)


def visibility_seconds(delay: float) -> int:
    """A delay as the whole seconds ``ChangeMessageVisibility`` takes (floored, so never above the bound)."""
    return max(0, min(MAX_VISIBILITY_SECONDS, int(delay)))


@dataclass(frozen=True, kw_only=True)
class Retries:
    """How a call that failed (in whole or in part) is tried again within one process.

    ``attempts`` yields each try's number, 1 to ``tries``, after sleeping the
    full-jitter pause before it (none before the first). It stops early when
    that pause would not end before ``time_left()`` (seconds, or None when
    unbounded): a retry that would outlast the invocation's deadline is
    worth less than the answer in hand. The caller breaks out of the loop
    once the call succeeded; sleep, random and the time left are injected.

    Example:
        >>> import random
        >>> slept = []
        >>> retries = Retries(tries=4, backoff=BackoffPolicy(base=1, cap=8, jitter=False))
        >>> list(retries.attempts(sleep=slept.append)), slept
        ([1, 2, 3, 4], [1.0, 2.0, 4.0])
        >>> left = iter([10.0, 1.5])  # the second pause (2 s) would outlast the 1.5 s left
        >>> list(retries.attempts(sleep=lambda s: None, time_left=lambda: next(left)))
        [1, 2]
        >>> all(0 <= p <= 4 for p in Retries(tries=3, backoff=BackoffPolicy(base=1, cap=8))
        ...     .pauses(random.Random(7)))
        True
    """

    tries: int
    backoff: BackoffPolicy

    def __post_init__(self) -> None:
        if self.tries < 1:
            raise ConfigurationError(f"tries must be at least 1, got {self.tries}")

    def pauses(self, random: RandomSource | None = None) -> Iterator[float]:
        """The pause before each try after the first, ``tries - 1`` of them."""
        for attempt in range(1, self.tries):
            yield self.backoff.next_delay(attempt, random)

    def attempts(self, *, sleep: Callable[[float], None], random: RandomSource | None = None,
                 time_left: Callable[[], float | None] | None = None) -> Iterator[int]:
        """Each try's number, after its pause; none after a pause that would not end before ``time_left()``."""
        yield 1
        for attempt, pause in enumerate(self.pauses(random), start=2):
            left = None if time_left is None else time_left()
            if left is not None and pause >= left:
                return
            sleep(pause)
            yield attempt
