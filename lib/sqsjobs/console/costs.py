"""The overview's cost view: what each job cost (``ops/_cost_reader.py``), read at most every few minutes.

Pricing reads every metric series of the service from CloudWatch, and ``GetMetricData`` bills each metric
it returns: read on every refresh of the page (every 5 seconds), the view would cost more than many of
the jobs it prices. Its figures move by the hour, so a console reads them once per :data:`MAX_AGE_SECONDS`
(by its injected clock) and shows when.

Example:
    >>> calls = []
    >>> cache = CostCache()
    >>> read = lambda: calls.append(1)
    >>> _ = cache.get(read, now=0.0), cache.get(read, now=60.0), cache.get(read, now=MAX_AGE_SECONDS)
    >>> len(calls), cache.read_at
    (2, 600.0)
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from sqsjobs.ops._cost import CostReport

#: how long a console shows the same cost figures before it reads them again
MAX_AGE_SECONDS: Final = 600.0


@dataclass
class CostCache:
    """The last cost report a console read, and when."""

    max_age: float = MAX_AGE_SECONDS
    report: CostReport | None = None
    read_at: float | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def get(self, read: Callable[[], CostReport | None], *, now: float) -> CostReport | None:
        """The cached report, or ``read()``'s when there is none yet or it is ``max_age`` old."""
        with self._lock:
            if self.read_at is None or now - self.read_at >= self.max_age:
                self.report, self.read_at = read(), now
            return self.report
