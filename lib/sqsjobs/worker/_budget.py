"""The time a running job may still use: the invocation's remaining time minus the margin.

``JobApp.process_batch`` makes the Lambda context current for the batch; a
job reads ``time_left()`` to stop early (a chunked job returns the cursor it
reached, and the framework continues from there). Outside an invocation, and
without a Lambda context, the budget is unknown (``None``): never stop early.

This module must stay import-light: jobs import it on every cold start.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, kw_only=True)
class _Invocation:
    context: Any
    margin: float


_current: ContextVar[_Invocation | None] = ContextVar("sqsjobs_invocation", default=None)


def time_left() -> float | None:
    """Seconds the running job may still use before the worker's deadline margin, or None if unknown.

    Example:
        >>> time_left() is None  # not inside an invocation
        True
        >>> from sqsjobs.testing import FakeContext
        >>> with invocation(FakeContext(remaining_ms=30_000, clock=lambda: 0.0), margin=5.0):
        ...     time_left()
        25.0
    """
    current = _current.get()
    if current is None:
        return None
    left = remaining_seconds(current.context)
    return None if left is None else left - current.margin


def remaining_seconds(context: Any) -> float | None:
    """Seconds left in the Lambda invocation ``context``, or None without one (a test, a script).

    The one reading of ``get_remaining_time_in_millis`` in sqsjobs: the worker's
    deadline, the scheduler's lease, redrive's stop and ``time_left`` all use it.

    Example:
        >>> from sqsjobs.testing import FakeContext
        >>> remaining_seconds(FakeContext(remaining_ms=2_500, clock=lambda: 0.0)), remaining_seconds(None)
        (2.5, None)
    """
    getter = getattr(context, "get_remaining_time_in_millis", None)
    if getter is None:
        return None
    return float(getter()) / 1000.0


@contextmanager
def invocation(context: Any, *, margin: float) -> Iterator[None]:
    """Make ``context`` (a Lambda context) the one ``time_left()`` reads, for the ``with`` block."""
    token = _current.set(_Invocation(context=context, margin=margin))
    try:
        yield
    finally:
        _current.reset(token)
