"""Where a batch's concurrent jobs run: the process's job threads and its event loop, kept between invocations.

Both are made on first use (a batch of plain jobs makes neither, and nothing
here imports ``asyncio`` before a batch needs a loop) and kept for the
process, as Lambda keeps a warm container:

- ``pool``: the threads of ``threads=True`` jobs, as many as the app's
  ``concurrency``, started as jobs need them;
- ``loop()``: the event loop one batch's async jobs share. It is the same
  loop from one invocation to the next (as Powertools' ``AsyncBatchProcessor``
  keeps one in Lambda), so an async client a job keeps at module level (an
  HTTP client's connection pool) stays bound to a live loop and keeps its
  connections. It runs only while the batch waits for its jobs; between
  batches it is idle, and whatever tasks a batch's jobs left behind are
  cancelled when the batch ends, so no job's work spills into the next
  invocation. A batch that starts while the loop is busy (one run inside
  another's job: a test, or a nested invocation) gets a loop of its own,
  closed as ``asyncio.run`` closes one.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio


class JobRunners:
    """The threads and the event loop of one app's worker (``threads``: the pool's size, the ``concurrency``)."""

    def __init__(self, threads: int) -> None:
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_busy = False
        self._lock = threading.Lock()

    @property
    def pool(self) -> ThreadPoolExecutor:
        """The threads of ``threads=True`` jobs (built once)."""
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="sqsjobs-job")
            return self._pool

    @contextmanager
    def loop(self) -> Iterator[asyncio.AbstractEventLoop]:
        """The event loop of one batch: the process's when it is free, else one of the batch's own."""
        import asyncio

        with self._lock:
            kept = not self._loop_busy
            if kept:
                self._loop_busy = True
                if self._loop is None or self._loop.is_closed():
                    self._loop = asyncio.new_event_loop()
                loop = self._loop
        if not kept:
            loop = asyncio.new_event_loop()
        try:
            yield loop
        finally:
            try:
                _cancel_leftovers(loop)
            finally:
                if kept:
                    with self._lock:
                        self._loop_busy = False
                else:
                    _close(loop)


def _cancel_leftovers(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks a batch's jobs started and left running (and wait for them to unwind)."""
    import asyncio

    leftover = asyncio.all_tasks(loop)
    for task in leftover:
        task.cancel()
    if leftover:
        loop.run_until_complete(asyncio.gather(*leftover, return_exceptions=True))


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """Close a batch's own loop as ``asyncio.run`` does: async generators and the default executor shut first."""
    try:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
