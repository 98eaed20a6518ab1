"""Running a batch handler (``@app.job(..., batch=N)``, ``_batch_job.py``): its claimed items, N to a call.

The consumer (``worker/_consumer.py``) claims every record as usual, one key
each. When the run step (``worker/_run_step.py``) may start the first waiting
item of a batch handler, it asks here for the call that item starts
(``gather_call``), and the call runs like any job: inline, on a thread
(``threads=True``) or awaited (an ``async def`` handler), several calls at
once where the handler may:

1. items are taken in the batch's order; each passes the same checks a lone
   job does before it starts (time left, attempts, ``on_crash``, and the
   stages' ``before_run``: a limiter's slot, FIFO order), so limiters count
   items, not calls (under a rate limit a call holds one item, started at its
   own slot; under a concurrency limit a call holds one item, a slot holding
   one job at once); one that
   does not start gives its attempt back;
2. up to N ready items make one call, under the stages' ``wrap_run`` of the
   call's first item (its ``time_limit`` bounds the whole call); on a FIFO
   queue a call holds one item of each message group, and only a group's
   first undecided delivery may join, so a group's later item waits for the
   next call and sees whether the earlier one went back;
3. the call's report becomes each item's error (``_batch_job.item_errors``),
   and each item ends through the stages' ``after_run`` and the consumer's
   record write and decision, exactly as if it had run alone (``end_call``);
   a stage that failed before the handler was called (``StageFailed``,
   ``worker/_stages.py``) means no item started: each goes back unstarted,
   with no duration.

A call that raises for one item fails only the items it names; a record is
written per item the moment its call returns. This module never decides an
ending itself and must never raise out of a batch.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from sqsjobs.worker._stages import StageFailed

if TYPE_CHECKING:
    from sqsjobs._job import Job
    from sqsjobs.worker._batch import Batch
    from sqsjobs.worker._delivery import Delivery
    from sqsjobs.worker._job_call import Ran
    from sqsjobs.worker._stages import Stages


class ItemRunner(Protocol):
    """What running a batch handler's items needs of the consumer (``worker/_consumer.py`` is the one)."""

    stages: Stages
    log: Any

    def ready(self, batch: Batch, d: Delivery) -> bool: ...

    def record_ending(self, batch: Batch, d: Delivery, error: BaseException | None,
                      ended_at: float | None = None) -> None: ...


def gather_call(consumer: ItemRunner, batch: Batch, candidates: Sequence[Delivery],
                may_join: Callable[[Delivery], bool]) -> list[Delivery]:
    """The items that start one call now: ``candidates`` (claimed items of one job, in order) that pass their
    checks, up to the job's ``batch=N``, one of each FIFO group; those that fail a check are concluded."""
    from sqsjobs._batch_job import BatchJob

    if not candidates:
        return []
    job = candidates[0].job
    assert isinstance(job, BatchJob) and job.options.batch is not None
    per_call = consumer.stages.items_per_call(batch, candidates[0], job.options.batch)
    chunk: list[Delivery] = []
    groups: set[str] = set()
    for d in candidates:
        if len(chunk) == per_call:
            break
        if (d.group_id is not None and d.group_id in groups) or not may_join(d):
            continue
        if consumer.ready(batch, d):  # else it was concluded without starting
            chunk.append(d)
            if d.group_id is not None:
                groups.add(d.group_id)
    return chunk


def invoke_call(job: Job[Any, Any], chunk: Sequence[Delivery]) -> Callable[[], Any]:
    """What calls the handler for ``chunk`` (each item's arguments, in order)."""
    from sqsjobs._batch_job import BatchJob

    assert isinstance(job, BatchJob)
    items = [d.args or {} for d in chunk]
    return lambda: job.call(items)


def end_call(consumer: ItemRunner, batch: Batch, chunk: Sequence[Delivery], ran: Ran) -> None:
    """The call for ``chunk`` returned or raised: each item ends as if it had run alone."""
    from sqsjobs._batch_job import item_errors

    if isinstance(ran.error, StageFailed):  # the handler was never called: no item started
        for d in chunk:
            d.duration_ms = None
            consumer.stages.after_run(batch, d)
            consumer.record_ending(batch, d, ran.error, ended_at=ran.ended_at)
        return
    errors = item_errors(len(chunk), raised=ran.error) if ran.error is not None else \
        item_errors(len(chunk), returned=ran.result)
    # each item's share: the Duration metric sums to the call's time
    share = ran.duration_ms / len(chunk) if ran.duration_ms is not None else None
    failed = sum(error is not None for error in errors)
    if failed:
        consumer.log.warning("batch handler items failed", extra={"failed": failed, "items": len(chunk)})
    for d, error in zip(chunk, errors, strict=True):
        d.duration_ms = share
        consumer.stages.after_run(batch, d)
        consumer.record_ending(batch, d, error, ended_at=ran.ended_at)
