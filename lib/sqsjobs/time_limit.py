"""A job's time limit: ``TimeLimitExceeded`` raised in the running job after ``time_limit`` seconds.

(Moved out of the consumer; docs/jobs.md describes the option.)
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqsjobs.errors import TimeLimitExceeded

#: after the first ``TimeLimitExceeded``, raise it again this often until the job gives up
TIME_LIMIT_REPEAT = 1.0


class TimeLimit:
    """What ``time_limit`` yields: whether the limit fired while the block ran.

    Example:
        >>> TimeLimit().expired
        False
    """

    expired: bool = False
    #: set while the timer is being disarmed: a late alarm must not interrupt the cleanup
    leaving: bool = False


@contextmanager
def time_limit(seconds: float | None, job: str) -> Iterator[TimeLimit]:
    """Raise ``TimeLimitExceeded`` in the running job after ``seconds`` (main thread only).

    SIGALRM is the only way to interrupt arbitrary Python code in-process, and
    Lambda runs handlers in the main thread; elsewhere the limit is not enforced.
    A job that catches the exception and carries on gets it again every
    ``TIME_LIMIT_REPEAT`` seconds, and ``expired`` tells the caller it fired.

    Example:
        >>> with time_limit(None, "j") as limit:
        ...     pass
        >>> limit.expired
        False
    """
    limit = TimeLimit()
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield limit
        return

    def expired(signum: int, frame: Any) -> None:
        if limit.leaving:
            return
        limit.expired = True
        raise TimeLimitExceeded(f"job {job!r} ran past its time_limit of {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    # Someone else's timer (a test runner's timeout, say) is put back, less the time we took.
    outer_delay, outer_interval = signal.setitimer(signal.ITIMER_REAL, seconds, TIME_LIMIT_REPEAT)
    started = time.monotonic()
    try:
        yield limit
    finally:
        # Nested so that an alarm landing before ``leaving`` is set cannot skip the disarm:
        # a timer left running would raise in whatever code runs next, every second.
        try:
            limit.leaving = True
        finally:
            try:
                signal.setitimer(signal.ITIMER_REAL, 0)
            finally:
                signal.signal(signal.SIGALRM, previous)
                if outer_delay:
                    left = max(outer_delay - (time.monotonic() - started), 0.001)
                    signal.setitimer(signal.ITIMER_REAL, left, outer_interval)


