"""The SQS batch consumer: claim → run → complete/release → retry or dead-letter.

Flow of one batch (each step one round trip for the whole batch):

1. parse every record; bad bodies become permanent failures of that record alone;
2. claim every distinct key at once (``IdempotencyStore.claim_many``);
3. run the claimed jobs in order, each within its ``time_limit``, none started
   when the invocation has less than ``deadline_margin`` left;
4. complete or release every claim at once, fenced on this invocation's owner token;
5. dead-letter with reasons (``SendMessageBatch`` to the DLQ), then set the
   retry delays (``ChangeMessageVisibilityBatch``, full jitter);
6. write the batch's metrics as EMF and return ``batchItemFailures``.

Crash window: completions are written in step 4, after every job ran. If the
invocation dies between a job's side effect and step 4, the record stays
IN_PROGRESS until its lease ends; the lease (remaining invocation time +
``lease_margin``) ends before the queue's visibility timeout, so the
redelivered message claims the record again and the job runs a second time.
Jobs must therefore keep their side effects idempotent *within* that window,
as with any at-least-once queue; the guard removes every other duplicate.

This module must never raise out of a batch for a record's sake.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools.utilities.batch.base import BasePartialBatchProcessor, EventType
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord

from sqsjobs import metrics as m
from sqsjobs.backoff import BackoffPolicy, RandomSource, visibility_seconds
from sqsjobs.dead_letter import REASON_EXHAUSTED, REASON_MALFORMED, REASON_PERMANENT, DeadLetter
from sqsjobs.delivery import BatchResult, Delivery, Outcome
from sqsjobs.envelope import Envelope
from sqsjobs.errors import (
    InvalidArgumentsError,
    InvalidEventError,
    MalformedMessageError,
    RetryableError,
    UnknownJobError,
)
from sqsjobs.guard import ClaimRequest, ClaimState, Finish, IdempotencyStore
from sqsjobs.time_limit import run_with_time_limit
from sqsjobs.tracing import reset_trace_id, set_trace_id

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.job import Job
    from sqsjobs.settings import Settings


class JobBatchProcessor(BasePartialBatchProcessor):
    """Runs one SQS batch through the guard; Powertools' base class keeps the partial-failure bookkeeping.

    Example:
        >>> processor = JobBatchProcessor(...)  # doctest: +SKIP   (JobApp builds it)
        >>> processor.run(event, context).response()  # doctest: +SKIP
    """

    def __init__(
        self,
        *,
        settings: Settings,
        jobs: dict[str, Job[Any, Any]],
        store: IdempotencyStore,
        sqs: SQSClient,
        clock: Callable[[], float],
        random: RandomSource | None,
        logger: Any,
        emit: Callable[[str], None],
    ) -> None:
        super().__init__(event_type=EventType.SQS, raise_on_entire_batch_failure=False)
        self.settings = settings
        self.jobs = jobs
        self.store = store
        self.sqs = sqs
        self.clock = clock
        self.random = random
        self.log = logger
        self.emit = emit
        self.default_backoff = BackoffPolicy(base=settings.backoff_base, cap=settings.backoff_cap)
        self._queue_urls: dict[str, str] = {}

    # Powertools' abstract hook; our flow is batch-level, see ``run``.
    def _process_record(self, record: dict[str, Any]) -> Any:  # pragma: no cover - unused
        raise NotImplementedError

    async def _async_process_record(self, record: dict[str, Any]) -> Any:  # pragma: no cover - unused
        raise NotImplementedError

    # ------------------------------------------------------------------ flow
    def run(self, event: Any, context: Any) -> BatchResult:
        """Process an SQS event; raises only ``InvalidEventError`` (the event is not a batch)."""
        deliveries = parse_event(event)
        self.records = [d.raw for d in deliveries]
        owner = uuid.uuid4().hex
        batch_metrics = m.BatchMetrics(namespace=self.settings.namespace, service=self.settings.service,
                                       emit=self.emit)
        with self:
            for d in deliveries:
                self._decode(d)
            first_of_key = self._claim(deliveries, owner, context)
            self._run_all(deliveries, first_of_key, context)
            fence_lost, store_errors = self._finish(deliveries, owner)
            self._dead_letter(deliveries)
            self._share_outcomes(deliveries, first_of_key)
            self._set_visibility(deliveries)
            for d in deliveries:
                self._count(batch_metrics, d)
                if d.acknowledged:
                    self.success_handler(SQSRecord(d.raw), d.outcome)
                else:
                    error = d.error or RuntimeError(d.outcome.value if d.outcome else "unprocessed")
                    self.failure_handler(SQSRecord(d.raw), (type(error), error, None))
        batch_metrics.flush()
        failures = tuple(str(item["itemIdentifier"]) for item in self.response()["batchItemFailures"])
        return BatchResult(deliveries=tuple(deliveries), failures=failures, fence_lost=fence_lost,
                           store_errors=store_errors)

    def _decode(self, d: Delivery) -> None:
        try:
            envelope = Envelope.decode(d.body)
            d.envelope = envelope
            job = self.jobs.get(envelope.job)
            if job is None:
                raise UnknownJobError(f"no job named {envelope.job!r} is registered in this worker")
            d.job = job
            args = job.upcast(envelope.job_version, envelope.args)
            d.args = job.signature.bind(args)
            d.key = envelope.key or job.key_for(d.args)
            if d.attempt > self._max_attempts(d):
                # Its last attempt already ran (and its DLQ send failed), or a deploy lowered max_attempts:
                # running it again would exceed the job's limit.
                self._dead(d, REASON_EXHAUSTED, RetryableError(
                    f"attempt {d.attempt} is past the job's max_attempts={self._max_attempts(d)}"))
        except MalformedMessageError as error:
            d.malformed = error
        except (UnknownJobError, InvalidArgumentsError) as error:
            d.malformed = MalformedMessageError(f"{type(error).__name__}: {error}")
        except RetryableError as error:  # a newer job_version than this deploy knows
            # The job's backoff, not an immediate redelivery that would burn every attempt
            # before the deploy lands; the last attempt dead-letters with its reason.
            self._retry(d, error)
        except Exception as error:  # an upcaster that raised is user code failing on this body
            d.malformed = MalformedMessageError(f"{type(error).__name__} while decoding: {error}")

    def _claim(self, deliveries: Sequence[Delivery], owner: str, context: Any) -> dict[str, Delivery]:
        """Claim each distinct key once; later records with the same key follow the first."""
        first_of_key: dict[str, Delivery] = {}
        now = self.clock()
        remaining = remaining_seconds(context)
        if remaining is not None and remaining < self.settings.deadline_margin:
            return first_of_key  # nothing will start; _run_all marks them unstarted
        lease_until = now + (remaining if remaining is not None else self._default_lease()) + self.settings.lease_margin
        to_claim: list[Delivery] = []
        for d in deliveries:
            if d.malformed or d.outcome is not None or d.job is None:
                continue
            if d.key in first_of_key:
                continue
            first_of_key[d.key] = d
            to_claim.append(d)
        expires_at = lease_until + self.settings.record_ttl
        requests = [ClaimRequest(key=d.key, job=d.job_name, owner=owner, now=now, lease_until=lease_until,
                                 expires_at=expires_at) for d in to_claim]
        for d, claim in zip(to_claim, self.store.claim_many(requests), strict=True):
            if claim.state is ClaimState.CLAIMED:
                d.claimed = True
            elif claim.state is ClaimState.COMPLETED:
                d.outcome = Outcome.DUPLICATE
            elif claim.state is ClaimState.BUSY:
                wait = (claim.lease_until or now) - now
                self._retry(d, RetryableError(f"key {d.key!r} is being processed by another invocation",
                                              delay=min(max(wait + 1.0, 1.0), 43_200)))
                d.notes.append("lease held elsewhere")
            else:
                self._retry(d, RetryableError(f"idempotency store unavailable: {claim.error}"))
        return first_of_key

    def _run_all(self, deliveries: Sequence[Delivery], first_of_key: dict[str, Delivery], context: Any) -> None:
        failed_groups: set[str] = set()
        for d in deliveries:
            if d.group_id is not None and d.group_id in failed_groups and d.outcome is None:
                # FIFO order: nothing after a failed record of the same group may run first.
                d.outcome = Outcome.GROUP_BLOCKED
                d.delay = 0
                continue
            if d.malformed is not None:
                self._dead(d, REASON_MALFORMED, d.malformed)
            elif d.outcome is None and first_of_key.get(d.key) is d:
                if d.claimed and self._time_left(context):
                    self._execute(d)
                else:
                    d.outcome = Outcome.UNSTARTED
                    d.delay = 0
            elif d.outcome is None and d.key not in first_of_key:
                d.outcome = Outcome.UNSTARTED  # the batch began too close to the deadline to claim anything
                d.delay = 0
            # (a later copy of a key in this batch is resolved in _share_outcomes)
            if d.group_id is not None and d.outcome in (Outcome.RETRY, Outcome.UNSTARTED, Outcome.GROUP_BLOCKED):
                failed_groups.add(d.group_id)

    def _execute(self, d: Delivery) -> None:
        assert d.job is not None and d.args is not None
        job = d.job
        token = set_trace_id(d.trace_id or d.message_id)
        fields = self._fields(d)
        # The job's own log lines through app.logger carry the same fields.
        self.log.append_keys(**fields)
        started = time.perf_counter()
        try:
            d.result = run_with_time_limit(job.fn, d.args, job.options.time_limit, job.name)
        except Exception as error:
            d.duration_ms = (time.perf_counter() - started) * 1000
            d.error = error
            if job.options.classify(error) == "permanent":
                self._dead(d, REASON_PERMANENT, error)
            else:
                self._retry(d, error)
            self.log.warning("job failed", extra={"error": f"{type(error).__name__}: {error}",
                                                 "outcome": d.outcome.value if d.outcome else None})
        else:
            d.duration_ms = (time.perf_counter() - started) * 1000
            d.outcome = Outcome.SUCCEEDED
            self.log.debug("job succeeded", extra={"duration_ms": round(d.duration_ms, 3)})
        finally:
            self.log.remove_keys(list(fields))
            reset_trace_id(token)

    def _retry(self, d: Delivery, error: BaseException) -> None:
        """Retry after a full-jitter delay, unless this was the last attempt."""
        d.error = error
        if d.attempt >= self._max_attempts(d):
            self._dead(d, REASON_EXHAUSTED, error)
            return
        backoff = d.job.options.backoff if d.job else self.default_backoff
        # Only our RetryableError chooses its delay: another library's exception may well have a
        # ``delay`` attribute of any type (a method, a string), which must not reach SQS.
        requested = error.delay if isinstance(error, RetryableError) else None
        d.delay = requested if requested is not None else backoff.next_delay(d.attempt, self.random)
        d.outcome = Outcome.RETRY

    def _dead(self, d: Delivery, reason: str, error: BaseException) -> None:
        d.error = error
        d.outcome = Outcome.DEAD_LETTERED
        d.dead_letter = DeadLetter(
            message_id=d.message_id,
            body=d.body or "",
            reason=reason,
            error_type=type(error).__name__,
            error_message=str(error),
            job=d.job_name,
            attempts=d.attempt,
            first_receive_time=d.first_receive_ms,
            source_queue=self._queue_url(d),
            source_attributes=d.message_attributes,
            group_id=d.group_id,
        )

    def _finish(self, deliveries: Sequence[Delivery], owner: str) -> tuple[int, int]:
        now = self.clock()
        finishes: list[Finish] = []
        finished: list[Delivery] = []
        for d in deliveries:
            if not d.claimed:
                continue
            complete = d.outcome is Outcome.SUCCEEDED
            finishes.append(Finish(key=d.key, owner=owner, complete=complete,
                                   expires_at=now + self.settings.record_ttl))
            finished.append(d)
        fence_lost = store_errors = 0
        for d, result in zip(finished, self.store.finish_many(finishes), strict=True):
            if not result.fenced:
                fence_lost += 1
                self.log.warning("fence lost: the lease expired and another invocation took the key over",
                                 extra={**self._fields(d), "complete": result.complete})
            elif result.error:
                store_errors += 1
                self.log.error("could not record the job's end; the lease bounds the damage",
                               extra={**self._fields(d), "error": result.error, "complete": result.complete})
        return fence_lost, store_errors

    def _dead_letter(self, deliveries: Sequence[Delivery]) -> None:
        pending = [d for d in deliveries if d.outcome is Outcome.DEAD_LETTERED and d.dead_letter]
        if not pending:
            return
        dlq_url = self.settings.dlq_url
        if not dlq_url:
            for d in pending:
                self._dlq_failed(d, "no DLQ configured (SQSJOBS_DLQ_URL); the queue's redrive policy will move it")
            return
        from botocore.exceptions import BotoCoreError, ClientError

        fifo = dlq_url.endswith(".fifo")
        for chunk in _chunks(pending, 10):
            entries = [d.dead_letter.entry(str(i), fifo) for i, d in enumerate(chunk) if d.dead_letter]
            try:
                response = self.sqs.send_message_batch(QueueUrl=dlq_url, Entries=entries)  # type: ignore[arg-type]
            except (ClientError, BotoCoreError) as error:
                for d in chunk:
                    self._dlq_failed(d, str(error))
                continue
            for bad in response.get("Failed", []):
                self._dlq_failed(chunk[int(bad["Id"])], f"{bad.get('Code')}: {bad.get('Message')}")
            for d in chunk:
                if d.outcome is Outcome.DEAD_LETTERED:
                    self.log.warning("dead-lettered", extra={**self._fields(d), "reason": d.dead_letter.reason
                                                             if d.dead_letter else None})

    def _dlq_failed(self, d: Delivery, why: str) -> None:
        # Not acknowledged: the message stays on its queue, and the queue's own
        # redrive policy moves it to the DLQ after maxReceiveCount (invariant 1).
        d.outcome = Outcome.RETRY
        backoff = d.job.options.backoff if d.job else self.default_backoff
        d.delay = 0 if d.attempt >= self._max_attempts(d) else backoff.next_delay(d.attempt, self.random)
        d.notes.append(f"DLQ send failed: {why}")
        self.log.error("DLQ send failed; leaving the message on its queue", extra={**self._fields(d), "error": why})

    def _share_outcomes(self, deliveries: Sequence[Delivery], first_of_key: dict[str, Delivery]) -> None:
        newly_dead: list[Delivery] = []
        for d in deliveries:
            first = first_of_key.get(d.key)
            if d.outcome is not None or first is None or first is d:
                continue
            if first.outcome is Outcome.DEAD_LETTERED and first.dead_letter is not None and first.error is not None:
                # The job never completed: this copy is no duplicate of a success. It goes to the DLQ
                # with the same reason (a replay of either copy passes the guard, so one run at most).
                self._dead(d, first.dead_letter.reason, first.error)
                newly_dead.append(d)
            elif first.acknowledged:
                d.outcome = Outcome.DUPLICATE
            elif first.outcome is Outcome.RETRY and first.error is not None:
                # This copy's own receive count decides: its own full-jitter bound, or the DLQ with
                # reasons on its last attempt (sharing the first copy's retry sent it back to the
                # queue, whose redrive policy then moved it without any).
                self._retry(d, first.error)
                if d.outcome is Outcome.DEAD_LETTERED:
                    newly_dead.append(d)
            else:
                d.outcome = first.outcome
                d.delay = first.delay
                d.error = first.error
        self._dead_letter(newly_dead)

    def _set_visibility(self, deliveries: Sequence[Delivery]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        by_queue: dict[str, list[Delivery]] = {}
        for d in deliveries:
            if d.outcome in (Outcome.RETRY, Outcome.UNSTARTED, Outcome.GROUP_BLOCKED):
                by_queue.setdefault(self._queue_url(d), []).append(d)
        for url, items in by_queue.items():
            for chunk in _chunks(items, 10):
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

    # ---------------------------------------------------------------- helpers
    def _count(self, batch: m.BatchMetrics, d: Delivery) -> None:
        job = d.job_name if d.job is not None else m.UNKNOWN_JOB
        if d.duration_ms is not None:
            batch.duration(job, d.duration_ms)
        ran_and_failed = d.error is not None and (d.duration_ms is not None or d.malformed is not None)
        if d.outcome is Outcome.SUCCEEDED:
            batch.count(job, m.SUCCEEDED)
        elif d.outcome is Outcome.DUPLICATE:
            batch.count(job, m.DUPLICATE)
        elif d.outcome is Outcome.RETRY:
            batch.count(job, m.RETRIED)
        elif d.outcome is Outcome.DEAD_LETTERED:
            batch.count(job, m.DEAD_LETTERED)
        if ran_and_failed and d.outcome in (Outcome.RETRY, Outcome.DEAD_LETTERED):
            batch.count(job, m.FAILED)

    def _fields(self, d: Delivery) -> dict[str, Any]:
        # A message sent without a trace id starts a trace named by its message id (what _execute makes current).
        # Job names and keys come from message bodies: a lone surrogate there would make the JSON
        # log line unwritable (logging drops it), so it is logged escaped.
        return {"job": _loggable(d.job_name), "key": _loggable(d.key), "message_id": d.message_id,
                "attempt": d.attempt, "trace_id": d.trace_id or d.message_id}

    def _max_attempts(self, d: Delivery) -> int:
        job_max = d.job.options.max_attempts if d.job else None
        return min(job_max or self.settings.max_attempts, self.settings.max_attempts)

    def _time_left(self, context: Any) -> bool:
        remaining = remaining_seconds(context)
        return remaining is None or remaining >= self.settings.deadline_margin

    def _default_lease(self) -> float:
        return self.settings.function_timeout or 900.0

    def _queue_url(self, d: Delivery) -> str:
        arn = d.event_source_arn
        if not arn:
            return self.settings.queue_url or ""
        url = self._queue_urls.get(arn)
        if url is None:
            url = queue_url_from_arn(arn, self.settings.queue_url, self.sqs.meta.endpoint_url)
            self._queue_urls[arn] = url
        return url


def parse_event(event: Any) -> list[Delivery]:
    """The event's records as deliveries; ``InvalidEventError`` when it is not an SQS batch.

    Example:
        >>> parse_event({"Records": []})
        Traceback (most recent call last):
        ...
        sqsjobs.errors.InvalidEventError: the SQS event has no records (an empty batch is not an SQS event)
    """
    if not isinstance(event, dict):
        raise InvalidEventError(f"handle_batch expects the SQS event (a dict), got {type(event).__name__}")
    records = event.get("Records")
    if not isinstance(records, list):
        raise InvalidEventError("the event has no 'Records' list: is this an SQS event?")
    if not records:
        raise InvalidEventError("the SQS event has no records (an empty batch is not an SQS event)")
    return [Delivery.parse(record, i) for i, record in enumerate(records)]


def remaining_seconds(context: Any) -> float | None:
    """Seconds left in the invocation, or None without a Lambda context."""
    getter = getattr(context, "get_remaining_time_in_millis", None)
    if getter is None:
        return None
    return float(getter()) / 1000.0


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


def _chunks(items: Sequence[Delivery], size: int) -> list[list[Delivery]]:
    return [list(items[i:i + size]) for i in range(0, len(items), size)]
