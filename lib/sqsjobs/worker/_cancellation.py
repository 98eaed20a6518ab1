"""Cooperative cancellation: a running job may ask whether its key was cancelled.

``app.cancel(key)`` on a running job only flags its record; sqsjobs never
kills a job halfway through a side effect. A long job polls
``cancel_requested()`` between steps and stops cleanly (returning, or raising
``PermanentError``) when it says True. Each call is one consistent read of the
record (0.5 read units), so poll between units of work, not in a tight loop.

This module must stay import-light: jobs import it on every cold start.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqsjobs.worker._stages import Stage

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._delivery import Delivery


@dataclass(frozen=True)
class _Running:
    store: LeaseStore
    key: str


_current: ContextVar[_Running | None] = ContextVar("sqsjobs_running_job", default=None)


def cancel_requested() -> bool:
    """True when ``app.cancel(key)`` was called for the job running here (False outside a job).

    Example (a job cancelled while it runs, as an operator's ``app.cancel`` would):
        >>> from sqsjobs import JobApp
        >>> app, seen = JobApp(), []
        >>> @app.job("report", key="report:{n}")
        ... def report(n: int) -> None:
        ...     seen.append(cancel_requested())
        ...     app.cancel(f"report:{n}")
        ...     seen.append(cancel_requested())  # between two steps: stop here
        >>> with app.testing() as t:
        ...     _ = t.run(report.message(n=7))
        >>> seen, cancel_requested()  # outside a job: False
        ([False, True], False)
    """
    running = _current.get()
    if running is None:
        return False
    item = running.store.get(running.key)
    return bool(item is not None and item.get("cancel_requested"))


@contextmanager
def running_job(store: LeaseStore, key: str) -> Iterator[None]:
    """Make ``key`` (its record in ``store``) the job ``cancel_requested()`` asks about, for the block."""
    token = _current.set(_Running(store, key))
    try:
        yield
    finally:
        _current.reset(token)


class CancellationStage(Stage):
    """A stage (``worker/_stages.py``): inside a job's call, ``cancel_requested()`` reads its key's record."""

    def __init__(self, store: LeaseStore) -> None:
        self.store = store

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        if d.job is not None and d.job.is_async:
            async def run_async() -> Any:  # set inside the job's own task, for as long as it runs
                with running_job(self.store, d.key):
                    return await call()

            return run_async

        def run() -> Any:
            with running_job(self.store, d.key):
                return call()

        return run
