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

A stage should never raise: a store or SQS failure it meets is reported (a
follow-up that failed holds its delivery back; a limiter write that failed is
logged, its lease bounding the damage). Should one raise anyway (a bug), the
batch survives it, as dramatiq's broker survives a middleware's: ``Stages``
calls each hook of each stage on its own, logs the failure at CRITICAL with
the stage's name, and ends only the deliveries that stage concerns
(``Stage.concerns``), through the one decision (``worker/_decision.py``):

=================  ===========================================================
the hook           what becomes of the deliveries it concerns
=================  ===========================================================
``before_claim``   those not decided yet go back unclaimed (``stage_failed``)
``claim_data``     that delivery goes back unclaimed (``stage_failed``)
``must_wait``,     holds nothing back; the stage is broken for the batch
``waits_for_start``
``items_per_call`` a call of one item; the stage is broken for the batch
``before_run``     that delivery goes back unstarted, its attempt given back
``wrap_run``       before the job was called: as ``before_run``; once it was
                   called, the job's own outcome stands (logged)
``after_run``,     that delivery's acknowledgement is withheld
``after_decision`` (``followup_failed``: it comes back, a duplicate)
``after_runs``,    the acknowledgements of all it concerns are withheld
``after_records``
=================  ===========================================================

and once a stage failed in a batch, no delivery it concerns starts in that
batch (its ``before_run`` reads ``stage_failed``). After-hooks unwind in
reverse: the last stage's ``after_*`` runs first, as ``wrap_run``'s first
stage wraps outermost. The isolation is a plain ``try`` around each call,
whatever thread or task makes it: with several jobs in flight
(``worker/_run_step.py``) a failure ends only the deliveries of the call it
was made for, and an ``async def`` job's wraps are guarded inside its own
task (``_guarded``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import JobError, RetryableError
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._delivery import State

if TYPE_CHECKING:
    from sqsjobs.worker._batch import Batch
    from sqsjobs.worker._delivery import Delivery


class StageFailed(Exception):  # a signal inside the flow, never raised out of a batch
    """A stage's hook raised: the delivery it was for does not go on (``Stages``)."""

    def __init__(self, stage: str, hook: str, error: BaseException) -> None:
        super().__init__(f"stage {stage} failed in {hook}: {type(error).__name__}: {error}")
        self.stage, self.hook, self.cause = stage, hook, error

    def retryable(self) -> RetryableError:
        """The error its delivery goes back with."""
        return RetryableError(str(self))


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

    @property
    def name(self) -> str:
        """What logs call the stage."""
        return type(self).__name__

    def concerns(self, d: Delivery) -> bool:
        """Whether the stage has business with ``d``: what its failure ends (every delivery, unless it says)."""
        return True

    def before_claim(self, batch: Batch) -> Iterable[tuple[Delivery, Facts]]:
        """Every record is decoded: yields each delivery that must not be claimed, with the facts that keep it
        from it (``Stages`` concludes it as it is yielded, so the stage's later checks see it decided)."""
        return ()

    def claim_data(self, d: Delivery) -> Mapping[str, Any]:
        """Fields ``d``'s claim writes with it, in the same conditional write (a debounced burst's token)."""
        return {}

    def must_wait(self, batch: Batch, d: Delivery) -> bool:
        """True while ``d`` may not start yet because jobs of this batch that run now hold what it needs (a
        limiter's slots the batch took): the run step (``worker/_run_step.py``) starts it once one ends."""
        return False

    def waits_for_start(self, batch: Batch, d: Delivery) -> bool:
        """True while ``d`` may not be readied because another job of the batch was readied and has not begun
        yet (a rate limit's slots: a start must happen before the next one is waited for). The run step starts
        what it readied and comes back at once, without waiting for a job to end."""
        return False

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        """``d`` holds its key and is about to run: the facts that keep it from running, or None."""
        return None

    def items_per_call(self, batch: Batch, d: Delivery, wanted: int) -> int:
        """How many items one call of ``d``'s batch handler may hold (``wanted``: its ``batch=N``), ``d`` first."""
        return wanted

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


class OnDemand(Stage):
    """A feature's stage, imported and built when the first delivery it concerns arrives; until then, nothing.

    ``concerns`` must answer as the built stage's ``concerns`` does, without importing the feature (it reads
    the delivery's job options or envelope), and the stage must do nothing with a batch none of whose
    deliveries it concerns: then a worker whose app never uses the feature neither imports nor builds it
    (its first invocation is billed for neither: BENCHMARKS.md, "First invocation"), and one that does
    gets the same stage as before, from its first concerned batch on.

    Example:
        >>> built = []
        >>> class Counting(Stage):
        ...     def after_runs(self, batch): built.append(len(batch.deliveries))
        >>> stage = OnDemand("Counting", lambda d: d == "mine", lambda: Counting())
        >>> class B: deliveries = ["other"]
        >>> stage.after_runs(B()); built, stage.built
        ([], False)
        >>> B.deliveries = ["other", "mine"]
        >>> stage.after_runs(B()); built, stage.built, stage.name, type(stage.stage).__name__
        ([2], True, 'Counting', 'Counting')
    """

    def __init__(self, name: str, concerns: Callable[[Delivery], bool], build: Callable[[], Stage]) -> None:
        self._name = name
        self._concerns = concerns
        self._build = build
        self._stage: Stage | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self._name

    @property
    def built(self) -> bool:
        """Whether a concerned delivery has arrived (and the stage was built)."""
        return self._stage is not None

    @property
    def stage(self) -> Stage:
        """The feature's stage: built now if no concerned delivery has built it yet."""
        return self._made()

    def _made(self) -> Stage:
        with self._lock:
            if self._stage is None:
                self._stage = self._build()
            return self._stage

    def _for(self, d: Delivery) -> Stage | None:
        return self._stage if self._stage is not None or not self._concerns(d) else self._made()

    def _for_batch(self, batch: Batch) -> Stage | None:
        if self._stage is not None or not any(self._concerns(d) for d in batch.deliveries):
            return self._stage
        return self._made()

    def concerns(self, d: Delivery) -> bool:
        return self._stage.concerns(d) if self._stage is not None else self._concerns(d)

    def before_claim(self, batch: Batch) -> Iterable[tuple[Delivery, Facts]]:
        stage = self._for_batch(batch)
        return stage.before_claim(batch) if stage is not None else ()

    def claim_data(self, d: Delivery) -> Mapping[str, Any]:
        stage = self._for(d)
        return stage.claim_data(d) if stage is not None else {}

    def must_wait(self, batch: Batch, d: Delivery) -> bool:
        stage = self._for(d)
        return stage.must_wait(batch, d) if stage is not None else False

    def waits_for_start(self, batch: Batch, d: Delivery) -> bool:
        stage = self._for(d)
        return stage.waits_for_start(batch, d) if stage is not None else False

    def items_per_call(self, batch: Batch, d: Delivery, wanted: int) -> int:
        stage = self._for(d)
        return stage.items_per_call(batch, d, wanted) if stage is not None else wanted

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        stage = self._for(d)
        return stage.before_run(batch, d) if stage is not None else None

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        stage = self._for(d)
        return stage.wrap_run(d, call) if stage is not None else call

    def after_run(self, batch: Batch, d: Delivery) -> None:
        stage = self._for(d)
        if stage is not None:
            stage.after_run(batch, d)

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        stage = self._for(d)
        if stage is not None:
            stage.after_decision(batch, d)

    def after_runs(self, batch: Batch) -> None:
        stage = self._for_batch(batch)
        if stage is not None:
            stage.after_runs(batch)

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        stage = self._for_batch(batch)
        return stage.after_records(batch) if stage is not None else {}


class Stages(Stage):
    """Several stages, each hook called in order, each call isolated (the module docstring says how).

    Before-hooks run in the stages' order, after-hooks in reverse, and ``wrap_run``'s first stage wraps outermost.

    Example:
        >>> class Broken(Stage):
        ...     def after_run(self, batch, d):
        ...         raise KeyError("a bug")
        >>> class Counting(Stage):
        ...     ran = 0
        ...     def after_run(self, batch, d):
        ...         Counting.ran += 1
        >>> Stages([Counting(), Broken()], log=logging.getLogger("doctest")).after_run(None, None); Counting.ran
        1
    """

    def __init__(self, stages: Sequence[Stage], *, log: Any = None) -> None:
        self.stages = tuple(stages)
        self.log = log if log is not None else logging.getLogger("sqsjobs.stages")

    # ------------------------------------------------------------ isolation
    def _failed(self, batch: Batch | None, stage: Stage, hook: str, error: BaseException,
                d: Delivery | None = None) -> StageFailed:
        failed = StageFailed(stage.name, hook, error)
        self.log.critical(f"stage {stage.name} raised in {hook}: the deliveries it concerns go back",
                          extra={"stage": stage.name, "hook": hook, "error": f"{type(error).__name__}: {error}",
                                 **({"message_id": d.message_id, "key": d.key} if d is not None else {})})
        if batch is not None:
            broken: dict[int, StageFailed] = batch.scratch(self, dict)
            broken.setdefault(id(stage), failed)
        return failed

    def _broken(self, batch: Batch | None, stage: Stage) -> StageFailed | None:
        """The failure that broke ``stage`` in this batch, if one did."""
        return batch.scratch(self, dict).get(id(stage)) if batch is not None else None

    def _concerned(self, stage: Stage, deliveries: Iterable[Delivery]) -> list[Delivery]:
        chosen = []
        for d in deliveries:
            try:
                if stage.concerns(d):
                    chosen.append(d)
            except Exception:  # a stage that cannot even say: everything is its business
                chosen.append(d)
        return chosen

    def _withhold(self, batch: Batch, failed: StageFailed, deliveries: Iterable[Delivery]) -> None:
        """Each delivery's acknowledgement is withheld (``followup_failed`` when it is settled)."""
        for d in deliveries:
            batch.followups_failed.setdefault(d.index, str(failed))

    # ------------------------------------------------------------ the hooks
    def before_claim(self, batch: Batch) -> Iterable[tuple[Delivery, Facts]]:
        """Each stage's ``before_claim``, in order; what one ends is concluded before the next one looks."""
        for stage in self.stages:
            try:
                for d, facts in stage.before_claim(batch) or ():
                    batch.conclude(d, facts)  # at once: the stage's own later checks, and the next stage, see it
            except Exception as error:
                failed = self._failed(batch, stage, "before_claim", error)
                undecided = [d for d in batch.deliveries if d.state is State.DECODED]
                for d in self._concerned(stage, undecided):
                    batch.conclude(d, Facts(ending=Ending.STAGE_FAILED, error=failed.retryable()))
        return ()

    def claim_data(self, d: Delivery) -> Mapping[str, Any]:
        """Every stage's fields for ``d``'s claim; raises ``StageFailed`` when one raised (``d`` is not claimed)."""
        data: dict[str, Any] = {}
        for stage in self.stages:
            try:
                data.update(stage.claim_data(d))
            except Exception as error:
                raise self._failed(None, stage, "claim_data", error, d) from error
        return data

    def must_wait(self, batch: Batch, d: Delivery) -> bool:
        """Whether any stage holds ``d`` back for now; one that raises holds nothing back, and is broken for the
        batch (``d``'s ``before_run`` then reads ``stage_failed``)."""
        for stage in self.stages:
            if self._broken(batch, stage) is not None:
                continue
            try:
                if stage.must_wait(batch, d):
                    return True
            except Exception as error:
                self._failed(batch, stage, "must_wait", error, d)
        return False

    def items_per_call(self, batch: Batch, d: Delivery, wanted: int) -> int:
        """The fewest items any stage allows; a stage that raises allows one (a call of one item is always
        safe), and is broken for the batch."""
        allowed = wanted
        for stage in self.stages:
            if self._broken(batch, stage) is not None:
                continue
            try:
                allowed = min(allowed, stage.items_per_call(batch, d, wanted))
            except Exception as error:
                self._failed(batch, stage, "items_per_call", error, d)
                allowed = 1
        return max(1, allowed)

    def waits_for_start(self, batch: Batch, d: Delivery) -> bool:
        """Whether any stage holds ``d`` back until the jobs already readied have begun (one that raises: none)."""
        for stage in self.stages:
            if self._broken(batch, stage) is not None:
                continue
            try:
                if stage.waits_for_start(batch, d):
                    return True
            except Exception as error:
                self._failed(batch, stage, "waits_for_start", error, d)
        return False

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        for stage in self.stages:
            broken = self._broken(batch, stage)
            if broken is not None and self._concerned(stage, [d]):
                return Facts(ending=Ending.STAGE_FAILED, error=broken.retryable())
            try:
                facts = stage.before_run(batch, d)
            except Exception as error:
                return Facts(ending=Ending.STAGE_FAILED,
                             error=self._failed(batch, stage, "before_run", error, d).retryable())
            if facts is not None:
                return facts
        return None

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        """``call`` inside every stage's wrap; a stage that fails before the job is called raises ``StageFailed``."""
        for stage in reversed(self.stages):
            call = self._guarded(stage, d, call)
        return call

    def _guarded(self, stage: Stage, d: Delivery, inner: Callable[[], Any]) -> Callable[[], Any]:
        """``stage``'s wrap of ``inner``: its failure before ``inner`` is called stops the job; after, the job's
        outcome stands (a ``JobError`` the wrap raises is the job's: a time limit). An ``async def`` job's wraps
        are awaited, each guarded the same way inside the job's own task (``worker/_run_step.py``)."""
        if d.job is not None and d.job.is_async:
            async def guarded_async() -> Any:
                returned: list[Any] = []
                raised: list[BaseException] = []

                async def called() -> Any:
                    try:
                        returned.append(await inner())
                    except BaseException as error:
                        raised.append(error)
                        raise
                    return returned[-1]

                try:
                    return await stage.wrap_run(d, called)()
                except Exception as error:
                    return self._wrap_failed(stage, d, error, returned, raised)

            return guarded_async

        def guarded() -> Any:
            returned: list[Any] = []
            raised: list[BaseException] = []

            def called() -> Any:
                try:
                    returned.append(inner())
                except BaseException as error:
                    raised.append(error)
                    raise
                return returned[-1]

            try:
                return stage.wrap_run(d, called)()
            except Exception as error:
                return self._wrap_failed(stage, d, error, returned, raised)

        return guarded

    def _wrap_failed(self, stage: Stage, d: Delivery, error: Exception, returned: list[Any],
                     raised: list[BaseException]) -> Any:
        """``stage``'s wrap raised ``error``: what the call ends with (raised, or the job's value returned)."""
        if not returned and not raised:
            raise self._failed(None, stage, "wrap_run", error, d) from error
        if isinstance(error, JobError) or (raised and (error is raised[-1] or error.__cause__ is raised[-1])):
            raise error  # the job's outcome, or what the wrap deliberately made of it (a time limit)
        self._failed(None, stage, "wrap_run", error, d)
        if raised:
            raise raised[-1] from None
        return returned[-1]

    def after_run(self, batch: Batch, d: Delivery) -> None:
        for stage in reversed(self.stages):
            try:
                stage.after_run(batch, d)
            except Exception as error:
                if batch is not None:
                    self._withhold(batch, self._failed(batch, stage, "after_run", error, d), [d])
                else:
                    self._failed(None, stage, "after_run", error, d)

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        for stage in reversed(self.stages):
            try:
                stage.after_decision(batch, d)
            except Exception as error:
                self._withhold(batch, self._failed(batch, stage, "after_decision", error, d), [d])

    def after_runs(self, batch: Batch) -> None:
        for stage in reversed(self.stages):
            try:
                stage.after_runs(batch)
            except Exception as error:
                failed = self._failed(batch, stage, "after_runs", error)
                self._withhold(batch, failed, self._concerned(stage, batch.deliveries))

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        failed: dict[int, str] = {}
        for stage in reversed(self.stages):
            try:
                answered = stage.after_records(batch)
            except Exception as error:
                broke = self._failed(batch, stage, "after_records", error)
                answered = {d.index: str(broke) for d in self._concerned(stage, batch.deliveries)}
            for index, why in answered.items():
                failed.setdefault(index, why)
        return failed
