"""What one process (a Lambda container) learned about its limiters, kept between batches.

A container lives for many batches, so ``sqsjobs.flow._permits`` need not ask
DynamoDB what it already saw:

- **where each rate limiter's schedule was** (its ``tat``, from this
  process's last write or refusal): the form of the next reservation's
  conditional write (``sqsjobs.store._rate_ops``) is guessed from it, so the
  guess is right, and the batch writes once, whenever the schedule has not
  fallen behind the clock since;
- **contended slots**: a concurrency limiter that refused this process a slot
  lately. Its slots are read before they are written (``sqsjobs.flow._permits``),
  so a crowd of invocations waiting for a few slots reads them instead of
  writing refused conditional puts on them (each would be a write unit on one
  hot item).

What it remembers is only ever a hint: the conditional writes decide.
"""

from __future__ import annotations

import threading


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
        self._lock = threading.Lock()

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
