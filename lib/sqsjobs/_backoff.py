"""Retry delays: exponential backoff with full jitter.

``delay = uniform(0, min(cap, base * 2 ** (attempt - 1)))``, attempt counted
from 1 (the runs that started, as the job's record counts them: docs/architecture.md).
Full jitter is the default on purpose: retries without it arrive in lockstep
and stampede the dependency that just recovered (docs/jobs.md).
"""

from __future__ import annotations

import random as _random
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
