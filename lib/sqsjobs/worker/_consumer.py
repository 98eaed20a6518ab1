"""The SQS batch consumer: every record decoded, claimed, run, recorded, then acknowledged, returned or dead-lettered.

``Consumer.run`` is the whole flow, top to bottom; it carries decisions out
and decides nothing itself (``worker/_decision.py`` does), and it names no
feature (features plug in as stages, ``worker/_stages.py``):

1. parse the event, and decode every body (its job, arguments, their
   fingerprint and key; ``worker/_event.py``);
2. the stages' ``before_claim`` (too old to run, over a limiter);
3. **claim** every distinct key at once: one ``BatchExecuteStatement`` for the
   first deliveries (``store/_statements.py``), the others beside it
   (``worker/_job_records.py``), which also tells duplicates, cancelled
   keys, keys held by a live run elsewhere, and keys that belong to another
   job or to other arguments, each answer an ``Ending`` already
   (``ClaimResult``); a *finish copy* (a success whose completion a
   previous invocation could not write) writes that completion instead;
4. **run** the claimed jobs (``worker/_run_step.py``): plain functions one
   at a time, async jobs and ``threads=True`` jobs up to ``concurrency`` at
   once, a FIFO group in order; their records are written together once
   they have run, one more call, or within ``flush_after`` of each job's end
   (``worker/_record_writes.py``: the crash window is bounded in time, by a
   timer); a batch handler's items run N to a call (``worker/_batch_handler.py``);
5. **dead-letter** what failed for good (``SendMessageBatch`` to the DLQ,
   ``worker/_send_back.py``), then write those records, so a redelivery of a
   dead-lettered message (a lost acknowledgement) is not run again;
6. the stages' ``after_records`` (a group's count, its callbacks, a chain's
   next step), then each decision is *settled* against what its writes did;
7. **send back** (``worker/_send_back.py``): re-send, schedule, or return
   each with its retry delay;
8. write the batch's metrics (one EMF document a job, with each job's share
   of what the batch made AWS bill: ``worker/_batch_metrics.py``, counted by
   ``_usage.UsageMeter``) and return ``batchItemFailures``.

Each step hands a delivery's fate to ``Batch.conclude`` from one place, as
``Facts`` (``worker/_decision.py``): decoding, the stages' ``before_claim``
(``worker/_stages.py``), the claim (``_claim``), a claimed delivery kept from
its start (``_unstarted``), a run's end (``record_ending``), a later copy of a
key (``_follow``).

Attempts are the runs that *started* (the job's record counts them), not SQS
receives: a record returned without running never burns one. This module must
never raise out of a batch for a record's sake.
"""

from __future__ import annotations

import json
import random as _random
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqsjobs import _otel
from sqsjobs._backoff import BackoffPolicy, RandomSource
from sqsjobs._errors import PermanentError, RetryableError
from sqsjobs._job_options import Classification, OnCrash
from sqsjobs._usage import UsageMeter
from sqsjobs.store._lease import Operation, expiry
from sqsjobs.worker import _job_records as records
from sqsjobs.worker._batch import Batch
from sqsjobs.worker._batch_metrics import BatchUsage, job_name, write_metrics
from sqsjobs.worker._budget import remaining_seconds
from sqsjobs.worker._decision import Action, Aftermath, Ending, Facts, settle
from sqsjobs.worker._delivery import BatchResult, Delivery, Outcome, State
from sqsjobs.worker._event import decode, parse_event
from sqsjobs.worker._job_call import JobCalls
from sqsjobs.worker._job_records import Claim, ClaimResult
from sqsjobs.worker._job_runners import JobRunners
from sqsjobs.worker._record_writes import RecordWrites
from sqsjobs.worker._request import Request
from sqsjobs.worker._run_step import RunStep
from sqsjobs.worker._send_back import SendBack
from sqsjobs.worker._stages import Stage, StageFailed, Stages
from sqsjobs.worker._timer import timer_for

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs._job import Job
    from sqsjobs._settings import Settings
    from sqsjobs.schedules._one_time import OneTimeSchedules
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._timer import Timer

#: a claimed delivery that ends unstarted with these is dead-lettered: the DLQ step writes its record
DEAD_UNSTARTED = frozenset({Ending.PREVIOUS_RUN_DIED, Ending.ATTEMPTS_USED})


class Consumer:
    """Runs one SQS batch through the guard (the runtime builds one per cold start)."""

    def __init__(
        self, *,
        settings: Settings,
        jobs: Mapping[str, Job[Any, Any]],
        store: LeaseStore,
        sqs: Callable[[], SQSClient],
        clock: Callable[[], float],
        random: RandomSource | None,
        logger: Any,
        emit: Callable[[str], None],
        stages: Sequence[Stage] = (),
        schedules: Callable[[], OneTimeSchedules] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        timer: Timer | None = None,
    ) -> None:
        self.settings = settings
        self.jobs = jobs
        self.store = store
        #: what the batch's DynamoDB and SQS requests bill (the store's client now, SQS's once built)
        self.meter = UsageMeter()
        if settings.cost_metrics:
            self.meter.attach(getattr(store, "client", None))
            sqs = self.meter.attaching(sqs)
        self.clock = clock
        self.random = random
        self.log = logger
        self.emit = emit
        self.stages = Stages(stages, log=logger)
        #: where retries too long for SQS wait (None: no schedule group; they wait 12 hours at most)
        self.schedules = schedules
        self.sleep = sleep
        #: the clock's timer: records written within ``flush_after``, the deadline margin (worker/_timer.py)
        self.timer = timer if timer is not None else timer_for(clock)
        #: how the batch's jobs are called, and where those that run at once run (kept for the process)
        self.calls = JobCalls(stages=self.stages, log=logger, clock=clock)
        self.runners = JobRunners(settings.concurrency)
        self.default_backoff = BackoffPolicy(base=settings.backoff_base, cap=settings.backoff_cap)
        #: what the batch sends (dead letters, re-sends, schedules, retry delays): its SQS client is built on
        #: first use, so a batch of successes never needs one
        self.send_back = SendBack(sqs=sqs, store=store, clock=clock, record_ttl=settings.record_ttl,
                                  schedules=schedules, queue_url=settings.queue_url, dlq_url=settings.dlq_url,
                                  max_message_bytes=settings.max_message_bytes, log=logger)

    # ------------------------------------------------------------------ the flow
    def run(self, event: Any, context: Any) -> BatchResult:
        """Process an SQS event; raises only ``InvalidEventError`` (the event is not a batch)."""
        batch = self._start(parse_event(event), context)                 # 1. parse
        try:
            for d in batch.deliveries:
                decode(batch, d, self.jobs)                              # 1. decode
            if self.settings.cost_metrics:
                self.meter.open(_named(batch.deliveries))
            if _otel.api() is None:
                return self._process(batch)
            from sqsjobs.worker._spans import BatchTrace

            batch.trace = BatchTrace.open(batch, self.log, self.settings.queue_url)  # spans, where the app traces
            try:
                return self._process(batch)
            finally:
                if batch.trace is not None:
                    batch.trace.close(batch)
        except BaseException:
            batch.writes.abandon()  # the invocation dies: no timer of it writes anything later
            raise

    def _process(self, batch: Batch) -> BatchResult:
        self.stages.before_claim(batch)                                  # 2. expired, over a limit
        firsts = self._claim(batch)                                      # 3. claim
        RunStep(self, batch, firsts, self.runners).run()                 # 4. run, several at once
        self.stages.after_runs(batch)
        batch.writes.wait()
        refused = self.send_back.dead_letters(batch)                     # 5. the DLQ, then its records
        self._settle(batch, refused)                                     # 6. groups, chains; settle
        self.send_back.run(batch)                                        # 7. re-send, schedule, return
        return self._finish(batch)                                       # 8. metrics, result

    def _start(self, deliveries: list[Delivery], context: Any) -> Batch:
        now = self.clock()
        margin = self.settings.deadline_margin

        def time_left() -> float | None:
            remaining = remaining_seconds(context)
            return None if remaining is None else remaining - margin

        batch = Batch(
            deliveries=deliveries, owner=uuid.uuid4().hex, now=now, context=context,
            lease_until=self._invocation_lease(now, context), max_attempts=self.settings.max_attempts,
            default_backoff=self.default_backoff, random=self.random or _random,
            can_schedule=self.schedules is not None,
            writes=RecordWrites(self.store, sleep=self.sleep, time_left=time_left, random=self.random,
                                clock=self.clock, timer=self.timer, flush_after=self.settings.flush_after),
            concurrency=self.settings.concurrency,
        )
        batch.on_decided = lambda d: self.stages.after_decision(batch, d)
        return batch

    # ------------------------------------------------------------------ 3. claim
    def _claim(self, batch: Batch) -> dict[str, Delivery]:
        """Claim each distinct key once (one round trip); later records of a key follow the first."""
        firsts: dict[str, Delivery] = {}
        asked: list[tuple[Delivery, Claim | None, Operation]] = []
        ended: list[tuple[Delivery, Facts]] = []  # concluded once the claims answered, in this order
        expires_at = expiry(batch.now, self.settings.record_ttl)  # a completion's; a claim's outlasts its lease
        held_until = expiry(batch.now, self.settings.record_ttl, batch.lease_until)
        if batch.lease_until is not None:
            for d in batch.deliveries:
                if d.state is not State.DECODED or d.key in firsts or d.job is None or d.envelope is None:
                    continue
                firsts[d.key] = d
                finish = records.finish_copy(d, now=batch.now, expires_at=expires_at)
                if finish is not None:  # its completion, fenced on the lease of the run that succeeded
                    asked.append((d, None, finish))
                    continue
                mine = self._asked(batch, d, held_until)
                if isinstance(mine, Claim):
                    asked.append((d, mine, mine.operation()))
                else:
                    ended.append((d, mine))
        wave = [op for *_, op in asked] + [op for _, op in batch.claim_wave]
        late: list[tuple[Delivery, Claim]] = []
        for (d, claim, _), answer in zip(asked, self.store.write_batch(wave), strict=False):
            if claim is not None:
                ended.extend(records.answered(d, ClaimResult.of(claim, answer), now=batch.now))
            elif answer.ok:
                d.counts_as = "succeeded"
                ended.append((d, Facts(ending=Ending.DUPLICATE)))
            elif answer.error is not None:  # still a finish copy: it comes back and tries again
                ended.append((d, Facts(ending=Ending.STORE_FAILED, error=RetryableError(
                    f"idempotency store unavailable: {answer.error}"))))
            elif isinstance(again := self._asked(batch, d, held_until), Claim):
                late.append((d, again))  # not that lease any more: an ordinary delivery
            else:
                ended.append((d, again))
        if late:
            for (d, claim), answer in zip(late, self.store.write_batch([c.operation() for _, c in late]),
                                          strict=True):
                ended.extend(records.answered(d, ClaimResult.of(claim, answer), now=batch.now))
        for d, facts in ended:
            batch.conclude(d, facts)
        return firsts

    def _asked(self, batch: Batch, d: Delivery, expires_at: float) -> Claim | Facts:
        """``d``'s claim, or why it is not claimed (a stage failed to give its part: ``d`` goes back unclaimed)."""
        try:
            return self._claim_of(batch, d, expires_at)
        except StageFailed as failed:
            return Facts(ending=Ending.STAGE_FAILED, error=failed.retryable())

    def _claim_of(self, batch: Batch, d: Delivery, expires_at: float) -> Claim:
        assert d.job is not None and d.envelope is not None and batch.lease_until is not None
        return Claim(
            key=d.key, job=d.job.name, owner=batch.owner, now=batch.now, lease_until=batch.lease_until,
            expires_at=expires_at, fingerprint=d.fingerprint, fp_version=d.job.options.version,
            message_id=records.letter_of(d) or d.message_id, enqueued_at=d.envelope.enqueued_at,
            extra=self.stages.claim_data(d), fresh=records.may_be_new(d), request=Request.of(d))

    # ------------------------------------------------------------------ 4. run (worker/_run_step.py)
    def ready(self, batch: Batch, d: Delivery) -> bool:
        """True when claimed ``d`` may start now; else it is concluded without starting (its attempt given back)."""
        kept = self._kept_from_start(batch, d)
        if kept is not None:
            self._unstarted(batch, d, kept)
        return kept is None

    def _kept_from_start(self, batch: Batch, d: Delivery) -> Facts | None:
        """What keeps claimed ``d`` from starting now: no time left, its previous run died (``on_crash``), its
        attempts used up, or a stage's ``before_run`` (FIFO order, a limiter at its start); None: it may start."""
        assert d.job is not None and d.args is not None
        if not self._time_left(batch.context):
            return Facts(ending=Ending.NO_TIME)
        last_error = d.previous.get("last_error") if d.previous is not None else None
        if d.took_over and d.job.options.on_crash is OnCrash.DEAD_LETTER:
            return Facts(ending=Ending.PREVIOUS_RUN_DIED, error=PermanentError(
                f"the previous run of {d.key!r} died mid-way (on_crash='dead_letter'); last error: {last_error}"))
        limit = batch.job_attempts(d)
        if d.attempt > limit:
            what = "never reported (a timeout, a crash or running out of memory)" if d.took_over else "failed"
            return Facts(ending=Ending.ATTEMPTS_USED, error=RetryableError(
                f"attempt {d.attempt - 1} of {limit} {what}; last error: {last_error}"))
        return self.stages.before_run(batch, d)

    def record_ending(self, batch: Batch, d: Delivery, error: BaseException | None,
                      ended_at: float | None = None) -> None:
        """``d``'s job returned (``error`` None) or raised at ``ended_at``: decide it and submit its record, whose
        wait for the write counts from then (``worker/_record_writes.py``)."""
        assert d.job is not None
        if isinstance(error, StageFailed):  # a stage failed before the job was called: it did not start
            self._unstarted(batch, d, Facts(ending=Ending.STAGE_FAILED, error=error.retryable()))
            return
        now = self.clock() if ended_at is None else ended_at
        expires_at = expiry(now, self.settings.record_ttl)
        facts, stored = self._ran(d, error)
        decision = batch.conclude(d, facts)
        if facts.ending is Ending.SUCCEEDED:
            batch.writes.submit(d, records.succeeded(d.key, batch.owner, now=now, expires_at=expires_at,
                                                     result=stored, request=Request.of(d)), at=now)
        elif error is not None and decision.action is not Action.DEAD_LETTER:
            batch.writes.submit(d, records.retrying(d.key, batch.owner, now=now, expires_at=expires_at,
                                                    error=error), at=now)

    def _ran(self, d: Delivery, error: BaseException | None) -> tuple[Facts, str | None]:
        """How ``d``'s run ended, and its result as JSON for its record (``store_result``)."""
        assert d.job is not None
        options = d.job.options
        if error is not None:
            requested = error.delay if isinstance(error, RetryableError) else None
            return Facts(ending=Ending.FAILED, error=error, requested_delay=requested,
                         permanent=options.classify(error) is Classification.PERMANENT), None
        if not options.store_result:
            return Facts(ending=Ending.SUCCEEDED), None
        try:
            text = json.dumps(d.result, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as unjson:
            return Facts(ending=Ending.RESULT_NOT_JSON, error=PermanentError(
                f"job {d.job_name!r} returned a value that is not JSON ({unjson}); store_result=True needs one")), None
        if len(text.encode()) > records.MAX_RESULT_BYTES:
            return Facts(ending=Ending.RESULT_TOO_LARGE, error=PermanentError(
                f"job {d.job_name!r} returned {len(text.encode())} bytes of JSON; store_result keeps at most "
                f"{records.MAX_RESULT_BYTES}: return an ID and store the rest where it belongs")), None
        return Facts(ending=Ending.SUCCEEDED), text

    def _unstarted(self, batch: Batch, d: Delivery, facts: Facts) -> None:
        """A claimed delivery that does not start: its record gives the attempt back (one dead-lettered unstarted
        has its record written by the DLQ step)."""
        if facts.ending not in DEAD_UNSTARTED:
            now = self.clock()
            batch.writes.submit(d, records.not_started(d.key, batch.owner, now=now, previous=d.previous,
                                                       expires_at=expiry(now, self.settings.record_ttl)))
        batch.conclude(d, facts)

    def _follow(self, batch: Batch, d: Delivery, first: Delivery | None) -> None:
        """A record that was not claimed: a copy of the first request of its key follows it, else it did not start.

        Only the *same request* follows (``worker/_request.py``): another request of a debounced key (another
        burst token, a member's own arguments) goes back unstarted and is claimed on its own, after the first.
        """
        batch.conclude(d, self._following(batch, d, first))

    def _following(self, batch: Batch, d: Delivery, first: Delivery | None) -> Facts:
        if first is None or first is d or first.decision is None:
            return Facts(ending=Ending.NO_TIME)  # too close to the deadline to claim anything
        request, firsts = Request.of(d), Request.of(first)
        if request != firsts and not (request is not None and firsts is not None and request.coalesces
                                      and request.job == firsts.job):
            return Facts(ending=Ending.KEY_CONFLICT, error=PermanentError(
                f"key {d.key!r} came twice in one batch for different calls ({first.job_name}, {d.job_name}): "
                "give each job call its own key"))
        if request != firsts:
            return Facts(ending=Ending.ANOTHER_REQUEST)
        if batch.facts[first.index].ending is Ending.ALREADY_DEAD_LETTERED and d.message_id != first.message_id:
            # The first was a dead letter delivered again: that ending is of its message, not of this new
            # request, which goes back unstarted and is claimed on its own next time (found by tests/model).
            return Facts(ending=Ending.ANOTHER_REQUEST)
        d.counts_as = first.counts_as
        return Facts(ending=Ending.FOLLOWS, first=first.decision)

    # ------------------------------------------------------------------ 6. settle
    def _settle(self, batch: Batch, refused: Mapping[int, str]) -> None:
        """Each decision against what carrying it out did: the one place a decision is settled."""
        for d, after in self._aftermaths(batch, refused):
            assert d.decision is not None
            d.settled(settle(d.decision, after, batch.facts[d.index], self.random))

    def _aftermaths(self, batch: Batch, refused: Mapping[int, str]) -> Iterator[tuple[Delivery, Aftermath]]:
        """What carrying each decision out did, in the order it must be settled: the letters the DLQ refused
        first (they go back: the stages' ``after_records`` must not count them dead-lettered), then, once the
        stages wrote their follow-ups (a group's count, a chain's next step), every delivery that leaves."""
        for d in batch.deliveries:
            if d.index in refused:
                yield d, Aftermath(dead_letter_refused=refused[d.index])
        followups = self.stages.after_records(batch)
        for d in batch.deliveries:
            if d.action is None or d.action is Action.RETURN:
                continue
            yield d, Aftermath(record_failed=batch.writes.failure(d) if d.outcome is Outcome.SUCCEEDED else None,
                               followup_failed=followups.get(d.index) or batch.followups_failed.get(d.index))

    # ------------------------------------------------------------------ 8. metrics, result
    def _finish(self, batch: Batch) -> BatchResult:
        usage = BatchUsage(elapsed_ms=(self.clock() - batch.now) * 1000, memory_mb=memory_mb(batch.context),
                           metered=self.meter.close()) if self.settings.cost_metrics else None
        write_metrics(batch.deliveries, namespace=self.settings.namespace, service=self.settings.service,
                      emit=self.emit, usage=usage, clock=self.clock)
        writes = batch.writes
        for fence in writes.lost:
            self.log.warning("fence lost: the lease ran out and another invocation took the key over",
                             extra=fence.log_fields)
        for failed, error in writes.failed:
            self.log.error("could not write the job's record, even after retries", extra={**failed.log_fields,
                                                                                        "error": error})
        unrecorded = tuple(d.key for d, _ in writes.failed if d.outcome is Outcome.SUCCEEDED)
        failures = tuple(d.message_id for d in batch.deliveries if d.state is State.RETURNED)
        return BatchResult(deliveries=tuple(batch.deliveries), failures=failures, fence_lost=len(writes.lost),
                           store_errors=len(writes.failed), unrecorded=unrecorded)

    # ------------------------------------------------------------------ helpers
    def _time_left(self, context: Any) -> bool:
        remaining = remaining_seconds(context)
        return remaining is None or remaining >= self.settings.deadline_margin

    def _invocation_lease(self, now: float, context: Any) -> float | None:
        """Until when this invocation's leases last (records, slots); None when it is too late to start any."""
        remaining = remaining_seconds(context)
        if remaining is not None and remaining < self.settings.deadline_margin:
            return None
        default = self.settings.function_timeout or 900.0
        return now + (remaining if remaining is not None else default) + self.settings.lease_margin

def memory_mb(context: Any) -> int | None:
    """The function's memory: the Lambda context's, else the runtime's environment; None off Lambda.

    Example:
        >>> from sqsjobs.testing import FakeContext
        >>> memory_mb(FakeContext(memory_limit_in_mb=128)), memory_mb(None) is None or memory_mb(None) > 0
        (128, True)
    """
    import os

    value = getattr(context, "memory_limit_in_mb", None) or os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
    try:
        return int(value) if value else None
    except (TypeError, ValueError):
        return None


def _named(deliveries: Sequence[Delivery]) -> dict[str, str]:
    """What a request may name of each delivery (its key, body, receipt handle, message id) → its job
    (``_usage.UsageMeter``)."""
    named: dict[str, str] = {}
    for d in deliveries:
        job = job_name(d)
        named[d.receipt_handle] = job
        named[d.message_id] = job
        if d.body:
            named[d.body] = job
        if d.key:
            named[d.key] = job
    return named
