"""What one process (a Lambda container) learned about its limiters, kept between batches.

A container lives for many batches, so ``sqsjobs.flow._permits`` need not ask
DynamoDB what it already saw:

- **where each rate limiter's schedule was** (its ``tat``, from this
  process's last write or refusal): the form of the next reservation's
  conditional write (``sqsjobs.store._rate_ops``) is guessed from it, so the
  guess is right, and the batch writes once, whenever the schedule has not
  fallen behind the clock since;
- **the lag**: how long after the reservation a batch's first limited job
  is ready to start (the claims come between), smoothed with its mean
  absolute deviation. A batch's slots begin that long after the write
  (``lead``), so its first job is not late for its own slot;
- **contended slots**: a concurrency limiter that refused this process a slot
  lately. Its slots are read before they are written (``sqsjobs.flow._permits``),
  so a crowd of invocations waiting for a few slots reads them instead of
  writing refused conditional puts on them (each would be a write unit on one
  hot item).

What it remembers is only ever a hint: the conditional writes decide.
"""

from __future__ import annotations

import threading

#: the lag assumed before a process has seen one (a reservation and the claims: two round trips)
INITIAL_LAG_SECONDS = 0.05
#: how much a new observation moves the lag
SMOOTHING = 0.3
#: the longest lead a batch's slots get (a slower claim step is late for its first slot: it defers that job)
MAX_LEAD_SECONDS = 1.0


class LimiterMemory:
    """What one process learned about its limiters (kept for the life of the Lambda container).

    Example:
        >>> memory = LimiterMemory()
        >>> memory.saw_tat("ses", 10.0)
        >>> memory.tat("ses", now=5.0), memory.tat("sms", now=5.0)
        (10.0, -inf)
    """

    def __init__(self) -> None:
        self._tat: dict[str, float] = {}
        self._contended: dict[str, float] = {}
        self.lag, self.lag_deviation = INITIAL_LAG_SECONDS, INITIAL_LAG_SECONDS
        self._lock = threading.Lock()

    def observe_lag(self, lag: float) -> None:
        """A batch's first limited job was ready to start ``lag`` seconds after its reservation."""
        with self._lock:
            lag = max(lag, 0.0)
            self.lag, self.lag_deviation = (self.lag + SMOOTHING * (lag - self.lag),
                                            self.lag_deviation + SMOOTHING * (abs(lag - self.lag)
                                                                              - self.lag_deviation))

    def lead(self) -> float:
        """How long after its reservation a batch's first slot should be: its lag and two deviations.

        Example:
            >>> round(LimiterMemory().lead(), 3)
            0.15
        """
        with self._lock:
            return min(MAX_LEAD_SECONDS, self.lag + 2 * self.lag_deviation)

    def saw_tat(self, limiter: str, tat: float) -> None:
        """Rate limiter ``limiter``'s schedule was at ``tat`` (it only moves forward)."""
        with self._lock:
            self._tat[limiter] = max(tat, self._tat.get(limiter, tat))

    def tat(self, limiter: str, *, now: float) -> float:
        """Where this process last saw ``limiter``'s schedule (-inf: never)."""
        with self._lock:
            return self._tat.get(limiter, float("-inf"))

    def saw_contention(self, limiter: str, *, until: float) -> None:
        """A slot of concurrency limiter ``limiter`` was refused: treat it as contended until ``until``."""
        with self._lock:
            self._contended[limiter] = max(until, self._contended.get(limiter, until))

    def contended(self, limiter: str, *, now: float) -> bool:
        """Whether ``limiter`` refused this process a slot recently enough that its slots are read first."""
        with self._lock:
            return self._contended.get(limiter, -1.0) >= now
