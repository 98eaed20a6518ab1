"""A job's ``time_limit``: ``TimeLimitExceeded`` raised inside the job's own code, and nowhere else.

``SIGALRM`` is the only way to interrupt arbitrary Python code in-process, and
Lambda runs handlers in the main thread. CPython runs a Python signal handler
between two bytecodes of whatever the main thread is executing and hands it
that frame; an exception the handler raises is raised *there*. While the job
runs, that is the job. But no arm → call → disarm order can close every
window around the call: the alarm can land after the job returned and before
the timer is off (in the worker's bookkeeping: a completion write, a log
call), inside the disarm itself, or inside a ``__del__`` or weakref callback
the garbage collector started, where an exception is not even raised but
handed to ``sys.unraisablehook``.

So the handler looks at the interrupted frame and raises only when it is the
job's own code, which means all of:

- the job's call is on the stack: the runner sets a flag just before calling
  the job and clears it just after, both in its own frame;
- the interrupted frame is a callee of the runner's frame (following
  ``f_back`` reaches it) and is not the runner's frame itself;
- no frame on that path is a finalizer: a ``__del__``, a weakref callback
  (its argument is the dead reference; ``weakref.finalize`` included), the
  unraisable hook, a ``gc.callbacks`` function, a trace or profile function,
  or a generator being closed (``GeneratorExit`` in flight: how the garbage
  collector finalizes one).

An alarm that lands anywhere else is recorded: ``expired`` becomes True (the
timer fires only once ``seconds`` have passed since the job started, so the
job did reach its limit) and nothing is raised there. Once the job's call has
ended and the timer is off, the runner raises ``TimeLimitExceeded`` itself.
While the job still runs the timer repeats every ``TIME_LIMIT_REPEAT``
seconds, so an alarm recorded in a finalizer is followed by one that lands in
the job's code; a job that catches ``TimeLimitExceeded`` and carries on gets
it again.

An ``async def`` job needs no signal (``run_async_with_time_limit``): the
limit cancels it at the ``await`` it is waiting on (``asyncio.timeout``),
inside its own code again, while the batch's other async jobs go on. A
``threads=True`` job cannot be stopped at all, so a time limit is refused
for one when it is declared (``_job_options.threads_option``).

Example:
    >>> run_with_time_limit(lambda invoice_id: f"sent {invoice_id}", {"invoice_id": 42}, 30, "invoice-email")
    'sent 42'
"""

from __future__ import annotations

import functools
import gc
import signal
import sys
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Mapping
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from sqsjobs._errors import TimeLimitExceeded
from sqsjobs.worker._stages import Stage

if TYPE_CHECKING:
    from sqsjobs.worker._delivery import Delivery

R = TypeVar("R")

#: after the first alarm, the timer fires again this often until the job's call ends
TIME_LIMIT_REPEAT = 1.0

_SignalHandler = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def run_with_time_limit(fn: Callable[..., R], kwargs: Mapping[str, Any], seconds: float | None, job: str) -> R:
    """``fn(**kwargs)``, stopped with ``TimeLimitExceeded`` once it runs past ``seconds``.

    Whatever the job does about the limit, it counts: one that swallows
    ``TimeLimitExceeded`` and returns, or turns it into another exception,
    still ends in ``TimeLimitExceeded`` (the latter as its ``__cause__``).
    Without ``seconds``, or outside the main thread, ``fn`` runs unlimited.

    Example:
        >>> def sly() -> str:
        ...     try:
        ...         signal.raise_signal(signal.SIGALRM)  # what the timer does when the limit passes
        ...     except TimeLimitExceeded:
        ...         return "done anyway"
        >>> run_with_time_limit(sly, {}, 30, "sly")
        Traceback (most recent call last):
        ...
        sqsjobs.TimeLimitExceeded: job 'sly' ran past its time_limit of 30 s
    """
    return TimeLimit(seconds, job).run(fn, kwargs)


class TimeLimit:
    """One run of one job under a limit: ``run`` arms the timer, ``on_alarm`` is its handler.

    ``expired`` tells whether the limit passed, wherever the alarm landed.

    Example:
        >>> limit = TimeLimit(30, "export")
        >>> limit.run(lambda rows: rows * 2, {"rows": 21})
        42
        >>> limit.expired
        False
    """

    def __init__(self, seconds: float | None, job: str) -> None:
        self.seconds = seconds
        self.job = job
        self.expired = False
        self._runner: FrameType | None = None
        self._running = False

    def exceeded(self) -> TimeLimitExceeded:
        """The error for this limit.

        Example:
            >>> TimeLimit(30, "export").exceeded()
            TimeLimitExceeded("job 'export' ran past its time_limit of 30 s")
        """
        return TimeLimitExceeded(f"job {self.job!r} ran past its time_limit of {self.seconds} s")

    def on_alarm(self, signum: int, frame: FrameType | None) -> None:
        """The ``SIGALRM`` handler: record the alarm; raise only if ``frame`` is the job's own code."""
        self.expired = True
        if self.in_job(frame):
            raise self.exceeded()

    def in_job(self, frame: FrameType | None) -> bool:
        """True when an exception raised in ``frame`` now would be raised by the job's own code."""
        runner = self._runner
        if not self._running or runner is None or frame is None or frame is runner:
            return False
        if isinstance(sys.exc_info()[1], GeneratorExit):
            return False  # a generator being closed, maybe by the garbage collector
        hooks = _hook_codes()
        while frame is not None and frame is not runner:
            if frame.f_code in hooks or _is_finalizer(frame):
                return False
            frame = frame.f_back
        return frame is runner

    def run(self, fn: Callable[..., R], kwargs: Mapping[str, Any]) -> R:
        """``fn(**kwargs)`` under the limit (see ``run_with_time_limit``)."""
        if not self.seconds or threading.current_thread() is not threading.main_thread():
            return fn(**kwargs)
        self._runner = sys._getframe()
        previous: _SignalHandler = signal.signal(signal.SIGALRM, self.on_alarm)
        # Someone else's timer (pytest-timeout's, say) is put back afterwards, less the time we took.
        outer = signal.setitimer(signal.ITIMER_REAL, self.seconds, TIME_LIMIT_REPEAT)
        started = time.monotonic()
        try:
            try:
                self._running = True
                try:
                    result = fn(**kwargs)
                finally:
                    self._running = False
            finally:
                _disarm(previous, outer, started)
        except Exception as raised:
            if self.expired and not isinstance(raised, TimeLimitExceeded):
                # Whatever the job turned the limit into (cleanup failing, a re-wrap), it ran out of time.
                error = TimeLimitExceeded(f"{self.exceeded()} (then raised {type(raised).__name__}: {raised})")
                raise error from raised
            raise
        if self.expired:
            raise self.exceeded()  # the job swallowed it and returned, or the alarm landed outside it
        return result


def _disarm(previous: _SignalHandler, outer: tuple[float, float], started: float) -> None:
    # Nested so that nothing (a Ctrl-C, say) can skip a step: a timer left running would
    # fire into whatever runs next, every TIME_LIMIT_REPEAT seconds.
    try:
        signal.setitimer(signal.ITIMER_REAL, 0)
    finally:
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL if previous is None else previous)
        finally:
            delay, interval = outer
            if delay:
                signal.setitimer(signal.ITIMER_REAL, max(delay - (time.monotonic() - started), 0.001), interval)


def _is_finalizer(frame: FrameType) -> bool:
    """A ``__del__``, or a weakref callback: called with a reference whose object is gone."""
    code = frame.f_code
    if code.co_name == "__del__":
        return True
    if not 1 <= code.co_argcount <= 2:  # callback(ref), or a bound method's (self, ref)
        return False
    arguments = frame.f_locals
    return any(_dead_reference(arguments.get(name)) for name in code.co_varnames[:code.co_argcount])


def _dead_reference(value: object) -> bool:
    return isinstance(value, weakref.ReferenceType) and value() is None


def _hook_codes() -> set[CodeType]:
    """The code of every hook the interpreter calls from C in the middle of other code."""
    hooks: list[object] = [sys.unraisablehook, sys.gettrace(), sys.getprofile(), *gc.callbacks]
    return {code for hook in hooks if (code := _code_of(hook)) is not None}


def _code_of(hook: object) -> CodeType | None:
    while isinstance(hook, functools.partial):
        hook = hook.func
    code = getattr(getattr(hook, "__func__", hook), "__code__", None)  # a function or a bound method
    return code if isinstance(code, CodeType) else None


async def run_async_with_time_limit(call: Callable[[], Awaitable[R]], seconds: float, job: str) -> R:
    """``await call()``, cancelled once it runs past ``seconds``: ``TimeLimitExceeded``, as a plain job's.

    An async job needs no signal: the cancellation arrives inside the job's own code, at the ``await`` it is
    waiting on, and this task's other jobs go on. As with ``run_with_time_limit``, a job that swallows the
    cancellation and returns, or turns it into another exception, still ends in ``TimeLimitExceeded``.

    Example:
        >>> import asyncio
        >>> async def slow() -> None:
        ...     await asyncio.sleep(60)
        >>> asyncio.run(run_async_with_time_limit(slow, 0.01, "slow"))
        Traceback (most recent call last):
        ...
        sqsjobs.TimeLimitExceeded: job 'slow' ran past its time_limit of 0.01 s
    """
    import asyncio

    limit = TimeLimit(seconds, job)
    timeout = asyncio.timeout(seconds)
    try:
        async with timeout:
            result = await call()
    except Exception as raised:
        if not timeout.expired() or isinstance(raised, TimeLimitExceeded):
            raise
        if isinstance(raised, TimeoutError):  # the cancellation, as the timeout turned it
            raise limit.exceeded() from None
        raise TimeLimitExceeded(f"{limit.exceeded()} (then raised {type(raised).__name__}: {raised})") from raised
    if timeout.expired():
        raise limit.exceeded()  # the job swallowed the cancellation and returned
    return result


class TimeLimitStage(Stage):
    """A stage (``worker/_stages.py``): each job's call runs under its ``time_limit``, when it has one."""

    def concerns(self, d: Delivery) -> bool:
        return d.job is not None and bool(d.job.options.time_limit)

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        seconds = d.job.options.time_limit if d.job is not None else None
        if not seconds:
            return call
        if d.job is not None and d.job.is_async:
            return lambda: run_async_with_time_limit(call, seconds, d.job_name)
        return lambda: run_with_time_limit(call, {}, seconds, d.job_name)
