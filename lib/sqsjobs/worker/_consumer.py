"""The SQS batch consumer: every record claimed, run, recorded, and then acknowledged, returned or dead-lettered.

``JobBatchProcessor.run`` is the whole flow, top to bottom:

1. parse the event; decode every body (a bad one is dead-lettered alone,
   with reason ``malformed``); a delivery older than its ``expires_in`` is
   acknowledged without running; the limited jobs take their rate tokens and
   concurrency slots (``sqsjobs.flow._permits``, one round trip, none for a batch
   without limited jobs), and those over a limit are deferred untouched;
2. **claim** every distinct key at once: one DynamoDB round trip for the
   batch (``sqsjobs.worker._job_records``), which also tells duplicates, cancelled keys,
   keys held by a live run elsewhere, and keys that belong to other arguments;
3. **run** the claimed jobs in order; each job's record is written the moment
   it returns, on the store's thread pool, overlapped with the next job, so a
   crash exposes at most the one job that was running (the crash window);
4. **dead-letter** what failed for good (``SendMessageBatch`` to the DLQ, cut
   by 10 entries and 256 KiB), then write those records, so a redelivery of a
   dead-lettered message (a lost acknowledgement) is not run again;
5. **groups and chains** (``sqsjobs.workflows._stage``): a member's terminal write
   carried its group's count (one transaction); now the members that ended
   without a write are counted, emptied groups finished (their callbacks
   sent) and chains' next steps sent;
6. **re-send** what goes back to the queue but has reached the backstop
   receive (SQS's redrive would move it without a reason), **schedule** the
   retries SQS cannot hold back that long (beyond its 12-hour visibility, or
   beyond 900 s at the backstop: a one-time schedule re-sends the message at
   its time, and only then is the original acknowledged), and set the
   others' retry delays (``ChangeMessageVisibilityBatch``, full jitter);
7. write the batch's metrics (EMF) and return ``batchItemFailures``.

Each record moves through the states of ``sqsjobs.worker._delivery`` only by its
transition methods. Attempts are the runs that *started* (the job's record
counts them), not SQS receives: a record returned without running never
burns one. This module must never raise out of a batch for a record's sake.
"""

from __future__ import annotations

import hashlib
import json
import random as _random
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sqsjobs import _metrics as m
from sqsjobs._backoff import MAX_VISIBILITY_SECONDS, BackoffPolicy, RandomSource, visibility_seconds
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
from sqsjobs._job import Classification, OnCrash
from sqsjobs._tracing import reset_trace_id, set_trace_id
from sqsjobs.enqueue._batching import batches, send_entries
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.enqueue._message import ATTR_RESENDS, MAX_DELAY_SECONDS
from sqsjobs.flow._limiter_memory import LimiterMemory
from sqsjobs.flow._permits import Permits, Refusal
from sqsjobs.store._lease import Operation, Written, expiry
from sqsjobs.worker import _job_records as guard
from sqsjobs.worker._budget import remaining_seconds
from sqsjobs.worker._cancellation import running_job
from sqsjobs.worker._dead_letters import DeadLetter, Reason, sqs_attribute
from sqsjobs.worker._delivery import BatchResult, Delivery, Outcome, State
from sqsjobs.worker._job_records import Claim, ClaimResult, Verdict
from sqsjobs.worker._time_limit import run_with_time_limit
from sqsjobs.workflows._stage import BatchFollowups, Followups

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs._job import Job
    from sqsjobs._settings import Settings
    from sqsjobs.flow._limits import Limiter
    from sqsjobs.schedules._one_time import OneTimeSchedules
    from sqsjobs.store._lease import LeaseStore

#: a message the worker cannot start is re-sent at most this often before it is dead-lettered
MAX_RESENDS = 10
#: the counter each final outcome adds one to (re-sent records count as what they were: a retry still comes back)
OUTCOME_METRICS = {
    Outcome.SUCCEEDED: m.SUCCEEDED,
    Outcome.DUPLICATE: m.DUPLICATE,
    Outcome.RETRY: m.RETRIED,
    Outcome.DEAD_LETTERED: m.DEAD_LETTERED,
    Outcome.CANCELLED: m.CANCELLED,
    Outcome.EXPIRED: m.EXPIRED,
    Outcome.DEFERRED: m.DEFERRED,
}


class JobBatchProcessor:
    """Runs one SQS batch through the guard (``JobApp`` builds one per cold start)."""

    def __init__(
        self,
        *,
        settings: Settings,
        jobs: dict[str, Job[Any, Any]],
        store: LeaseStore,
        sqs: Callable[[], SQSClient],
        clock: Callable[[], float],
        random: RandomSource | None,
        logger: Any,
        emit: Callable[[str], None],
        schedules: OneTimeSchedules | None = None,
        limiters: Mapping[str, Limiter] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.settings = settings
        #: where retries too long for SQS wait (None: no schedule group; they wait 12 hours at most)
        self.schedules = schedules
        self.jobs = jobs
        self.store = store
        #: the SQS client, built on first use: a batch of successes never needs one
        self._sqs = sqs
        self.clock = clock
        self.random = random
        self.log = logger
        self.emit = emit
        self.default_backoff = BackoffPolicy(base=settings.backoff_base, cap=settings.backoff_cap)
        self._queue_urls: dict[str, str] = {}
        self.limiters = limiters or {}
        self.sleep = sleep
        #: what this container learned of its limiters between batches (``sqsjobs.flow._permits``)
        self.limiter_memory = LimiterMemory()
        self.followups = Followups(store=store, sqs=sqs, settings=settings, clock=clock, random=random,
                                   logger=logger)

    @property
    def sqs(self) -> SQSClient:
        """The SQS client (dead letters, re-sends, retry delays)."""
        return self._sqs()

    # ------------------------------------------------------------------ the flow
    def run(self, event: Any, context: Any) -> BatchResult:
        """Process an SQS event; raises only ``InvalidEventError`` (the event is not a batch)."""
        deliveries = parse_event(event)
        owner = uuid.uuid4().hex
        now = self.clock()
        expired = [op for d in deliveries if (op := self._decode(d, now)) is not None]
        permits = Permits(store=self.store, limiters=self.limiters, owner=owner, memory=self.limiter_memory,
                          random=self.random or _random, clock=self.clock, sleep=self.sleep)
        for d, refusal in permits.take(deliveries, now=now, lease_until=self._invocation_lease(now, context)):
            d.deferred(refusal.limiter, delay=refusal.delay)
        firsts = self._claim(deliveries, owner, now, context, expired)
        followups = self.followups.batch()
        writes = RecordWrites(self.store, followups)
        blocked_groups: set[str] = set()
        for d in deliveries:
            if d.group_id in blocked_groups and d.state in (State.DECODED, State.CLAIMED):
                # FIFO order: nothing after a record of its group that goes back may run first.
                self._give_back_unstarted(d, owner, writes, Outcome.GROUP_BLOCKED)
            elif d.state is State.CLAIMED:
                self._run_claimed(d, owner, context, writes, permits)
            elif d.state is State.DECODED:
                self._follow(d, firsts.get(d.key))
            if d.group_id is not None and d.state is State.TO_RETURN:
                blocked_groups.add(d.group_id)
        limiter_errors = permits.close().errors
        writes.wait()
        self._dead_letter(deliveries, owner, writes)
        followups.finish(deliveries)
        self._resend_or_return(deliveries)
        batch = m.BatchMetrics(namespace=self.settings.namespace, service=self.settings.service, emit=self.emit)
        for d in deliveries:
            self._count(batch, d)
        batch.flush()
        for fence in writes.lost:
            self.log.warning("fence lost: the lease ran out and another invocation took the key over",
                             extra=self._fields(fence))
        for failed, error in writes.errors:
            self.log.error("could not write the job's record; its lease bounds the damage",
                           extra={**self._fields(failed), "error": error})
        for error in limiter_errors:
            self.log.error("could not write a limiter's token or slot; its lease bounds the damage",
                           extra={"error": error})
        failures = tuple(d.message_id for d in deliveries if d.state is State.RETURNED)
        return BatchResult(deliveries=tuple(deliveries), failures=failures, fence_lost=len(writes.lost),
                           store_errors=len(writes.errors))

    # ------------------------------------------------------------------ 1. decode
    def _decode(self, d: Delivery, now: float) -> Operation | None:
        """Decode ``d``; returns the record write of a delivery that expired before it ran."""
        try:
            envelope = d.envelope = Envelope.decode(d.body)  # kept even if what follows fails: it names the job
            job = self.jobs.get(envelope.job)
            if job is None:
                raise UnknownJobError(f"no job named {envelope.job!r} is registered in this worker")
            args = job.signature.bind(job.upcast(envelope.job_version, envelope.args))
            key = envelope.key or job.key_for(args)
        except MalformedMessageError as error:
            d.to_dead_letter(Reason.MALFORMED, error)
            return None
        except (UnknownJobError, InvalidArgumentsError) as error:
            d.to_dead_letter(Reason.MALFORMED, MalformedMessageError(f"{type(error).__name__}: {error}"))
            return None
        except RetryableError as error:
            # A newer job_version than this deploy knows: back after the job's backoff, no attempt used,
            # until new code takes it.
            delay = self.default_backoff.next_delay(d.receive_count, self.random)
            self._give_back(d, Outcome.RETRY, delay, error)
            return None
        except Exception as error:  # an upcaster that raised is user code failing on this body
            malformed = MalformedMessageError(f"{type(error).__name__} while decoding: {error}")
            d.to_dead_letter(Reason.MALFORMED, malformed)
            return None
        d.decoded(envelope=envelope, job=job, args=args, key=key)
        expires_in = envelope.expires_in or job.options.expires_in
        sent = envelope.enqueued_at if envelope.enqueued_at is not None else d.sent_ms / 1000.0
        if expires_in is not None and sent and now - sent > expires_in:
            d.to_ack(Outcome.EXPIRED)
            if envelope.member_of is not None:
                return None  # its group's count writes its record (followups)
            return guard.expired(key, job=job.name, now=now, expires_at=expiry(now, self.settings.record_ttl))
        return None

    # ------------------------------------------------------------------ 2. claim
    def _claim(self, deliveries: Sequence[Delivery], owner: str, now: float, context: Any,
               expired: list[Operation]) -> dict[str, Delivery]:
        """Claim each distinct key once (one round trip); later records of a key follow the first."""
        firsts: dict[str, Delivery] = {}
        claims: list[tuple[Delivery, Claim]] = []
        lease_until = self._invocation_lease(now, context)
        if lease_until is not None:
            for d in deliveries:
                if d.state is not State.DECODED or d.key in firsts or d.job is None or d.envelope is None:
                    continue
                firsts[d.key] = d
                claims.append((d, Claim(
                    key=d.key, job=d.job.name, owner=owner, now=now, lease_until=lease_until,
                    expires_at=expiry(now, self.settings.record_ttl, lease_until),
                    fingerprint=d.job.fingerprint(d.args or {}), fp_version=d.job.options.version,
                    message_id=d.message_id, enqueued_at=d.envelope.enqueued_at,
                )))
        written = self.store.write_many([c.operation() for _, c in claims] + expired)
        for (d, claim), answer in zip(claims, written, strict=False):
            self._on_claim(d, ClaimResult.of(claim, answer), now)
        return firsts

    def _on_claim(self, d: Delivery, claim: ClaimResult, now: float) -> None:
        verdict = claim.verdict
        if verdict is Verdict.CLAIMED:
            d.claimed(attempt=claim.attempt, took_over=claim.took_over, previous=claim.previous)
        elif verdict is Verdict.DUPLICATE:
            d.to_ack(Outcome.DUPLICATE)
        elif verdict is Verdict.ALREADY_DEAD_LETTERED:
            d.notes.append("this message is already in the DLQ (its acknowledgement was lost)")
            d.to_ack(Outcome.DUPLICATE)
        elif verdict is Verdict.CANCELLED:
            d.to_ack(Outcome.CANCELLED)
        elif verdict is Verdict.CONFLICT:
            stored = claim.previous
            job = stored.get("job") if stored is not None else None
            d.to_dead_letter(Reason.KEY_CONFLICT, PermanentError(
                f"key {d.key!r} already belongs to job {job!r} with other arguments (hash "
                f"{stored.fingerprint if stored else None}); this message's hash is "
                f"{d.job.fingerprint(d.args or {}) if d.job else None}: give each job call its own key"))
        elif verdict is Verdict.BUSY:
            d.notes.append("lease held elsewhere")
            wait = (claim.lease_until or now) - now
            self._give_back(d, Outcome.UNSTARTED, min(max(wait + 1.0, 1.0), MAX_VISIBILITY_SECONDS))
        else:
            delay = self.default_backoff.next_delay(d.receive_count, self.random)
            self._give_back(d, Outcome.RETRY, delay, RetryableError(f"idempotency store unavailable: {claim.error}"))

    # ------------------------------------------------------------------ 3. run
    def _run_claimed(self, d: Delivery, owner: str, context: Any, writes: RecordWrites, permits: Permits) -> None:
        assert d.job is not None and d.args is not None
        options = d.job.options
        limit = self._max_attempts(d.job)
        if not self._time_left(context):
            self._give_back_unstarted(d, owner, writes, Outcome.UNSTARTED)
            return
        last_error = d.previous.get("last_error") if d.previous is not None else None
        if d.took_over and options.on_crash is OnCrash.DEAD_LETTER:
            d.to_dead_letter(Reason.CRASHED, PermanentError(
                f"the previous run of {d.key!r} died mid-way (on_crash='dead_letter'); last error: {last_error}"))
            return
        if d.attempt > limit:
            reason = Reason.LOST if d.took_over else Reason.EXHAUSTED
            what = "never reported (a timeout, a crash or running out of memory)" if d.took_over else "failed"
            d.to_dead_letter(reason, RetryableError(
                f"attempt {d.attempt - 1} of {limit} {what}; last error: {last_error}"))
            return
        refusal = permits.start(d, now=self.clock())
        if refusal is not None:  # its rate token is spent: it started too long after the batch took it
            self._give_back_unstarted(d, owner, writes, Outcome.DEFERRED, refusal)
            return
        error = self._execute(d)
        permits.finished(d)
        now = self.clock()
        expires_at = expiry(now, self.settings.record_ttl)
        if error is None:
            stored = self._stored_result(d) if options.store_result else None
            if d.state is State.CLAIMED:  # (a result that cannot be stored dead-letters it)
                d.to_ack(Outcome.SUCCEEDED, result=d.result)
                writes.submit(d, guard.succeeded(d.key, owner, now=now, expires_at=expires_at, result=stored))
        elif options.classify(error) is Classification.PERMANENT:
            d.to_dead_letter(Reason.PERMANENT, error)
        elif d.attempt >= limit:
            d.to_dead_letter(Reason.EXHAUSTED, error)
        else:
            requested = error.delay if isinstance(error, RetryableError) else None
            delay = requested if requested is not None else options.backoff.next_delay(d.attempt, self.random)
            d.to_return(Outcome.RETRY, delay=delay, error=error)
            writes.submit(d, guard.retrying(d.key, owner, now=now, expires_at=expires_at, error=error))

    def _execute(self, d: Delivery) -> BaseException | None:
        """Run the job within its time limit; the exception it ended with, or None."""
        assert d.job is not None and d.args is not None
        job = d.job
        token = set_trace_id(d.trace_id or d.message_id)
        fields = self._fields(d)
        # The job's own log lines through app.logger carry the same fields.
        self.log.append_keys(**fields)
        started = time.perf_counter()
        error: BaseException | None = None
        try:
            with running_job(self.store, d.key):
                d.result = run_with_time_limit(job.fn, d.args, job.options.time_limit, job.name)
        except Exception as raised:
            error = raised
            self.log.warning("job failed", extra={"error": f"{type(error).__name__}: {error}"})
        finally:
            d.duration_ms = (time.perf_counter() - started) * 1000
            self.log.remove_keys(list(fields))
            reset_trace_id(token)
        return error

    def _stored_result(self, d: Delivery) -> str | None:
        """The job's return value as JSON for its record; a value that cannot be stored dead-letters it."""
        try:
            text = json.dumps(d.result, separators=(",", ":"), allow_nan=False)
        except (TypeError, ValueError) as error:
            d.to_dead_letter(Reason.RESULT_NOT_JSON, PermanentError(
                f"job {d.job_name!r} returned a value that is not JSON ({error}); store_result=True needs one"))
            return None
        if len(text.encode()) > guard.MAX_RESULT_BYTES:
            d.to_dead_letter(Reason.RESULT_TOO_LARGE, PermanentError(
                f"job {d.job_name!r} returned {len(text.encode())} bytes of JSON; store_result keeps at most "
                f"{guard.MAX_RESULT_BYTES}: return an ID and store the rest where it belongs"))
            return None
        return text

    def _follow(self, d: Delivery, first: Delivery | None) -> None:
        """A record that was not claimed: a later copy of a key follows the first, else it did not start."""
        if first is None or first is d:
            self._give_back(d, Outcome.UNSTARTED, 0)  # too close to the deadline to claim anything
            return
        if d.job is not None and first.job is d.job and d.job.fingerprint(d.args or {}) != \
                d.job.fingerprint(first.args or {}):
            d.to_dead_letter(Reason.KEY_CONFLICT, PermanentError(
                f"key {d.key!r} came twice in one batch with different arguments: give each job call its own key"))
        elif first.state is State.TO_DEAD_LETTER and first.reason is not None and first.error is not None:
            # The job never completed: this copy is no duplicate of a success. It goes to the DLQ with the
            # same reason (a replay of either copy passes the guard, so one run at most).
            d.to_dead_letter(first.reason, first.error)
        elif first.state is State.TO_ACK and first.outcome is not None:
            d.to_ack(Outcome.CANCELLED if first.outcome is Outcome.CANCELLED else Outcome.DUPLICATE)
        elif first.outcome is Outcome.RETRY:
            self._give_back(d, Outcome.RETRY, first.delay, first.error)
        else:
            self._give_back(d, Outcome.UNSTARTED, first.delay)

    # ------------------------------------------------------------------ 4. dead letters
    def _dead_letter(self, deliveries: Sequence[Delivery], owner: str, writes: RecordWrites) -> None:
        pending = [d for d in deliveries if d.state is State.TO_DEAD_LETTER]
        if not pending:
            return
        dlq_url = self.settings.dlq_url
        if dlq_url:
            fifo = dlq_url.endswith(".fifo")
            entries = [self._dead_letter_of(d).entry(str(i), fifo, max_bytes=self.settings.max_message_bytes)
                       for i, d in enumerate(pending)]
            sent = send_entries(self.sqs, dlq_url, entries)
        else:
            sent = {str(i): "no DLQ configured (SQSJOBS_DLQ_URL)" for i in range(len(pending))}
        now = self.clock()
        expires_at = expiry(now, self.settings.record_ttl)
        for i, d in enumerate(pending):
            assert d.reason is not None and d.error is not None
            why = sent.get(str(i), "no answer")
            if why is None:
                self.log.warning("dead-lettered", extra={**self._fields(d), "reason": d.reason.value})
                if d.holds_lease:
                    writes.submit(d, guard.dead_lettered(d.key, owner, now=now, expires_at=expires_at,
                                                         error=d.error, reason=d.reason.value,
                                                         message_id=d.message_id,
                                                         ran=d.duration_ms is not None, previous=d.previous))
                d.finished()
                continue
            self.log.error("DLQ send failed; leaving the message on its queue", extra={**self._fields(d),
                                                                                       "error": why})
            error = d.error
            d.dead_letter_failed(why, delay=self.default_backoff.next_delay(max(d.attempt, 1), self.random))
            if d.holds_lease:
                writes.submit(d, guard.retrying(d.key, owner, now=now, expires_at=expires_at, error=error))
        writes.wait()

    def _dead_letter_of(self, d: Delivery) -> DeadLetter:
        assert d.reason is not None and d.error is not None
        return DeadLetter(
            message_id=d.message_id, body=d.body or "", reason=d.reason, error_type=type(d.error).__name__,
            error_message=str(d.error), job=d.job_name, attempts=d.attempt or d.receive_count,
            first_receive_time=d.first_receive_ms, source_queue=self._queue_url(d),
            source_attributes=d.message_attributes, group_id=d.group_id,
        )

    # ------------------------------------------------------------------ 5. back to the queue
    def _resend_or_return(self, deliveries: Sequence[Delivery]) -> None:
        backstop = self.settings.max_attempts + 1  # the queue's maxReceiveCount
        for d in deliveries:
            if d.state is State.TO_RETURN and self._needs_schedule(d, backstop):
                from sqsjobs.enqueue._delays import retry_schedule_name  # only for retries SQS cannot hold back

                d.to_schedule(retry_schedule_name(d.key or d.message_id, d.message_id))
            elif d.state is State.TO_RETURN and d.receive_count >= backstop:
                d.to_resend()
            elif d.state is State.TO_ACK:
                d.finished()
        scheduling = [d for d in deliveries if d.state is State.TO_SCHEDULE]
        self._schedule(scheduling)
        resending = [d for d in deliveries if d.state is State.TO_RESEND]
        self._resend(resending)
        returning = [d for d in deliveries if d.state is State.TO_RETURN]
        for d in returning:
            d.finished()
        # A message whose re-send or schedule failed goes back too, with its delay (12 hours at most).
        self._set_visibility(returning + [d for d in resending + scheduling if d.state is State.RETURNED])

    def _needs_schedule(self, d: Delivery, backstop: int) -> bool:
        """A retry SQS cannot hold back for its whole delay: beyond 12 hours, or beyond 900 s as a re-send."""
        at_backstop = d.receive_count >= backstop and d.outcome is Outcome.RETRY
        if d.delay <= MAX_VISIBILITY_SECONDS and not (at_backstop and d.delay > MAX_DELAY_SECONDS):
            return False
        if self.schedules is None:
            if d.delay > MAX_VISIBILITY_SECONDS:
                self.log.error("a retry asked for more than 12 hours but no schedule group is configured "
                               "(SQSJOBS_SCHEDULE_GROUP): it comes back in 12 hours",
                               extra={**self._fields(d), "delay": d.delay})
            return False
        return True

    def _schedule(self, deliveries: Sequence[Delivery]) -> None:
        """Re-send each retry through a one-time schedule at its time; acknowledge it once the schedule exists."""
        if not deliveries:
            return
        from sqsjobs.schedules._one_time import DelayedMessage

        assert self.schedules is not None
        now = self.clock()
        for d in deliveries:
            assert d.schedule_name is not None
            url = self._queue_url(d)
            try:
                scheduled = self.schedules.create(DelayedMessage(
                    name=d.schedule_name, job=d.job_name, key=d.key or d.message_id, body=d.body or "",
                    due_at=now + d.delay, queue_arn=d.event_source_arn or self.schedules.queue_arn(url),
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

    def _resend(self, deliveries: Sequence[Delivery]) -> None:
        by_queue: dict[str, list[Delivery]] = {}
        for d in deliveries:
            by_queue.setdefault(self._queue_url(d), []).append(d)
        for url, items in by_queue.items():
            fifo = url.endswith(".fifo")
            sent = send_entries(self.sqs, url, [resend_entry(d, str(i), fifo) for i, d in enumerate(items)])
            for i, d in enumerate(items):
                why = sent.get(str(i), "no answer")
                if why is not None:
                    self.log.error("could not re-send a message at its last receive", extra={**self._fields(d),
                                                                                              "error": why})
                d.finished(sent=why is None, why=why or "")

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

    # ------------------------------------------------------------------ moves that decide
    def _give_back(self, d: Delivery, outcome: Outcome, delay: float, error: BaseException | None = None) -> None:
        """Return ``d`` to the queue, unless it was re-sent too often without starting: then the DLQ."""
        if d.receive_count > self.settings.max_attempts and resends(d) >= MAX_RESENDS:
            d.to_dead_letter(Reason.EXHAUSTED, error or RetryableError(
                f"not started after {MAX_RESENDS} re-sends of {self.settings.max_attempts + 1} receives each"))
            return
        d.to_return(outcome, delay=delay, error=error)

    def _give_back_unstarted(self, d: Delivery, owner: str, writes: RecordWrites, outcome: Outcome,
                             refusal: Refusal | None = None) -> None:
        if d.state is State.CLAIMED:
            now = self.clock()
            writes.submit(d, guard.not_started(d.key, owner, now=now, expires_at=expiry(now, self.settings.record_ttl),
                                               previous=d.previous))
        if refusal is not None:
            d.deferred(refusal.limiter, delay=refusal.delay)
        else:
            d.to_return(outcome, delay=0)

    # ------------------------------------------------------------------ helpers
    def _count(self, batch: m.BatchMetrics, d: Delivery) -> None:
        job = d.job_name if d.job is not None else m.UNKNOWN_JOB
        tenant = d.tenant if d.job is not None and d.job.options.tenant_metrics else None
        dims = {m.DIMENSION_TENANT: tenant} if tenant else {}
        if d.duration_ms is not None:
            batch.duration(job, d.duration_ms, dimensions=dims)
        name = OUTCOME_METRICS.get(d.outcome) if d.outcome is not None else None
        if name is not None:
            limiter = {m.DIMENSION_LIMITER: d.deferred_by} if d.deferred_by else {}
            batch.count(job, name, dimensions={**dims, **limiter})
        if d.schedule_name is not None and d.state is State.ACKED:
            batch.count(job, m.SCHEDULED)
        ran_and_failed = d.error is not None and (d.duration_ms is not None or d.reason is Reason.MALFORMED)
        if ran_and_failed and d.outcome in (Outcome.RETRY, Outcome.DEAD_LETTERED):
            batch.count(job, m.FAILED, dimensions=dims)

    def _fields(self, d: Delivery) -> dict[str, Any]:
        # A message sent without a trace id starts a trace named by its message id (what _execute makes current).
        # Job names and keys come from message bodies: a lone surrogate there would make the JSON
        # log line unwritable (logging drops it), so it is logged escaped.
        return {"job": _loggable(d.job_name), "key": _loggable(d.key), "message_id": d.message_id,
                "attempt": d.attempt or None, "trace_id": d.trace_id or d.message_id}

    def _max_attempts(self, job: Job[Any, Any]) -> int:
        return min(job.options.max_attempts or self.settings.max_attempts, self.settings.max_attempts)

    def _time_left(self, context: Any) -> bool:
        remaining = remaining_seconds(context)
        return remaining is None or remaining >= self.settings.deadline_margin

    def _default_lease(self) -> float:
        return self.settings.function_timeout or 900.0

    def _invocation_lease(self, now: float, context: Any) -> float | None:
        """Until when this invocation's leases last (records, slots); None when it is too late to start any."""
        remaining = remaining_seconds(context)
        if remaining is not None and remaining < self.settings.deadline_margin:
            return None
        return now + (remaining if remaining is not None else self._default_lease()) + self.settings.lease_margin

    def _queue_url(self, d: Delivery) -> str:
        arn = d.event_source_arn
        if not arn:
            return self.settings.queue_url or ""
        url = self._queue_urls.get(arn)
        if url is None:
            url = queue_url_from_arn(arn, self.settings.queue_url, self.sqs.meta.endpoint_url)
            self._queue_urls[arn] = url
        return url


class RecordWrites:
    """The job records a batch writes as its jobs end: started at once, waited for together.

    A group member's terminal write carries its group's count (``followups``).
    """

    def __init__(self, store: LeaseStore, followups: BatchFollowups | None = None) -> None:
        self.store = store
        self.followups = followups
        self._pending: list[tuple[Delivery, Future[Written]]] = []
        self.lost: list[Delivery] = []
        self.errors: list[tuple[Delivery, str]] = []

    def submit(self, d: Delivery, op: Operation) -> None:
        """Start writing ``d``'s record (the next job runs meanwhile)."""
        counting = self.followups.counting(d, op) if self.followups is not None else None
        self._pending.append((d, self.store.submit(op) if counting is None else self.store.run(counting)))

    def wait(self) -> None:
        """Wait for every write started so far."""
        for d, future in self._pending:
            answer = future.result()
            self.count(d, answer)
            if self.followups is not None:
                self.followups.answered(d, answer)
        self._pending.clear()

    def count(self, d: Delivery, answer: Written) -> None:
        """Note a write that did not happen: a lost fence, or a store failure."""
        if answer.error is not None:
            self.errors.append((d, answer.error))
        elif not answer.ok:
            self.lost.append(d)


def resends(d: Delivery) -> int:
    """How often the worker re-sent this message already (its ``sqsjobs.resends``; garbage counts as 0)."""
    attr = d.message_attributes.get(ATTR_RESENDS)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    return int(text) if isinstance(text, str) and text.isdigit() and len(text) < 6 else 0


def resend_entry(d: Delivery, entry_id: str, fifo: bool) -> dict[str, Any]:
    """A fresh copy of ``d`` for its own queue: same body, attributes and tenant, one more re-send counted.

    A deferral (over a limiter: the job is only waiting its turn) is not
    counted: a job behind a long backlog is re-sent as often as it takes,
    never dead-lettered for waiting (docs/flow-control.md).
    """
    attributes: dict[str, Any] = {}
    for name, attr in d.message_attributes.items():
        converted = sqs_attribute(attr)
        if converted is not None and name != ATTR_RESENDS:
            attributes[name] = converted
    count = resends(d) + (0 if d.outcome is Outcome.DEFERRED else 1)
    if count:
        attributes[ATTR_RESENDS] = {"DataType": "Number", "StringValue": str(count)}
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
    records = event.get("Records")
    if not isinstance(records, list):
        raise InvalidEventError("the event has no 'Records' list: is this an SQS event?")
    if not records:
        raise InvalidEventError("the SQS event has no records (an empty batch is not an SQS event)")
    return [Delivery.parse(record, i) for i, record in enumerate(records)]


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
