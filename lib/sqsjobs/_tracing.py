"""The trace/correlation id of the job being run, carried to jobs it enqueues.

A context variable, so concurrent code (threads started by a job) sees its own.
"""

from __future__ import annotations

from contextvars import ContextVar

_current: ContextVar[str | None] = ContextVar("sqsjobs_trace_id", default=None)


def current_trace_id() -> str | None:
    """The trace id of the job running in this context (None outside a job): log it to correlate.

    It is the ``trace_id`` the job was enqueued with, else its SQS message
    id; jobs it enqueues carry it on.

    Example:
        >>> from sqsjobs import JobApp
        >>> app, seen = JobApp(), []
        >>> @app.job("greet", key="greet:{user_id}")
        ... def greet(user_id: int) -> None:
        ...     seen.append(current_trace_id())
        >>> with app.testing() as t:
        ...     _ = t.run(greet.message(user_id=7, trace_id="request-42"))
        >>> seen, current_trace_id()
        (['request-42'], None)
    """
    return _current.get()


def set_trace_id(trace_id: str | None) -> object:
    """Make ``trace_id`` current; returns a token for ``reset_trace_id``."""
    return _current.set(trace_id)


def reset_trace_id(token: object) -> None:
    """Restore the trace id that was current before ``set_trace_id``."""
    _current.reset(token)  # type: ignore[arg-type]
