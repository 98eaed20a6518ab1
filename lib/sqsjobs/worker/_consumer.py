"""The SQS batch consumer: every record decoded, claimed, run, recorded, then acknowledged, returned or dead-lettered.

``Consumer.run`` is the whole flow, top to bottom; it carries decisions out
and decides nothing itself (``worker/_decision.py`` does), and it names no
feature (features plug in as stages, ``worker/_stages.py``):

1. parse the event, and decode every body (its job, arguments and key);
2. the stages' ``before_claim`` (too old to run, over a limiter);
3. **claim** every distinct key at once: one ``BatchExecuteStatement`` for the
   first deliveries (``store/_statements.py``), the others beside it
   (``worker/_job_records.py``), which also tells duplicates, cancelled
   keys, keys held by a live run elsewhere, and keys that belong to another
   job or to other arguments; a *finish copy* (a success whose completion a
   previous invocation could not write) writes that completion instead;
4. **run** the claimed jobs in order; their records are written together
   once they have run, one more call, or sooner when jobs take long
   (``worker/_record_writes.py``: the crash window is bounded in time);
   a batch handler's items run N to a call (``worker/_batch_handler.py``);
5. **dead-letter** what failed for good (``SendMessageBatch`` to the DLQ),
   then write those records, so a redelivery of a dead-lettered message (a
   lost acknowledgement) is not run again;
6. the stages' ``after_records`` (a group's count, its callbacks, a chain's
   next step), then each decision is *settled* against what its writes did;
7. **send back**: re-send what must not return at its backstop receive,
   schedule the retries SQS cannot hold back that long, set the others' retry
   delays (``ChangeMessageVisibilityBatch``, full jitter);
8. write the batch's metrics (one EMF document a job) and return
   ``batchItemFailures``.

Attempts are the runs that *started* (the job's record counts them), not SQS
receives: a record returned without running never burns one. This module must
never raise out of a batch for a record's sake.
"""

from __future__ import annotations

import functools
import hashlib
import json
import random as _random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sqsjobs import _metrics as m
from sqsjobs._backoff import BackoffPolicy, RandomSource, visibility_seconds
from sqsjobs._errors import (
    ConfigurationError,
    InvalidArgumentsError,
    InvalidEventError,
    MalformedMessageError,
    PermanentError,
    RetryableError,
    ScheduleError,
    UnknownJobError,
)
from sqsjobs._job_options import Classification, OnCrash
from sqsjobs._tracing import reset_trace_id, set_trace_id
from sqsjobs.enqueue._batching import Sent, batches, send_entries
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.enqueue._message import ATTR_FINISH, ATTR_JOB, ATTR_RESENDS, ATTR_RESULT, ATTR_TRACE_ID, MAX_DELAY_SECONDS
from sqsjobs.store._lease import Operation, Written, expiry
from sqsjobs.worker import _job_records as records
from sqsjobs.worker._batch import Batch, resends
from sqsjobs.worker._budget import remaining_seconds
from sqsjobs.worker._dead_letters import NAMESPACE, DeadLetter, carry_redrive_counts, evidence_of, sqs_attribute
from sqsjobs.worker._decision import Action, Aftermath, Ending, settle
from sqsjobs.worker._delivery import BatchResult, Delivery, Outcome, State
from sqsjobs.worker._job_records import Claim, ClaimResult, Verdict
from sqsjobs.worker._record_writes import RecordWrites
from sqsjobs.worker._stages import Stage, Stages

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs._job import Job
    from sqsjobs._settings import Settings
    from sqsjobs.schedules._one_time import OneTimeSchedules
    from sqsjobs.store._lease import LeaseStore

#: the counter each final outcome adds one to (re-sent records count as what they were: a retry still comes back)
OUTCOME_METRICS = {
    Outcome.SUCCEEDED: m.SUCCEEDED,
    Outcome.DUPLICATE: m.DUPLICATE,
    Outcome.RETRY: m.RETRIED,
    Outcome.DEAD_LETTERED: m.DEAD_LETTERED,
    Outcome.CANCELLED: m.CANCELLED,
    Outcome.EXPIRED: m.EXPIRED,
    Outcome.SUPERSEDED: m.SUPERSEDED,
    Outcome.DEFERRED: m.DEFERRED,
}
#: outcomes of deliveries acknowledged without running: counted only once they are
UNRUN_ACKS = frozenset({Outcome.DUPLICATE, Outcome.CANCELLED, Outcome.EXPIRED, Outcome.SUPERSEDED})
#: a claim's verdict → how the delivery ends without running
VERDICT_ENDINGS = {
    Verdict.DUPLICATE: Ending.DUPLICATE,
    Verdict.ALREADY_DEAD_LETTERED: Ending.ALREADY_DEAD_LETTERED,
    Verdict.CANCELLED: Ending.CANCELLED,
    Verdict.CONFLICT: Ending.KEY_CONFLICT,
    Verdict.BUSY: Ending.BUSY,
    Verdict.ERROR: Ending.STORE_FAILED,
}
#: what a group counts a delivery that was not run as, by the outcome of the record it found
RECORD_COUNTS = {"succeeded": "succeeded", "cancelled": "cancelled", "dead_lettered": "dead_lettered"}


class Consumer:
    """Runs one SQS batch through the guard (the runtime builds one per cold start)."""

    def __init__(
        self,
        *,
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
    ) -> None:
        self.settings = settings
        self.jobs = jobs
        self.store = store
        #: the SQS client, built on first use: a batch of successes never needs one
        self._sqs = sqs
        self.clock = clock
        self.random = random
        self.log = logger
        self.emit = emit
        self.stages = Stages(stages)
        #: where retries too long for SQS wait (None: no schedule group; they wait 12 hours at most)
        self.schedules = schedules
        self.sleep = sleep
        self.default_backoff = BackoffPolicy(base=settings.backoff_base, cap=settings.backoff_cap)
        self._queue_urls: dict[str, str] = {}

    @property
    def sqs(self) -> SQSClient:
        """The SQS client (dead letters, re-sends, retry delays)."""
        return self._sqs()

    # ------------------------------------------------------------------ the flow
    def run(self, event: Any, context: Any) -> BatchResult:
        """Process an SQS event; raises only ``InvalidEventError`` (the event is not a batch)."""
        batch = self._start(parse_event(event), context)                 # 1. parse
        for d in batch.deliveries:
            self._decode(batch, d)                                       # 1. decode
        self.stages.before_claim(batch)                                  # 2. expired, over a limit
        firsts = self._claim(batch)                                      # 3. claim
        for d in batch.deliveries:                                       # 4. run, in order
            if d.state is State.CLAIMED:
                self._run(batch, d)
            elif d.state is State.DECODED:
                self._follow(batch, d, firsts.get(d.key))
        self.stages.after_runs(batch)
        batch.writes.wait()
        self._dead_letter(batch)                                         # 5. the DLQ, then its records
        followups = self.stages.after_records(batch)                     # 6. groups, chains
        self._settle(batch, followups)
        self._send_back(batch)                                           # 7. re-send, schedule, return
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
                                clock=self.clock),
        )
        batch.on_decided = lambda d: self.stages.after_decision(batch, d)
        return batch

    # ------------------------------------------------------------------ 1. decode
    def _decode(self, batch: Batch, d: Delivery) -> None:
        try:
            envelope = d.envelope = Envelope.decode(d.body)  # kept even if what follows fails: it names the job
            job = self.jobs.get(envelope.job)
            if job is None:
                raise UnknownJobError(f"no job named {envelope.job!r} is registered in this worker")
            args = job.signature.bind(job.upcast(envelope.job_version, envelope.args))
            key = envelope.key or job.key_for(args)
        except MalformedMessageError as error:
            batch.conclude(d, Ending.MALFORMED, error=error)
            return
        except (UnknownJobError, InvalidArgumentsError) as error:
            batch.conclude(d, Ending.MALFORMED, error=MalformedMessageError(f"{type(error).__name__}: {error}"))
            return
        except RetryableError as error:
            # A newer job_version than this deploy knows: back after the backoff, no attempt used, until new
            # code takes it.
            batch.conclude(d, Ending.TOO_NEW, error=error)
            return
        except Exception as error:  # an upcaster that raised is user code failing on this body
            batch.conclude(d, Ending.MALFORMED,
                           error=MalformedMessageError(f"{type(error).__name__} while decoding: {error}"))
            return
        d.decoded(envelope=envelope, job=job, args=args, key=key)

    # ------------------------------------------------------------------ 3. claim
    def _claim(self, batch: Batch) -> dict[str, Delivery]:
        """Claim each distinct key once (one round trip); later records of a key follow the first."""
        firsts: dict[str, Delivery] = {}
        claims: list[tuple[Delivery, Claim | None, Operation]] = []
        if batch.lease_until is not None:
            for d in batch.deliveries:
                if d.state is not State.DECODED or d.key in firsts or d.job is None or d.envelope is None:
                    continue
                firsts[d.key] = d
                token = finish_token(d)
                if token is None:
                    asked = self._claim_of(batch, d)
                    claims.append((d, asked, asked.operation()))
                else:
                    claims.append((d, None, records.succeeded(
                        d.key, token, now=batch.now, expires_at=expiry(batch.now, self.settings.record_ttl),
                        result=finish_result(d))))
        wave = [op for *_, op in claims] + [op for _, op in batch.claim_wave]
        written = self.store.write_batch(wave)
        late: list[tuple[Delivery, Claim]] = []
        for (d, claim, _), answer in zip(claims, written, strict=False):
            if claim is None:  # a finish copy: its completion, fenced on the lease of the run that succeeded
                if answer.ok:
                    d.counts_as = "succeeded"
                    batch.conclude(d, Ending.DUPLICATE)
                elif answer.error is not None:  # still a finish copy: it comes back and tries again
                    batch.conclude(d, Ending.STORE_FAILED, error=RetryableError(
                        f"idempotency store unavailable: {answer.error}"))
                else:
                    late.append((d, self._claim_of(batch, d)))  # not that lease any more: an ordinary delivery
                continue
            self._on_claim(batch, d, ClaimResult.of(claim, answer))
        if late:
            for (d, claim), answer in zip(late, self.store.write_batch([c.operation() for _, c in late]),
                                          strict=True):
                self._on_claim(batch, d, ClaimResult.of(claim, answer))
        return firsts

    def _claim_of(self, batch: Batch, d: Delivery) -> Claim:
        assert d.job is not None and d.envelope is not None and batch.lease_until is not None
        return Claim(
            key=d.key, job=d.job.name, owner=batch.owner, now=batch.now, lease_until=batch.lease_until,
            expires_at=expiry(batch.now, self.settings.record_ttl, batch.lease_until),
            fingerprint=d.job.fingerprint(d.args or {}), fp_version=d.job.options.version,
            message_id=d.message_id, enqueued_at=d.envelope.enqueued_at, extra=self.stages.claim_data(d),
            fresh=d.receive_count == 1,
        )

    def _on_claim(self, batch: Batch, d: Delivery, claim: ClaimResult) -> None:
        if claim.verdict is Verdict.CLAIMED:
            d.claimed(attempt=claim.attempt, took_over=claim.took_over, previous=claim.previous)
            return
        ending = VERDICT_ENDINGS[claim.verdict]
        if ending in (Ending.DUPLICATE, Ending.ALREADY_DEAD_LETTERED, Ending.CANCELLED) and claim.previous:
            d.counts_as = RECORD_COUNTS.get(str(claim.previous.get("outcome")), "succeeded")
        if ending is Ending.ALREADY_DEAD_LETTERED:
            d.notes.append("this message is already in the DLQ (its acknowledgement was lost)")
        if ending is Ending.KEY_CONFLICT:
            assert d.job is not None
            text = records.conflict_text(d.key, d.job.name, claim.previous, d.job.fingerprint(d.args or {}))
            batch.conclude(d, ending, error=PermanentError(text))
        elif ending is Ending.BUSY:
            batch.conclude(d, ending, wait=(claim.lease_until or batch.now) - batch.now)
        elif ending is Ending.STORE_FAILED:
            batch.conclude(d, ending, error=RetryableError(f"idempotency store unavailable: {claim.error}"))
        else:
            batch.conclude(d, ending)

    # ------------------------------------------------------------------ 4. run
    def _run(self, batch: Batch, d: Delivery) -> None:
        if d.job is not None and d.job.options.batch is not None:
            from sqsjobs.worker._batch_handler import run_batch_handler

            run_batch_handler(self, batch, d)  # this and every other claimed item of its job, N to a call
            return
        if not self.ready(batch, d):
            return
        error = self._execute(d)
        self.stages.after_run(batch, d)
        self.record_ending(batch, d, error)

    def ready(self, batch: Batch, d: Delivery) -> bool:
        """True when claimed ``d`` may start now; else it is concluded without starting (its attempt given back)."""
        assert d.job is not None and d.args is not None
        if not self._time_left(batch.context):
            self._unstarted(batch, d, Ending.NO_TIME)
            return False
        last_error = d.previous.get("last_error") if d.previous is not None else None
        if d.took_over and d.job.options.on_crash is OnCrash.DEAD_LETTER:
            batch.conclude(d, Ending.PREVIOUS_RUN_DIED, error=PermanentError(
                f"the previous run of {d.key!r} died mid-way (on_crash='dead_letter'); last error: {last_error}"))
            return False
        limit = batch.job_attempts(d)
        if d.attempt > limit:
            what = "never reported (a timeout, a crash or running out of memory)" if d.took_over else "failed"
            batch.conclude(d, Ending.ATTEMPTS_USED, error=RetryableError(
                f"attempt {d.attempt - 1} of {limit} {what}; last error: {last_error}"))
            return False
        held_back = self.stages.before_run(batch, d)
        if held_back is not None:  # a stage keeps it from starting (FIFO order, a limiter at its start)
            self._unstarted(batch, d, held_back.ending, wait=held_back.wait, limiter=held_back.limiter)
            return False
        return True

    def record_ending(self, batch: Batch, d: Delivery, error: BaseException | None) -> None:
        """``d``'s job returned (``error`` None) or raised: decide it and start writing its record."""
        assert d.job is not None
        now = self.clock()
        expires_at = expiry(now, self.settings.record_ttl)
        if error is not None:
            options = d.job.options
            requested = error.delay if isinstance(error, RetryableError) else None
            decision = batch.conclude(d, Ending.FAILED, error=error, requested_delay=requested,
                                      permanent=options.classify(error) is Classification.PERMANENT)
            if decision.action is not Action.DEAD_LETTER:
                batch.writes.submit(d, records.retrying(d.key, batch.owner, now=now, expires_at=expires_at,
                                                        error=error))
            return
        stored, unstorable = self._stored_result(d) if d.job.options.store_result else (None, None)
        if unstorable is not None:
            batch.conclude(d, unstorable[0], error=unstorable[1])
            return
        batch.conclude(d, Ending.SUCCEEDED)
        batch.writes.submit(d, records.succeeded(d.key, batch.owner, now=now, expires_at=expires_at, result=stored))

    def _unstarted(self, batch: Batch, d: Delivery, ending: Ending, **known: Any) -> None:
        """A claimed delivery that does not start: its record gives the attempt back."""
        now = self.clock()
        batch.writes.submit(d, records.not_started(d.key, batch.owner, now=now, previous=d.previous,
                                                   expires_at=expiry(now, self.settings.record_ttl)))
        batch.conclude(d, ending, **known)

    def _execute(self, d: Delivery) -> BaseException | None:
        """Run the job (inside the stages' wraps); the exception it ended with, or None."""
        assert d.job is not None and d.args is not None
        job, args = d.job, d.args
        token = set_trace_id(d.trace_id or d.message_id)
        fields = self._fields(d)
        # The job's own log lines through app.runtime.logger carry the same fields.
        self.log.append_keys(**fields)
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            d.result = self.stages.wrap_run(d, lambda: job.fn(**args))()
        except Exception as raised:
            error = raised
            self.log.warning("job failed", extra={"error": f"{type(error).__name__}: {error}"})
        finally:
            d.duration_ms = (time.perf_counter() - started) * 1000
            self.log.remove_keys(list(fields))
            reset_trace_id(token)
        return error

    def _stored_result(self, d: Delivery) -> tuple[str | None, tuple[Ending, BaseException] | None]:
        """The job's return value as JSON for its record, or why it cannot be stored."""
        try:
            text = json.dumps(d.result, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as error:
            return None, (Ending.RESULT_NOT_JSON, PermanentError(
                f"job {d.job_name!r} returned a value that is not JSON ({error}); store_result=True needs one"))
        if len(text.encode()) > records.MAX_RESULT_BYTES:
            return None, (Ending.RESULT_TOO_LARGE, PermanentError(
                f"job {d.job_name!r} returned {len(text.encode())} bytes of JSON; store_result keeps at most "
                f"{records.MAX_RESULT_BYTES}: return an ID and store the rest where it belongs"))
        return text, None

    def _follow(self, batch: Batch, d: Delivery, first: Delivery | None) -> None:
        """A record that was not claimed: a later copy of a key follows the first, else it did not start."""
        if first is None or first is d or first.decision is None:
            batch.conclude(d, Ending.NO_TIME)  # too close to the deadline to claim anything
            return
        if d.job is not None and first.job is not None and (first.job is not d.job or d.job.fingerprint(
                d.args or {}) != d.job.fingerprint(first.args or {})):
            batch.conclude(d, Ending.KEY_CONFLICT, error=PermanentError(
                f"key {d.key!r} came twice in one batch for different calls ({first.job_name}, {d.job_name}): "
                "give each job call its own key"))
            return
        if batch.facts[first.index].ending is Ending.ALREADY_DEAD_LETTERED and d.message_id != first.message_id:
            # The first was a dead letter delivered again: that verdict is of its message, not of this new
            # request, which goes back unstarted and is claimed on its own next time (found by tests/model).
            batch.conclude(d, Ending.BUSY, wait=1.0)
            return
        d.counts_as = first.counts_as
        batch.conclude(d, Ending.FOLLOWS, first=first.decision)

    # ------------------------------------------------------------------ 5. dead letters
    def _dead_letter(self, batch: Batch) -> None:
        pending = [d for d in batch.deliveries if d.state is State.TO_DEAD_LETTER]
        if not pending:
            return
        dlq_url = self.settings.dlq_url
        letters = [self._dead_letter_of(d) for d in pending]
        if dlq_url:
            fifo = dlq_url.endswith(".fifo")
            limit = self.settings.max_message_bytes
            sent = send_entries(self.sqs, dlq_url, [letter.entry(str(i), fifo, max_bytes=limit)
                                                    for i, letter in enumerate(letters)])
        else:
            sent = {str(i): Sent(error="no DLQ configured (SQSJOBS_DLQ_URL)") for i in range(len(pending))}
        now = self.clock()
        expires_at = expiry(now, self.settings.record_ttl)
        evidence: list[tuple[Delivery, Future[Written]]] = []
        for i, d in enumerate(pending):
            assert d.decision is not None and d.reason is not None and d.error is not None
            answer = sent.get(str(i))
            why = answer.error if answer is not None else "no answer"
            if why is not None:
                self.log.error("DLQ send failed; leaving the message on its queue", extra={**self._fields(d),
                                                                                           "error": why})
                d.settled(settle(d.decision, Aftermath(dead_letter_refused=why), batch.facts[d.index], self.random))
                if d.holds_lease:
                    batch.writes.submit(d, records.retrying(d.key, batch.owner, now=now, expires_at=expires_at,
                                                            error=d.error))
                continue
            self.log.warning("dead-lettered", extra={**self._fields(d), "reason": d.reason.value})
            if answer is not None and answer.message_id:  # the proof that the reason is the worker's
                op = evidence_of(letters[i], answer.message_id, now=now, expires_at=expires_at)
                evidence.append((d, self.store.run(functools.partial(batch.writes.write_now, op))))
            if d.holds_lease:
                batch.writes.submit(d, records.dead_lettered(
                    d.key, batch.owner, now=now, expires_at=expires_at, error=d.error, reason=d.reason.value,
                    message_id=d.message_id, ran=d.duration_ms is not None, previous=d.previous))
        batch.writes.wait()
        for d, future in evidence:
            written = future.result()
            # A FIFO DLQ that deduplicated a second send names the first copy: its evidence is there already.
            if not written.ok and not (written.item and written.item.get("original_message_id") == d.message_id):
                self.log.error("could not write a dead letter's evidence: status and redrive will show its reason "
                               "as none", extra={**self._fields(d), "error": written.error or "refused"})

    def _dead_letter_of(self, d: Delivery) -> DeadLetter:
        assert d.reason is not None and d.error is not None
        return DeadLetter(
            message_id=d.message_id, body=d.body or "", reason=d.reason, error_type=type(d.error).__name__,
            error_message=str(d.error), job=d.job_name, attempts=d.attempt or d.receive_count,
            first_receive_time=d.first_receive_ms, source_queue=self._queue_url(d),
            source_attributes=d.message_attributes, group_id=d.group_id, key=d.key or None,
        )

    # ------------------------------------------------------------------ 6. settle
    def _settle(self, batch: Batch, followups: Mapping[int, str]) -> None:
        """Each decision, against what its record write and its follow-ups did."""
        for d in batch.deliveries:
            if d.decision is None or d.state not in (State.TO_ACK, State.TO_DEAD_LETTER, State.TO_RESEND,
                                                     State.TO_SCHEDULE):
                continue
            after = Aftermath(record_failed=batch.writes.failure(d) if d.outcome is Outcome.SUCCEEDED else None,
                              followup_failed=followups.get(d.index))
            d.settled(settle(d.decision, after, batch.facts[d.index], self.random))

    # ------------------------------------------------------------------ 7. back to the queue
    def _send_back(self, batch: Batch) -> None:
        for d in batch.deliveries:
            if d.state in (State.TO_ACK, State.TO_DEAD_LETTER):
                d.finished()
        scheduling = [d for d in batch.deliveries if d.state is State.TO_SCHEDULE]
        self._schedule(batch, scheduling)
        resending = [d for d in batch.deliveries if d.state is State.TO_RESEND]
        self._resend(batch, resending)
        returning = [d for d in batch.deliveries if d.state is State.TO_RETURN]
        for d in returning:
            d.finished()
        # A message whose re-send or schedule failed goes back too, with its delay (12 hours at most).
        self._set_visibility(returning + [d for d in resending + scheduling if d.state is State.RETURNED])

    def _schedule(self, batch: Batch, deliveries: Sequence[Delivery]) -> None:
        """Re-send each retry through a one-time schedule at its time; acknowledge it once the schedule exists."""
        if not deliveries:
            return
        from sqsjobs.enqueue._delays import retry_schedule_name
        from sqsjobs.schedules._one_time import DelayedMessage

        assert self.schedules is not None
        schedules = self.schedules()
        now = self.clock()
        for d in deliveries:
            d.to_schedule(retry_schedule_name(d.key or d.message_id, d.message_id))
            assert d.schedule_name is not None
            url = self._queue_url(d)
            try:
                scheduled = schedules.create(DelayedMessage(
                    name=d.schedule_name, job=d.job_name, key=d.key or d.message_id, body=d.body or "",
                    due_at=now + d.delay, queue_arn=d.event_source_arn or schedules.queue_arn(url),
                    message_group_id=(d.group_id or d.message_id) if url.endswith(".fifo") else None,
                    purpose=f"retry of message {d.message_id}",
                ))
            except (ScheduleError, ConfigurationError) as error:
                self.log.error("could not schedule a long retry; the message comes back in at most 12 hours",
                               extra={**self._fields(d), "error": str(error)})
                d.finished(sent=False, why=str(error))
                continue
            self.log.info("retry scheduled", extra={**self._fields(d), "schedule": scheduled.name,
                                                    "due": scheduled.due.isoformat()})
            d.finished()

    def _resend(self, batch: Batch, deliveries: Sequence[Delivery]) -> None:
        by_queue: dict[str, list[Delivery]] = {}
        for d in deliveries:
            by_queue.setdefault(self._queue_url(d), []).append(d)
        for url, items in by_queue.items():
            fifo = url.endswith(".fifo")
            entries = [resend_entry(d, str(i), fifo, finish=self._finish_of(batch, d)) for i, d in enumerate(items)]
            sent = send_entries(self.sqs, url, entries)
            now = self.clock()
            new_ids = {d.message_id: answer.message_id for i, d in enumerate(items)
                       if (answer := sent.get(str(i))) is not None and answer.message_id}
            for error in carry_redrive_counts(self.store, new_ids, now=now,
                                              expires_at=expiry(now, self.settings.record_ttl)):
                self.log.error("a re-sent message lost its redrive count", extra={"error": error})
            for i, d in enumerate(items):
                answer = sent.get(str(i))
                why = answer.error if answer is not None else "no answer"
                if why is not None:
                    self.log.error("could not re-send a message", extra={**self._fields(d), "error": why})
                d.finished(sent=why is None, why=why or "")

    def _finish_of(self, batch: Batch, d: Delivery) -> str | None:
        """The lease a re-sent copy finishes: this run's, when its completion could not be written (else a
        finish copy's own, kept)."""
        if d.outcome is Outcome.SUCCEEDED and batch.writes.failure(d) is not None:
            return batch.owner
        return finish_token(d)

    def _set_visibility(self, deliveries: Sequence[Delivery]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        by_queue: dict[str, list[Delivery]] = {}
        for d in deliveries:
            by_queue.setdefault(self._queue_url(d), []).append(d)
        for url, items in by_queue.items():
            for chunk in batches(items):
                entries = [{"Id": str(i), "ReceiptHandle": d.receipt_handle,
                            "VisibilityTimeout": visibility_seconds(d.delay)} for i, d in enumerate(chunk)]
                try:
                    response = self.sqs.change_message_visibility_batch(QueueUrl=url, Entries=entries)  # type: ignore[arg-type]
                except (ClientError, BotoCoreError) as error:
                    # The message still comes back, after the queue's own visibility timeout.
                    self.log.error("could not set retry delays", extra={"error": str(error), "queue": url})
                    continue
                for bad in response.get("Failed", []):
                    self.log.error("could not set a retry delay",
                                   extra={**self._fields(chunk[int(bad["Id"])]), "error": bad.get("Message")})

    # ------------------------------------------------------------------ 8. metrics, result
    def _finish(self, batch: Batch) -> BatchResult:
        metrics = m.BatchMetrics(namespace=self.settings.namespace, service=self.settings.service, emit=self.emit)
        for d in batch.deliveries:
            self._count(metrics, d)
        metrics.flush()
        writes = batch.writes
        for fence in writes.lost:
            self.log.warning("fence lost: the lease ran out and another invocation took the key over",
                             extra=self._fields(fence))
        for failed, error in writes.failed:
            self.log.error("could not write the job's record, even after retries", extra={**self._fields(failed),
                                                                                        "error": error})
        unrecorded = tuple(d.key for d, _ in writes.failed if d.outcome is Outcome.SUCCEEDED)
        failures = tuple(d.message_id for d in batch.deliveries if d.state is State.RETURNED)
        return BatchResult(deliveries=tuple(batch.deliveries), failures=failures, fence_lost=len(writes.lost),
                           store_errors=len(writes.failed), unrecorded=unrecorded)

    def _count(self, batch: m.BatchMetrics, d: Delivery) -> None:
        job = d.job_name if d.job is not None else m.UNKNOWN_JOB
        tenant = d.tenant if d.job is not None and d.job.options.tenant_metrics else None
        dims = {m.DIMENSION_TENANT: tenant} if tenant else {}
        if d.duration_ms is not None:
            batch.duration(job, d.duration_ms, dimensions=dims)
        name = OUTCOME_METRICS.get(d.outcome) if d.outcome is not None else None
        if d.outcome in UNRUN_ACKS and d.state is not State.ACKED:
            name = None  # withheld: its redelivery is counted when it is acknowledged
        if name is not None:
            limiter = {m.DIMENSION_LIMITER: d.deferred_by} if d.deferred_by else {}
            batch.count(job, name, dimensions={**dims, **limiter})
        if d.schedule_name is not None and d.state is State.ACKED:
            batch.count(job, m.SCHEDULED)
        ran_and_failed = d.error is not None and (d.duration_ms is not None or (
            d.reason is not None and d.reason.value == "malformed"))
        if ran_and_failed and d.outcome in (Outcome.RETRY, Outcome.DEAD_LETTERED):
            batch.count(job, m.FAILED, dimensions=dims)

    # ------------------------------------------------------------------ helpers
    def _fields(self, d: Delivery) -> dict[str, Any]:
        # A message sent without a trace id starts a trace named by its message id (what _execute makes current).
        # Job names and keys come from message bodies: a lone surrogate there would make the JSON
        # log line unwritable (logging drops it), so it is logged escaped.
        return {"job": _loggable(d.job_name), "key": _loggable(d.key), "message_id": d.message_id,
                "attempt": d.attempt or None, "trace_id": d.trace_id or d.message_id}

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

    def _queue_url(self, d: Delivery) -> str:
        arn = d.event_source_arn
        if not arn:
            return self.settings.queue_url or ""
        url = self._queue_urls.get(arn)
        if url is None:
            url = queue_url_from_arn(arn, self.settings.queue_url, self.sqs.meta.endpoint_url)
            self._queue_urls[arn] = url
        return url


def finish_token(d: Delivery) -> str | None:
    """The lease of the run a finish copy completes (``sqsjobs.finish``), or None for any other message."""
    attr = d.message_attributes.get(ATTR_FINISH)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    return text if isinstance(text, str) and len(text) == 32 and text.isalnum() else None


def finish_result(d: Delivery) -> str | None:
    """The stored result a finish copy carries (``sqsjobs.result``)."""
    attr = d.message_attributes.get(ATTR_RESULT)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    return text if isinstance(text, str) and len(text.encode()) <= records.MAX_RESULT_BYTES else None


#: the ``sqsjobs.*`` attributes a re-send keeps: the producer's own two (it writes the worker's itself)
RESENT_ATTRIBUTES = frozenset({ATTR_JOB, ATTR_TRACE_ID})


def resend_entry(d: Delivery, entry_id: str, fifo: bool, *, finish: str | None = None) -> dict[str, Any]:
    """A fresh copy of ``d`` for its own queue: same body, attributes and tenant, one more re-send counted.

    Of the ``sqsjobs.*`` attributes only the producer's job name and trace id
    go with it: any other one was set by a sender (the worker writes its own
    on a dead letter), and a copy would reach the DLQ looking like the
    worker's. A redrive count travels in the idempotency table instead
    (``carry_redrive_counts``). A deferral (over a limiter: the job is only
    waiting its turn) is not counted: a job behind a long backlog is re-sent
    as often as it takes, never dead-lettered for waiting (docs/flow-control.md).
    ``finish`` makes the copy a *finish copy*: its job succeeded under that
    lease, and its next delivery only writes the completion.

    Example:
        >>> d = Delivery.parse({"messageId": "m", "receiptHandle": "r", "body": "{}", "messageAttributes": {
        ...     "sqsjobs.job": {"stringValue": "a", "dataType": "String"},
        ...     "tenant": {"stringValue": "acme", "dataType": "String"},
        ...     "sqsjobs.reason": {"stringValue": "permanent", "dataType": "String"},
        ...     "SQSJOBS.Redrive_Count": {"stringValue": "0", "dataType": "Number"}}}, 0)
        >>> sorted(resend_entry(d, "0", fifo=False)["MessageAttributes"])
        ['sqsjobs.job', 'sqsjobs.resends', 'tenant']
    """
    attributes: dict[str, Any] = {}
    for name, attr in d.message_attributes.items():
        converted = sqs_attribute(attr)
        ours = name.lower().startswith(NAMESPACE)
        if converted is not None and (not ours or name in RESENT_ATTRIBUTES):
            attributes[name] = converted
    count = resends(d) + (0 if d.outcome is Outcome.DEFERRED or finish is not None else 1)
    if count:
        attributes[ATTR_RESENDS] = {"DataType": "Number", "StringValue": str(count)}
    if finish is not None:
        attributes[ATTR_FINISH] = {"DataType": "String", "StringValue": finish}
        ran = d.outcome is Outcome.SUCCEEDED and d.job is not None and d.job.options.store_result
        stored = json.dumps(d.result, separators=(",", ":")) if ran else finish_result(d)
        if stored is not None:
            attributes[ATTR_RESULT] = {"DataType": "String", "StringValue": stored}
    entry: dict[str, Any] = {"Id": entry_id, "MessageBody": d.body or "", "MessageAttributes": attributes}
    if fifo:
        entry["MessageGroupId"] = d.group_id or d.message_id
        entry["MessageDeduplicationId"] = hashlib.sha256(f"resend:{d.message_id}".encode()).hexdigest()
    else:
        entry["DelaySeconds"] = min(int(d.delay), MAX_DELAY_SECONDS)
        if d.tenant is not None:
            entry["MessageGroupId"] = d.tenant
    return entry


def parse_event(event: Any) -> list[Delivery]:
    """The event's records as deliveries; ``InvalidEventError`` when it is not an SQS batch.

    Example:
        >>> parse_event({"Records": []})
        Traceback (most recent call last):
        ...
        sqsjobs.InvalidEventError: the SQS event has no records (an empty batch is not an SQS event)
    """
    if not isinstance(event, dict):
        raise InvalidEventError(f"handle_batch expects the SQS event (a dict), got {type(event).__name__}")
    found = event.get("Records")
    if not isinstance(found, list):
        raise InvalidEventError("the event has no 'Records' list: is this an SQS event?")
    if not found:
        raise InvalidEventError("the SQS event has no records (an empty batch is not an SQS event)")
    return [Delivery.parse(record, i) for i, record in enumerate(found)]


def queue_url_from_arn(arn: str, configured_url: str | None, endpoint_url: str) -> str:
    """The queue URL for an event source ARN (the configured URL when it names the same queue).

    Example:
        >>> queue_url_from_arn("arn:aws:sqs:eu-west-1:123456789012:jobs", None, "https://sqs.eu-west-1.amazonaws.com")
        'https://sqs.eu-west-1.amazonaws.com/123456789012/jobs'
    """
    parts = arn.split(":")
    if len(parts) < 6:
        return configured_url or ""
    account, name = parts[4], parts[5]
    if configured_url and configured_url.rstrip("/").endswith(f"/{account}/{name}"):
        return configured_url
    return f"{endpoint_url.rstrip('/')}/{account}/{name}"


def _loggable(text: str) -> str:
    return text if text.isascii() else text.encode("utf-8", "backslashreplace").decode("utf-8")
