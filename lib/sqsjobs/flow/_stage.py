"""Limiters as a stage (``worker/_stages.py``): slots taken before the claims, waited for at each start.

``flow/_permits.py`` is how; this is when. Before the claims the batch's
limited jobs reserve their rate slots and take their concurrency slots (none
for a batch without limited jobs), and those that must wait are concluded
``deferred`` (a copy carrying its rate slots comes back just before them; no
attempt used, their record untouched). A concurrency limiter's slots are
taken for as many of the batch's jobs as may run at once (async and
``threads=True`` ones, within ``concurrency``); a limited job waits in the
batch while all of them run its other jobs (``must_wait``). Just before each
limited job starts it waits for its rate slots (else it is deferred then, its
claim given back); once it is decided the slots no remaining job of the batch
can use are released; at the end of the batch whatever is still held goes
back.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from sqsjobs.flow._limiter_memory import LimiterMemory
from sqsjobs.flow._limits import LIMITS, Limiter
from sqsjobs.flow._permits import Permits
from sqsjobs.store._lease import LeaseStore
from sqsjobs.worker._batch import Batch
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._delivery import Delivery
from sqsjobs.worker._stages import Stage


class LimitsStage(Stage):
    """The app's limiters, plugged into the batch flow."""

    def __init__(self, *, store: LeaseStore, limiters: Mapping[str, Limiter], clock: Callable[[], float],
                 sleep: Callable[[float], None], logger: Any) -> None:
        self.store = store
        self.limiters = limiters
        self.clock = clock
        self.sleep = sleep
        self.log = logger
        #: what this container learned of its limiters between batches (flow/_limiter_memory.py)
        self.memory = LimiterMemory()

    def _permits(self, batch: Batch) -> Permits:
        permits: Permits = batch.scratch(self, lambda: Permits(
            store=self.store, limiters=self.limiters, owner=batch.owner, memory=self.memory,
            random=batch.random or _random, clock=self.clock, sleep=self.sleep,
            fifo=lambda d: d.group_id is not None))
        return permits

    def concerns(self, d: Delivery) -> bool:
        return d.job is not None and bool(LIMITS.of(d.job.options))

    def before_claim(self, batch: Batch) -> Iterator[tuple[Delivery, Facts]]:
        if not self.limiters:
            return
        for d, refusal in self._permits(batch).take(batch.deliveries, now=batch.now, lease_until=batch.lease_until,
                                                    concurrency=batch.concurrency):
            yield d, Facts(ending=Ending.DEFERRED, wait=refusal.delay, limiter=refusal.limiter,
                           reservation=refusal.reservation)

    def must_wait(self, batch: Batch, d: Delivery) -> bool:
        return bool(self.limiters) and self._permits(batch).must_wait(d)

    def waits_for_start(self, batch: Batch, d: Delivery) -> bool:
        # A job readied for its rate slot must begin before the next one waits for its own: else jobs that run
        # together (async, threads) would all begin at the last slot waited for.
        return bool(self.limiters) and self._permits(batch).has_slots(d)

    def items_per_call(self, batch: Batch, d: Delivery, wanted: int) -> int:
        """One item a call under any limiter: a concurrency limiter's slot (``flow/_permits.py``) holds one running
        job, so a call of more items would run more at once than the batch's slots allow; a rate limiter's start
        slots are apart (``flow/_schedule.py``), so an item starts at its own slot, alone."""
        return 1 if d.job is not None and LIMITS.of(d.job.options) else wanted

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        if not self.limiters or d.job is None or not LIMITS.of(d.job.options):
            return None
        refusal = self._permits(batch).start(d, now=self.clock())
        if refusal is None:
            return None
        # It came too late for its slot (or its slot is not here yet): it takes a new one when it comes back.
        return Facts(ending=Ending.DEFERRED, wait=refusal.delay, limiter=refusal.limiter)

    def after_run(self, batch: Batch, d: Delivery) -> None:
        if self.limiters:
            self._permits(batch).finished(d)

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        if self.limiters:
            self._permits(batch).settled(d)

    def after_runs(self, batch: Batch) -> None:
        if not self.limiters:
            return
        for error in self._permits(batch).close().errors:
            self.log.error("could not write a limiter's token or slot; its lease bounds the damage",
                           extra={"error": error})
