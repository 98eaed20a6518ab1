"""Timers on the injected clock: a function called once the clock reaches a moment, whatever the batch is doing.

The worker needs two: a finished job's record is written once it has waited
``flush_after`` seconds (``worker/_record_writes.py``), even while another job
runs for minutes; and at the invocation's deadline margin nothing more starts
and every record still waiting is written (``worker/_run_step.py``). Neither
may depend on the next thing the batch happens to do, so both are timers.

A ``Timer`` is anything with ``call_at(when, callback) -> handle`` (``when``
on the clock's own scale, epoch seconds) whose handle has ``cancel()``.
``timer_for(clock)`` picks the one for a clock, in one place:

- a clock that is itself a timer drives its own: ``sqsjobs.testing``'s
  ``ManualClock`` calls what fell due inside ``advance``, in order, with the
  clock set to each callback's moment, so a test moves time and sees the
  writes happen, deterministically and without waiting;
- any other clock (``time.time`` in Lambda) gets ``ClockTimer``: one daemon
  thread per process (started on first use, never at import) that sleeps
  until the earliest moment, reads the clock again (it may have been
  adjusted) and calls what is due. A callback runs in that thread, so it
  must be quick and must not raise (one that raises is reported on stderr,
  and the thread carries on).

Example:
    >>> import time
    >>> import threading
    >>> fired = threading.Event()
    >>> handle = timer_for(time.time).call_at(time.time() - 1, fired.set)  # already due: called at once
    >>> fired.wait(10)
    True
"""

from __future__ import annotations

import heapq
import itertools
import sys
import threading
from collections.abc import Callable
from typing import Protocol

#: the longest the timer thread sleeps before it reads the clock again (a clock adjusted meanwhile)
MAX_SLEEP = 60.0


class TimerHandle(Protocol):
    """A scheduled call: ``cancel()`` it before it is due and it never happens."""

    def cancel(self) -> None: ...


class Timer(Protocol):
    """Calls ``callback`` once the clock reads ``when`` or later."""

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle: ...


def timer_for(clock: Callable[[], float]) -> Timer:
    """The timer of ``clock``: its own when it is one (a test's ``ManualClock``), else the process's thread."""
    if callable(getattr(clock, "call_at", None)):
        return clock  # type: ignore[return-value]
    return ClockTimer(clock)


class _Entry:
    __slots__ = ("callback", "clock", "order", "when")

    def __init__(self, when: float, order: int, clock: Callable[[], float], callback: Callable[[], None]) -> None:
        self.when = when
        self.order = order
        self.clock = clock
        self.callback = callback

    def __lt__(self, other: _Entry) -> bool:
        return (self.when, self.order) < (other.when, other.order)

    def cancel(self) -> None:
        _THREAD.cancel(self)


class ClockTimer:
    """A ``Timer`` on a clock that moves by itself, served by the process's one timer thread."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.clock = clock

    def call_at(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        return _THREAD.add(_Entry(when, next(_ORDER), self.clock, callback))


class _TimerThread:
    """The entries of every ``ClockTimer`` of the process, in a heap, and the daemon thread that calls them."""

    def __init__(self) -> None:
        self._entries: list[_Entry] = []
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    def add(self, entry: _Entry) -> _Entry:
        with self._changed:
            heapq.heappush(self._entries, entry)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="sqsjobs-timer", daemon=True)
                self._thread.start()
            self._changed.notify()
        return entry

    def cancel(self, entry: _Entry) -> None:
        with self._changed:
            if entry in self._entries:  # a handful at most: a batch's flush and its deadline
                self._entries.remove(entry)
                heapq.heapify(self._entries)

    def _serve(self) -> None:
        while True:
            with self._changed:
                while not self._entries:
                    self._changed.wait()
                first = self._entries[0]
                wait = first.when - first.clock()
                if wait > 0:
                    self._changed.wait(min(wait, MAX_SLEEP))
                    continue
                heapq.heappop(self._entries)
            try:
                first.callback()
            except Exception as error:  # a bug in a callback: say so, and keep serving the others
                print(f"sqsjobs timer callback failed: {type(error).__name__}: {error}", file=sys.stderr)


_ORDER = itertools.count()
_THREAD = _TimerThread()
