"""One call of a job's function (or of a batch handler's): in a context of its own, under the stages' wraps, timed.

Several jobs of a batch may run at once (``worker/_run_step.py``): async ones
interleave on one event loop, ``threads=True`` ones on threads. So nothing a
call needs may be process-wide. Each call runs in its own copy of the
context (``contextvars``), made when it starts (``context``), where:

- the trace id is the message's (``sqsjobs._tracing``: jobs it enqueues carry it);
- the log fields (job, key, message id, attempt, trace id) are set with
  Powertools' ``thread_safe_append_keys``, which keeps them in a context
  variable, so every line the job writes through ``app.logger`` carries its
  own fields even when two jobs' lines interleave (``append_keys`` would set
  them for the whole process);
- the cancellation and time-budget variables the stages and ``time_left()``
  read are the job's own.

``sync`` calls a plain function (its result must not be an awaitable:
``sqsjobs._calls.refuse_awaitable``); ``awaited`` awaits an ``async def`` one.
Both catch what the job raised (``Exception``; anything else, a kill,
escapes the batch) and measure the call's own duration, which is the
``JobDuration`` of that job alone, and note when it ended on the injected
clock: its record's wait for the write counts from then, even when its
bookkeeping waits a moment for the batch's lock. A stage that failed before
the job was called (``StageFailed``, ``worker/_stages.py``) means the job
did not start: the call has no duration then, and it is no job failure.
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqsjobs._calls import refuse_awaitable
from sqsjobs._tracing import set_trace_id
from sqsjobs.worker._stages import StageFailed

if TYPE_CHECKING:
    from sqsjobs.worker._delivery import Delivery
    from sqsjobs.worker._stages import Stage


@dataclass(frozen=True, kw_only=True)
class Ran:
    """How one call ended: its value, or the exception it raised; how long it took (None: it never started, a stage
    failed first), and when (the clock's) it ended."""

    result: Any = None
    error: Exception | None = None
    duration_ms: float | None = 0.0
    ended_at: float | None = None

    @property
    def started(self) -> bool:
        """False when a stage failed before the job was called (``StageFailed``)."""
        return not isinstance(self.error, StageFailed)


class JobCalls:
    """Calls the batch's jobs (``stages``: their ``wrap_run``; ``log``: the app's logger)."""

    def __init__(self, *, stages: Stage, log: Any, clock: Callable[[], float]) -> None:
        self.stages = stages
        self.log = log
        self.clock = clock

    def context(self, lead: Delivery, fields: Mapping[str, Any]) -> contextvars.Context:
        """A context for one call: the caller's, with ``lead``'s trace id and the log ``fields`` set."""
        context = contextvars.copy_context()
        context.run(self._enter, lead, fields)
        return context

    def _enter(self, lead: Delivery, fields: Mapping[str, Any]) -> None:
        set_trace_id(lead.trace_id or lead.message_id)
        append = getattr(self.log, "thread_safe_append_keys", None)
        if callable(append):
            append(**fields)

    def sync(self, lead: Delivery, invoke: Callable[[], Any]) -> Ran:
        """Call a plain function (``invoke``) under the stages' wraps, in the current context."""
        started = time.perf_counter()
        try:
            result = refuse_awaitable(self.stages.wrap_run(lead, invoke)(), f"job {lead.job_name!r}")
        except Exception as raised:
            return self._raised(raised, started)
        return Ran(result=result, duration_ms=_since(started), ended_at=self.clock())

    async def awaited(self, lead: Delivery, invoke: Callable[[], Awaitable[Any]]) -> Ran:
        """Await an async function (``invoke`` makes its coroutine) under the stages' wraps."""
        started = time.perf_counter()
        try:
            result = await self.stages.wrap_run(lead, invoke)()
        except Exception as raised:
            return self._raised(raised, started)
        return Ran(result=result, duration_ms=_since(started), ended_at=self.clock())

    def _raised(self, raised: Exception, started: float) -> Ran:
        if isinstance(raised, StageFailed):  # the job was never called: no duration of its own
            return Ran(error=raised, duration_ms=None, ended_at=self.clock())
        return Ran(error=raised, duration_ms=_since(started), ended_at=self.clock())


def _since(started: float) -> float:
    return (time.perf_counter() - started) * 1000
