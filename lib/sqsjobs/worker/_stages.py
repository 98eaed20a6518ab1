"""The stage protocol: how a feature plugs into the batch flow without the flow naming it.

The consumer (``worker/_consumer.py``) runs a batch as a fixed sequence of
steps and calls every stage at the same points, as dramatiq's broker calls its
middleware; a stage does nothing at a point it has no business with. A stage
never decides a delivery's fate itself: it reports *facts* (``Facts``) and the
one decision (``worker/_decision.py``) turns them into what happens.

::

    decode ─▶ before_claim ─▶ claim ─▶ for each delivery: (must_wait) before_run ─▶ wrap_run(run) ─▶ after_run
                                                          after_decision (every delivery, in order)
           ─▶ after_runs ─▶ records written, DLQ sends ─▶ after_records ─▶ settle, send back, metrics

The stages sqsjobs plugs in, each in the module of its feature:

- ``worker/_expiry.py`` (``expires_in``: too old to run, acknowledged with its metric);
- ``enqueue/_debounce_stage.py`` (``debounce``: a superseded burst acknowledged; ``dedupe``: the claim frees the key);
- ``flow/_stage.py`` (limiters: tokens and slots taken before the claim, checked at each start);
- ``worker/_fifo.py`` (FIFO order: nothing of a group runs after one of it goes back);
- ``worker/_time_limit.py`` and ``worker/_cancellation.py`` (around the job's call);
- ``workflows/_stage.py`` (groups and chains: counts, callbacks and next steps once the records are written).

A stage must never raise out of a batch: a store or SQS failure it meets is
reported (a follow-up that failed holds its delivery back; a limiter write that
failed is logged, its lease bounding the damage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqsjobs.worker._batch import Batch
    from sqsjobs.worker._decision import Facts
    from sqsjobs.worker._delivery import Delivery


class Stage:
    """A feature's hooks into the batch flow; each does nothing by default.

    Example:
        >>> class Counting(Stage):
        ...     ran = 0
        ...     def after_run(self, batch, d):
        ...         Counting.ran += 1
        >>> Stages([Counting()]).after_run(None, None); Counting.ran
        1
    """

    def before_claim(self, batch: Batch) -> None:
        """Every record is decoded: conclude those that must not be claimed (``batch.conclude``)."""

    def claim_data(self, d: Delivery) -> Mapping[str, Any]:
        """Fields ``d``'s claim writes with it, in the same conditional write (a debounced burst's token)."""
        return {}

    def must_wait(self, batch: Batch, d: Delivery) -> bool:
        """True while ``d`` may not start yet because jobs of this batch that run now hold what it needs (a
        limiter's slots the batch took): the run step (``worker/_run_step.py``) starts it once one ends."""
        return False

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        """``d`` holds its key and is about to run: the facts that keep it from running, or None."""
        return None

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        """The job's call, wrapped (a time limit, a context the job reads).

        For an ``async def`` job (``d.job.is_async``) ``call`` returns an awaitable, and so must the wrapper:
        a stage that acts around the run awaits it inside an ``async def``.
        """
        return call

    def after_run(self, batch: Batch, d: Delivery) -> None:
        """``d``'s job returned or raised."""

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        """``d`` was decided (whether it ran or not), in the batch's order."""

    def after_runs(self, batch: Batch) -> None:
        """Every job of the batch ran: give back what the batch still holds."""

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        """The records and dead letters are written: write what follows them.

        Returns the deliveries (by index) whose follow-up could not be written,
        and why: they go back, and their redelivery writes it.
        """
        return {}


class Stages(Stage):
    """Several stages, called in order (``wrap_run``: the first wraps outermost)."""

    def __init__(self, stages: Sequence[Stage]) -> None:
        self.stages = tuple(stages)

    def before_claim(self, batch: Batch) -> None:
        for stage in self.stages:
            stage.before_claim(batch)

    def claim_data(self, d: Delivery) -> Mapping[str, Any]:
        data: dict[str, Any] = {}
        for stage in self.stages:
            data.update(stage.claim_data(d))
        return data

    def must_wait(self, batch: Batch, d: Delivery) -> bool:
        return any(stage.must_wait(batch, d) for stage in self.stages)

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        for stage in self.stages:
            facts = stage.before_run(batch, d)
            if facts is not None:
                return facts
        return None

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        for stage in reversed(self.stages):
            call = stage.wrap_run(d, call)
        return call

    def after_run(self, batch: Batch, d: Delivery) -> None:
        for stage in self.stages:
            stage.after_run(batch, d)

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        for stage in self.stages:
            stage.after_decision(batch, d)

    def after_runs(self, batch: Batch) -> None:
        for stage in self.stages:
            stage.after_runs(batch)

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        failed: dict[int, str] = {}
        for stage in self.stages:
            for index, why in stage.after_records(batch).items():
                failed.setdefault(index, why)
        return failed
