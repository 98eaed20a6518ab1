"""Step 4 of ``Consumer.run``: the batch's claimed jobs run, several at once where they may.

How a job runs is its own (``mode_of``):

- an ``async def`` job (or batch handler) is a task on the batch's one
  event loop; the async jobs of a batch interleave there (the loop and the
  threads are the process's, kept between invocations: ``worker/_job_runners.py``);
- a plain function declared with ``threads=True`` runs on one of the
  process's job threads;
- any other plain function runs *inline*: on the invocation's own thread,
  one at a time, as before (sync code is rarely thread-safe). It runs with
  no event loop running, so it may call ``asyncio.run`` itself, and it is
  the main thread in Lambda, so its ``time_limit`` (``SIGALRM``) holds.

The run step is one loop on the invocation's thread. Each round it looks at
the deliveries still waiting, in the batch's order, and starts what may
start now:

1. at most ``concurrency`` (the setting) run at once, every kind counted;
   a batch handler's call counts once, however many items it carries;
2. a FIFO message group runs in order, one at a time: a delivery starts only
   once every earlier delivery of its group is decided; groups run beside
   each other (the FIFO stage still holds back what follows one that went
   back);
3. a later copy of a key follows its first copy once that one is decided;
4. a stage may hold a delivery back while the batch's own running jobs hold
   what it needs (``Stage.must_wait``: a concurrency limiter's slots the
   batch took); it starts when one of them ends;
5. ``Consumer.ready`` then checks what it always did (time left, attempts,
   ``on_crash``, the stages' ``before_run``: a rate limit's token is taken
   per start) and concludes what may not start.

The tasks and threads it starts run while the loop runs (``asyncio.wait``
for the first to end); an inline job runs after the round's others were
started and given one turn of the loop, so their requests are on the wire
while it runs. What a job ended with is recorded *where it ended* (its task,
its thread, or inline), under the batch's lock, at once: the stages'
``after_run``, its decision, and its record submitted to the batch's writes
(``worker/_record_writes.py``), so a finished job's record never waits for
another job, only for the ``flush_after`` timer.

At the deadline margin (a timer on the injected clock, ``worker/_timer.py``)
every delivery that has not started is concluded unstarted (its attempt given
back) and every waiting record is written; the jobs still running go on
under their own ``time_limit``, as one alone did. An exception that is not an
``Exception`` (a kill, ``KeyboardInterrupt``) escapes the batch: nothing more
starts, the async jobs are cancelled, and the threads are waited for (a
thread cannot be stopped) before it is raised.

``asyncio`` is imported, and a loop made, only for a batch that has a job to
run on one: a batch of plain jobs runs exactly as it did, with no loop. When
``process_batch`` is called from inside a running loop (an async test), a
batch that needs its own loop runs on a thread of its own (a loop cannot run
inside another), where a plain job's ``time_limit`` cannot be armed.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from sqsjobs.worker._batch_handler import ItemRunner, end_call, gather_call, invoke_call
from sqsjobs.worker._budget import remaining_seconds
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._delivery import State

if TYPE_CHECKING:
    import asyncio
    import concurrent.futures
    import contextvars

    from sqsjobs._job import Job
    from sqsjobs._settings import Settings
    from sqsjobs.worker._batch import Batch
    from sqsjobs.worker._delivery import Delivery
    from sqsjobs.worker._job_call import JobCalls, Ran
    from sqsjobs.worker._job_runners import JobRunners
    from sqsjobs.worker._timer import Timer, TimerHandle


class Runner(ItemRunner, Protocol):
    """What the run step drives of the consumer (``worker/_consumer.py`` is the one): its settings, clock and
    timer, how it calls a job, and how a claimed delivery that does not run ends."""

    settings: Settings
    calls: JobCalls
    timer: Timer

    def clock(self) -> float: ...

    def _follow(self, batch: Batch, d: Delivery, first: Delivery | None) -> None: ...

    def _unstarted(self, batch: Batch, d: Delivery, facts: Facts) -> None: ...



class Mode(StrEnum):
    """Where a job runs."""

    INLINE = "inline"  #: on the invocation's thread, one at a time (a plain function)
    THREAD = "thread"  #: on a job thread (``threads=True``)
    ASYNC = "async"  #: a task on the invocation's event loop (``async def``)


def mode_of(job: Job[Any, Any] | None) -> Mode:
    """Where ``job`` runs.

    Example:
        >>> from sqsjobs import JobApp
        >>> app = JobApp()
        >>> @app.job("receipt")
        ... async def receipt(order_id: int) -> None: ...
        >>> @app.job("thumbnail", threads=True)
        ... def thumbnail(image_id: int) -> None: ...
        >>> [mode_of(job).value for job in (receipt, thumbnail, None)]
        ['async', 'thread', 'inline']
    """
    if job is None:
        return Mode.INLINE
    if job.is_async:
        return Mode.ASYNC
    return Mode.THREAD if job.options.threads else Mode.INLINE


@dataclass(eq=False, kw_only=True)
class Unit:
    """One call that runs: a job's delivery, or a batch handler's call of several items."""

    deliveries: list[Delivery]
    mode: Mode
    #: makes the call (the job's function with its arguments)
    invoke: Callable[[], Any]
    #: the log fields of the call (its lead delivery's)
    fields: dict[str, Any]
    #: a batch handler's call: its items end together (``worker/_batch_handler.py``)
    is_call: bool = False
    context: contextvars.Context | None = field(default=None, repr=False)
    #: a ``threads=True`` unit's future on its job thread
    thread: concurrent.futures.Future[None] | None = field(default=None, repr=False)

    @property
    def lead(self) -> Delivery:
        return self.deliveries[0]


class RunStep:
    """The run step of one batch (see the module docstring); ``run`` once."""

    def __init__(self, consumer: Runner, batch: Batch, firsts: dict[str, Delivery], runners: JobRunners) -> None:
        self.consumer = consumer
        self.batch = batch
        self.firsts = firsts
        self.runners = runners
        self.bound = consumer.settings.concurrency
        #: guards the batch's bookkeeping: jobs end on several threads (never held while a job runs)
        self.lock = threading.RLock()
        self.waiting = [d for d in batch.deliveries if d.state in (State.CLAIMED, State.DECODED)]
        #: deliveries in a unit that started (a batch handler's call takes items further down the list)
        self.taken: set[int] = set()
        self.running: dict[asyncio.Future[None], Unit] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._deadline: TimerHandle | None = None
        #: the deadline margin passed; and a round is choosing what starts (the deadline then waits for its end)
        self._past_deadline = False
        self._in_round = False
        #: a round held a delivery back until what it readied has begun (``Stage.waits_for_start``)
        self._again = False

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        """Run (or conclude without running) every claimed delivery, and conclude the copies that follow them."""
        concurrent = any(d.state is State.CLAIMED and mode_of(d.job) is not Mode.INLINE for d in self.waiting)
        if concurrent and _loop_running_here():
            # Called from async code (an async test): a loop cannot run inside another, so the batch runs on a
            # thread of its own, with this context (the budget, the caller's trace id).
            import contextvars

            here = contextvars.copy_context()
            with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqsjobs-batch") as thread:
                thread.submit(here.run, self._run_here, concurrent).result()
            return
        self._run_here(concurrent)

    def _run_here(self, concurrent: bool) -> None:
        self._arm_deadline()
        try:
            if not concurrent:
                self._drive()
                return
            with self.runners.loop() as self.loop:
                self._drive()
        finally:
            if self._deadline is not None:
                self._deadline.cancel()

    def _drive(self) -> None:
        try:
            while True:
                with self.lock:
                    before = len(self.waiting)
                    self._in_round = True
                    try:
                        started, inline = self._next_round()
                    finally:
                        self._in_round = False
                    if self._past_deadline:
                        self._conclude_unstarted()
                for unit in started:
                    self._dispatch(unit)
                if self._again and self.running and inline is None:
                    self._turn()  # what was readied begins; then the deliveries held for it are readied in turn
                    continue
                if inline is not None:
                    if self.running:
                        self._turn()  # the units just started send their requests before this one holds the thread
                    self._run_inline(inline)
                elif self.running:
                    self._wait_any()
                elif not self.waiting:
                    return
                elif len(self.waiting) == before:
                    raise RuntimeError(f"the run step is stuck with {len(self.waiting)} deliveries waiting")
        except BaseException:
            self._stop()
            raise

    def _next_round(self) -> tuple[list[Unit], Unit | None]:
        """What starts now (the lock is held): units to dispatch, and at most one inline unit to run after them."""
        room = self.bound - len(self.running)
        heads = self._group_heads()
        self._again = False
        started: list[Unit] = []
        inline: Unit | None = None
        kept: list[Delivery] = []
        for d in self.waiting:
            if d.decision is not None or d.index in self.taken:
                continue  # concluded meanwhile (the deadline, a failed check), or in a call that started
            if d.group_id is not None and heads.get(d.group_id, d.index) < d.index:
                kept.append(d)  # an earlier delivery of its FIFO group is not decided yet
            elif d.state is State.DECODED:
                first = self.firsts.get(d.key)
                if first is not None and first is not d and first.decision is None:
                    kept.append(d)  # a later copy of a key: it follows its first copy once that one is decided
                else:
                    self.consumer._follow(self.batch, d, first)
            else:
                mode = mode_of(d.job)
                idle = not self.running and not started and inline is None  # a stage's wait needs a job to end
                if started and self.consumer.stages.waits_for_start(self.batch, d):
                    kept.append(d)  # a rate slot: readied once the job readied before it has begun
                    self._again = True
                    continue
                if room <= 0 or (mode is Mode.INLINE and inline is not None) or (
                        not idle and self.consumer.stages.must_wait(self.batch, d)):
                    kept.append(d)
                    continue
                unit = self._unit(d, mode, heads=heads)
                if unit is None:
                    continue  # concluded without starting
                room -= 1
                if mode is Mode.INLINE:
                    inline = unit
                else:
                    started.append(unit)
        self.waiting = [d for d in kept if d.decision is None and d.index not in self.taken]
        return started, inline

    def _group_heads(self) -> dict[str, int]:
        """Each FIFO group's first delivery that is not decided yet (only it may start)."""
        heads: dict[str, int] = {}
        for d in self.batch.deliveries:
            if d.group_id is not None and d.decision is None and d.group_id not in heads:
                heads[d.group_id] = d.index
        return heads

    def _unit(self, d: Delivery, mode: Mode, *, heads: dict[str, int]) -> Unit | None:
        """The unit ``d`` starts (a batch handler's call gathers its other items), or None if nothing starts."""
        job = d.job
        assert job is not None and d.args is not None
        if job.options.batch is None:
            if not self.consumer.ready(self.batch, d):
                return None
            self.taken.add(d.index)
            args = d.args
            return Unit(deliveries=[d], mode=mode, invoke=lambda: job.fn(**args),
                        fields=d.log_fields)
        candidates = [o for o in self.waiting if o.index >= d.index and o.job is job and o.state is State.CLAIMED
                      and o.decision is None and o.index not in self.taken
                      and (o.group_id is None or heads.get(o.group_id, o.index) >= o.index)]
        items = gather_call(self.consumer, self.batch, candidates,
                            may_join=lambda o: o is d or not self.consumer.stages.must_wait(self.batch, o))
        if not items:
            return None
        self.taken.update(o.index for o in items)
        return Unit(deliveries=items, mode=mode, invoke=invoke_call(job, items), is_call=True,
                    fields={**items[0].log_fields, "batch_items": len(items)})

    # ------------------------------------------------------------------ running
    def _context(self, unit: Unit) -> contextvars.Context:
        """The unit's own context; where the app traces (``worker/_spans.py``), its run's span is current there
        (a batch handler's call: a span per item, the lead's current)."""
        context = self.consumer.calls.context(unit.lead, unit.fields)
        if self.batch.trace is not None:
            for d in reversed(unit.deliveries):
                context.run(self.batch.trace.run_started, d)
        return context

    def _dispatch(self, unit: Unit) -> None:
        assert self.loop is not None
        unit.context = self._context(unit)
        if unit.mode is Mode.ASYNC:
            future: asyncio.Future[None] = self.loop.create_task(self._run_async(unit), context=unit.context)
        else:
            import asyncio

            unit.thread = self.runners.pool.submit(unit.context.run, self._run_sync, unit)
            future = asyncio.wrap_future(unit.thread, loop=self.loop)
        self.running[future] = unit

    def _run_inline(self, unit: Unit) -> None:
        unit.context = self._context(unit)
        unit.context.run(self._run_sync, unit)

    def _run_sync(self, unit: Unit) -> None:
        self._ended(unit, self.consumer.calls.sync(unit.lead, unit.invoke))

    async def _run_async(self, unit: Unit) -> None:
        self._ended(unit, await self.consumer.calls.awaited(unit.lead, unit.invoke))

    def _ended(self, unit: Unit, ran: Ran) -> None:
        """A unit's call returned or raised (in its own context and thread): its deliveries end, at once."""
        with self.lock:
            if self.batch.trace is not None:  # the spans keep the run's end and what it raised
                for d in unit.deliveries:
                    self.batch.trace.run_ended(d, None, ran.error if ran.started else None)
            if unit.is_call:
                end_call(self.consumer, self.batch, unit.deliveries, ran)
                return
            d = unit.lead
            d.duration_ms = ran.duration_ms
            if ran.error is None:
                d.result = ran.result
            elif ran.started:  # else a stage failed before the job was called (logged by it): it did not start
                self.consumer.log.warning("job failed", extra={"error": f"{type(ran.error).__name__}: {ran.error}"})
            self.consumer.stages.after_run(self.batch, d)
            self.consumer.record_ending(self.batch, d, ran.error, ended_at=ran.ended_at)

    def _turn(self) -> None:
        """One turn of the event loop: the tasks just created run up to their first wait."""
        import asyncio

        assert self.loop is not None
        self.loop.run_until_complete(asyncio.sleep(0))

    def _wait_any(self) -> None:
        """Run the loop until a running unit ends; raise what one escaped with (a kill)."""
        import asyncio

        assert self.loop is not None
        done, _ = self.loop.run_until_complete(asyncio.wait(list(self.running),
                                                            return_when=asyncio.FIRST_COMPLETED))
        for future in done:
            self.running.pop(future)
            error = future.exception()
            if error is not None:
                raise error

    def _stop(self) -> None:
        """The batch dies: nothing more starts; async jobs are cancelled, threads waited for."""
        import asyncio

        with self.lock:
            self.waiting = []
        units, self.running = list(self.running.items()), {}
        tasks = [future for future, unit in units if unit.thread is None]
        for task in tasks:
            task.cancel()  # it stops at its next await
        if tasks and self.loop is not None:
            self.loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        wait([unit.thread for _, unit in units if unit.thread is not None])  # a thread cannot be stopped

    # ------------------------------------------------------------------ the deadline
    def _arm_deadline(self) -> None:
        remaining = remaining_seconds(self.batch.context)
        if remaining is not None:
            at = self.consumer.clock() + remaining - self.consumer.settings.deadline_margin
            self._deadline = self.consumer.timer.call_at(at, self._at_deadline)

    def _at_deadline(self) -> None:
        """The deadline margin: what has not started goes back unstarted, and every waiting record is written.

        Called by the timer, on its thread or inside the clock's ``advance`` (a test's ``ManualClock``); when that
        is a round's own check (a limiter's start waiting a moment), the round concludes them once it is over.
        """
        with self.lock:
            self._past_deadline = True
            if not self._in_round:
                self._conclude_unstarted()
        self.batch.writes.hurry()

    def _conclude_unstarted(self) -> None:
        for d in self.waiting:
            if d.state is State.CLAIMED and d.decision is None and d.index not in self.taken:
                self.consumer._unstarted(self.batch, d, Facts(ending=Ending.NO_TIME))
        self.waiting = [d for d in self.waiting if d.decision is None]  # a copy that follows one stays


def _loop_running_here() -> bool:
    """True when this thread is inside a running event loop (never without ``asyncio`` imported)."""
    asyncio = sys.modules.get("asyncio")
    if asyncio is None:
        return False
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True
