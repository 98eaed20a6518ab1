"""What one process (a Lambda container) learned about its limiters, kept between batches.

A container lives for many batches, so ``sqsjobs.flow._permits`` need not ask
DynamoDB what it already saw:

- **busy tokens**: which tokens of a rate limit were taken, until when (its
  own takes, and the refusals' items). A token known busy is not probed
  again before then, so a batch facing a full limiter defers without a call;
- **the lag and the step**: how long after the take a batch's first limited
  job starts, and how long apart its limited jobs start, each smoothed with
  its mean absolute deviation. A token's lease covers its job's expected
  start with room for the deviations (``cover``), and a container takes a
  token about its lag before the previous window ends (``early``);
- **recent deferrals**: how many jobs a limiter deferred in its last window,
  the backlog the deferrals are spread over;
- **contended slots**: a concurrency limiter that refused this process a slot
  lately. Its slots are read before they are written (``sqsjobs.flow._permits``),
  so a crowd of invocations waiting for a few slots reads them instead of
  writing refused conditional puts on them (each would be a write unit on one
  hot item).

What it remembers is only ever a hint: a token's lease in DynamoDB decides.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sqsjobs.flow._limits import RateLimit

#: a token's lease covers its job's expected start plus this many deviations, plus ``MIN_SLACK_SECONDS``
DEVIATIONS = 3
MIN_SLACK_SECONDS = 0.02
#: the lag assumed before a process has seen one (a take and a claim: two round trips)
INITIAL_LAG_SECONDS = 0.05
#: how much a new observation moves the lag and the step
SMOOTHING = 0.3


class LimiterMemory:
    """What one process learned about its limiters (kept for the life of the Lambda container).

    Example:
        >>> memory = LimiterMemory()
        >>> memory.saw_busy("ses", 3, until=10.0)
        >>> memory.busy("ses", now=5.0), memory.busy("ses", now=11.0)
        ({3}, set())
        >>> round(memory.cover(2), 3)  # nothing seen yet: the initial lag, give or take as much, and no step
        0.22
    """

    def __init__(self) -> None:
        self._busy: dict[str, dict[int, float]] = {}
        self._deferred: dict[str, deque[tuple[float, int]]] = {}
        self._contended: dict[str, float] = {}
        self.lag, self.lag_deviation = INITIAL_LAG_SECONDS, INITIAL_LAG_SECONDS
        self.step, self.step_deviation = 0.0, 0.0
        self._lock = threading.Lock()

    def saw_busy(self, limiter: str, index: int, *, until: float) -> None:
        """Token ``index`` of ``limiter`` is held until ``until``."""
        with self._lock:
            self._busy.setdefault(limiter, {})[index] = until

    def busy(self, limiter: str, *, now: float) -> set[int]:
        """The tokens of ``limiter`` known to be held at ``now`` (forgetting those whose lease ended)."""
        with self._lock:
            known = self._busy.get(limiter, {})
            for index in [i for i, until in known.items() if until < now]:
                del known[index]
            return set(known)

    def saw_contention(self, limiter: str, *, until: float) -> None:
        """A slot of concurrency limiter ``limiter`` was refused: treat it as contended until ``until``."""
        with self._lock:
            self._contended[limiter] = max(until, self._contended.get(limiter, until))

    def contended(self, limiter: str, *, now: float) -> bool:
        """Whether ``limiter`` refused this process a slot recently enough that its slots are read first."""
        with self._lock:
            return self._contended.get(limiter, -1.0) >= now

    def free_at(self, limiter: RateLimit, *, now: float) -> float:
        """When a token of ``limiter`` can be taken at the earliest, as far as this process knows (now: maybe)."""
        early = self.early(limiter)
        with self._lock:
            known = [until - early for until in self._busy.get(limiter.name, {}).values() if until - early >= now]
        return min(known) if len(known) >= limiter.capacity else now

    def deferred(self, limiter: RateLimit, *, now: float, count: int) -> int:
        """Note ``count`` jobs deferred by ``limiter`` now; returns how many it deferred in the last window."""
        with self._lock:
            recent = self._deferred.setdefault(limiter.name, deque())
            recent.append((now, count))
            while recent and recent[0][0] < now - limiter.per:
                recent.popleft()
            return sum(n for _, n in recent)

    def observe(self, *, lag: float | None = None, step: float | None = None) -> None:
        """A batch's first limited job started ``lag`` after the take; two of them ``step`` apart."""
        with self._lock:
            if lag is not None:
                self.lag, self.lag_deviation = _smoothed(self.lag, self.lag_deviation, max(lag, 0.0))
            if step is not None:
                self.step, self.step_deviation = _smoothed(self.step, self.step_deviation, max(step, 0.0))

    def early(self, limiter: RateLimit) -> float:
        """How long before a token's lease ends this process takes it: its lag, less a deviation (a window at most).

        The job then usually starts no sooner than the lease's end, and never later than its token covers.
        """
        return min(limiter.per, max(0.0, self.lag - self.lag_deviation))

    def cover(self, position: int) -> float:
        """How long after the take the ``position``-th limited job of a batch (from 0) may start, to be safe."""
        return (self.lag + DEVIATIONS * self.lag_deviation
                + position * (self.step + DEVIATIONS * self.step_deviation) + MIN_SLACK_SECONDS)


def _smoothed(mean: float, deviation: float, value: float) -> tuple[float, float]:
    """An exponentially smoothed mean and mean absolute deviation, moved toward ``value``."""
    return mean + SMOOTHING * (value - mean), deviation + SMOOTHING * (abs(value - mean) - deviation)
