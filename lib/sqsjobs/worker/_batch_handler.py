"""Running a batch handler (``@app.job(..., batch=N)``, ``_batch_job.py``): its claimed items, N to a call.

The consumer (``worker/_consumer.py``) claims every record as usual, one key
each. When its run step meets the first claimed item of a batch handler, it
hands over here, and every claimed item of that job in the batch runs:

1. items are taken in the batch's order; each passes the same checks a lone
   job does before it starts (time left, attempts, ``on_crash``, and the
   stages' ``before_run``: a limiter's slot, FIFO order), so limiters count
   items, not calls (a rate limit's token is an item's; under a concurrency
   limit a call holds one item, as the invocation holds one slot); one that
   does not start gives its attempt back;
2. up to N ready items make one call, under the stages' ``wrap_run`` of the
   call's first item (its ``time_limit`` bounds the whole call); on a FIFO
   queue a call holds one item of each message group, so a group's later
   item waits for the next call and sees whether the earlier one went back,
   and an item behind another job's message of its group waits until the
   consumer has run that one;
3. the call's report becomes each item's error (``_batch_job.item_errors``),
   and each item ends through the stages' ``after_run`` and the consumer's
   record write and decision, exactly as if it had run alone.

A call that raises for one item fails only the items it names; a record is
written per item the moment its call returns. This module never decides an
ending itself and must never raise out of a batch.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from sqsjobs._tracing import reset_trace_id, set_trace_id
from sqsjobs.flow._limits import LIMITS
from sqsjobs.worker._delivery import State
from sqsjobs.worker._stages import StageFailed

if TYPE_CHECKING:
    from sqsjobs._batch_job import BatchJob
    from sqsjobs.worker._batch import Batch
    from sqsjobs.worker._consumer import Consumer
    from sqsjobs.worker._delivery import Delivery


def run_batch_handler(consumer: Consumer, batch: Batch, first: Delivery) -> int:
    """Run every claimed item of ``first``'s job in ``batch``, N to a call; the number of calls made."""
    from sqsjobs._batch_job import BatchJob

    job = first.job
    assert isinstance(job, BatchJob) and job.options.batch is not None
    per_call = _items_per_call(job)
    waiting = [d for d in batch.deliveries if d.state is State.CLAIMED and d.job is job
               and not _behind_another_job(batch, d)]
    calls = 0
    while waiting:
        chunk: list[Delivery] = []
        later: list[Delivery] = []
        groups: set[str] = set()
        for d in waiting:
            if len(chunk) == per_call or (d.group_id is not None and d.group_id in groups):
                later.append(d)
            elif consumer.ready(batch, d):  # else it was concluded without starting
                chunk.append(d)
                if d.group_id is not None:
                    groups.add(d.group_id)
        waiting = later
        if not chunk:
            continue
        calls += 1
        errors = _call(consumer, job, chunk)
        for d, error in zip(chunk, errors, strict=True):
            consumer.stages.after_run(batch, d)
            consumer.record_ending(batch, d, error)
    return calls


def _items_per_call(job: BatchJob[..., object]) -> int:
    """The items one call may hold: ``batch=N``, or one under a concurrency limit.

    An invocation holds one slot of a concurrency limiter (``flow/_permits.py``: it runs one job at a time), and a
    slot is one item at once: a call of more items would run more at once than the limit allows.
    """
    from sqsjobs.flow._limits import ConcurrencyLimit

    limiters = job.runtime.registry.limiters
    if any(isinstance(limiters.get(name), ConcurrencyLimit) for name in LIMITS.of(job.options)):
        return 1
    assert job.options.batch is not None
    return job.options.batch


def _behind_another_job(batch: Batch, d: Delivery) -> bool:
    """On a FIFO queue: an earlier message of ``d``'s group, of another job, has not run yet (``d`` waits for the
    consumer to reach it, and runs in a call of its own job then)."""
    return d.group_id is not None and any(
        other.index < d.index and other.group_id == d.group_id and other.state is State.CLAIMED
        and other.job is not d.job for other in batch.deliveries)


def _call(consumer: Consumer, job: BatchJob[..., object], chunk: list[Delivery]) -> list[BaseException | None]:
    """One call of the handler for ``chunk``; each item's error (None: it succeeded)."""
    from sqsjobs._batch_job import item_errors

    lead = chunk[0]
    token = set_trace_id(lead.trace_id or lead.message_id)
    fields = {**consumer._fields(lead), "batch_items": len(chunk)}
    consumer.log.append_keys(**fields)
    started = time.perf_counter()
    errors: list[BaseException | None] = []
    try:
        returned = consumer.stages.wrap_run(lead, lambda: job.call([d.args or {} for d in chunk]))()
        errors = item_errors(len(chunk), returned=returned)
    except StageFailed as stage_failed:  # the handler was never called: no item started
        errors = [stage_failed] * len(chunk)
    except Exception as raised:
        errors = item_errors(len(chunk), raised=raised)
    finally:
        # Each item's share of the call: the Duration metric sums to the time the handler took.
        share = (time.perf_counter() - started) * 1000 / len(chunk)
        for d in chunk:
            d.duration_ms = None if errors and isinstance(errors[0], StageFailed) else share
        consumer.log.remove_keys(list(fields))
        reset_trace_id(token)
    failed = sum(error is not None for error in errors)
    if failed:
        consumer.log.warning("batch handler items failed", extra={"failed": failed, "items": len(chunk)})
    return errors
