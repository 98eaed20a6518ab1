"""Steps 5 and 7 of ``Consumer.run`` (``worker/_consumer.py``): what the batch sends, and how each delivery leaves.

What the batch decided is carried out here, and nothing is decided:

- **dead-letter** (step 5, ``dead_letters``) what failed for good: one
  ``SendMessageBatch`` to the DLQ with the worker's reason
  (``worker/_dead_letters.py``), then the records, and the evidence
  ``dlq#<copy id>`` of each letter the DLQ accepted; a letter it refused goes
  back (``settle``, step 6);
- **acknowledge** (step 7, ``run``) what leaves, and **re-send** what must
  not return at its backstop receive (SQS's redrive would move it to the
  DLQ): a fresh copy on its own queue
  (``resend_entry``; one more re-send counted, a deferral not), its redrive
  count carried in the idempotency table (``carry_redrive_counts``);
- **schedule** the retries SQS cannot hold back that long (over 12 hours):
  a one-time schedule re-sends the message at its time
  (``schedules/_one_time.py``), and it is acknowledged once the schedule
  exists;
- **return** the others with their retry delays, one
  ``ChangeMessageVisibilityBatch`` per 10 (full jitter), and with them any
  message whose re-send or schedule failed (12 hours at most).

A *finish copy* is a re-sent success whose completion could not be written:
it carries the lease of the run that succeeded (``sqsjobs.finish``) and its
stored result (``sqsjobs.result``), and its next delivery only writes that
completion (``worker/_job_records.py``'s ``finish_copy``: the claim step's).
Nothing here raises out of a batch for a record's sake: a failed call is
logged and the message comes back.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sqsjobs import _otel
from sqsjobs._backoff import visibility_seconds
from sqsjobs._errors import ConfigurationError, ScheduleError
from sqsjobs.enqueue._batching import batches, send_entries
from sqsjobs.enqueue._delays import retry_schedule_name
from sqsjobs.enqueue._message import (
    ATTR_FINISH,
    ATTR_JOB,
    ATTR_LETTER,
    ATTR_RESENDS,
    ATTR_RESULT,
    ATTR_SLOTS,
    ATTR_TRACE_ID,
    MAX_DELAY_SECONDS,
)
from sqsjobs.store._lease import Written, expiry
from sqsjobs.worker import _job_records as records
from sqsjobs.worker._batch import resends
from sqsjobs.worker._dead_letters import NAMESPACE, DeadLetter, carry_redrive_counts, evidence_of, sqs_attribute
from sqsjobs.worker._decision import Action
from sqsjobs.worker._delivery import Delivery, Outcome, State

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.schedules._one_time import OneTimeSchedules
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._batch import Batch


class SendBack:
    """Sends what a batch sends: its dead letters, re-sends and schedules, and its returns' delays (the consumer
    builds one, and gives it what it needs)."""

    def __init__(
        self,
        *,
        sqs: Callable[[], SQSClient],
        store: LeaseStore,
        clock: Callable[[], float],
        record_ttl: float,
        schedules: Callable[[], OneTimeSchedules] | None,
        queue_url: str | None,
        dlq_url: str | None,
        max_message_bytes: int,
        log: Any,
    ) -> None:
        #: the SQS client, built on first use: a batch of successes never needs one
        self._sqs = sqs
        #: where re-sent messages' redrive counts are carried
        self.store = store
        self.clock = clock
        self.record_ttl = record_ttl
        #: where retries too long for SQS wait (None: no schedule group; they wait 12 hours at most)
        self.schedules = schedules
        #: the configured jobs queue (a record without an event source came from it)
        self.configured_queue_url = queue_url
        #: the queue URL of each event source ARN met so far
        self._queue_urls: dict[str, str] = {}
        self.dlq_url = dlq_url
        #: the queues' MaximumMessageSize: a dead letter's attributes are cut to fit (``DeadLetter.entry``)
        self.max_message_bytes = max_message_bytes
        self.log = log

    @property
    def sqs(self) -> SQSClient:
        """The SQS client (dead letters, re-sends, retry delays)."""
        return self._sqs()

    def dead_letters(self, batch: Batch) -> dict[int, str]:
        """Step 5: send the batch's dead letters, then write their records; the letters the DLQ refused (by index:
        why: they go back, ``worker/_decision.py``'s ``settle``)."""
        pending = [d for d in batch.deliveries if d.action is Action.DEAD_LETTER]
        refused: dict[int, str] = {}
        if not pending:
            return refused
        dlq_url = self.dlq_url
        letters = [self._letter(d) for d in pending]
        sent = send_entries(self.sqs, dlq_url, [
            letter.entry(str(i), dlq_url.endswith(".fifo"), max_bytes=self.max_message_bytes)
            for i, letter in enumerate(letters)]) if dlq_url else {}
        unanswered = "no answer" if dlq_url else "no DLQ configured (SQSJOBS_DLQ_URL)"
        now = self.clock()
        expires_at = expiry(now, self.record_ttl)
        evidence: list[tuple[Delivery, Future[Written]]] = []
        for i, d in enumerate(pending):
            assert d.decision is not None and d.reason is not None and d.error is not None
            answer = sent.get(str(i))
            why = answer.error if answer is not None else unanswered
            if why is not None:
                self.log.error("DLQ send failed; leaving the message on its queue", extra={**d.log_fields,
                                                                                           "error": why})
                refused[d.index] = why
                if d.holds_lease:
                    batch.writes.submit(d, records.retrying(d.key, batch.owner, now=now, expires_at=expires_at,
                                                            error=d.error))
                continue
            d.letter_of = d.message_id  # the DLQ has it: a copy held back for a follow-up is this letter
            self.log.warning("dead-lettered", extra={**d.log_fields, "reason": d.reason.value})
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
                               "as none", extra={**d.log_fields, "error": written.error or "refused"})
        return refused

    def _letter(self, d: Delivery) -> DeadLetter:
        assert d.reason is not None and d.error is not None
        return DeadLetter(
            message_id=d.message_id, body=d.body or "", reason=d.reason, error_type=type(d.error).__name__,
            error_message=str(d.error), job=d.job_name, attempts=d.attempt or d.receive_count,
            first_receive_time=d.first_receive_ms, source_queue=self.queue_url(d),
            source_attributes=d.message_attributes, group_id=d.group_id, key=d.key or None,
        )

    def queue_url(self, d: Delivery) -> str:
        """The queue ``d`` came from (its event source's; the configured queue when the record names none)."""
        arn = d.event_source_arn
        if not arn:
            return self.configured_queue_url or ""
        url = self._queue_urls.get(arn)
        if url is None:
            url = queue_url_from_arn(arn, self.configured_queue_url, self.sqs.meta.endpoint_url)
            self._queue_urls[arn] = url
        return url

    def run(self, batch: Batch) -> None:
        """Step 7: finish every delivery: acknowledge, schedule, re-send, or return it with its delay."""
        for d in batch.deliveries:
            if d.action in (Action.ACK, Action.DEAD_LETTER):
                d.finished()
        scheduling = [d for d in batch.deliveries if d.action is Action.SCHEDULE]
        self._schedule(batch, scheduling)
        resending = [d for d in batch.deliveries if d.action is Action.RESEND]
        self._resend(batch, resending)
        returning = [d for d in batch.deliveries if d.action is Action.RETURN]
        for d in returning:
            d.finished()
        # A message whose re-send or schedule failed goes back too, with its delay (12 hours at most).
        self._set_visibility(returning + [d for d in resending + scheduling if d.state is State.RETURNED])

    def _schedule(self, batch: Batch, deliveries: Sequence[Delivery]) -> None:
        """Re-send each retry through a one-time schedule at its time; acknowledge it once the schedule exists."""
        if not deliveries:
            return
        from sqsjobs.schedules._one_time import DelayedMessage

        assert self.schedules is not None
        schedules = self.schedules()
        now = self.clock()
        for d in deliveries:
            d.to_schedule(retry_schedule_name(d.key or d.message_id, d.message_id))
            assert d.schedule_name is not None
            url = self.queue_url(d)
            try:
                scheduled = schedules.create(DelayedMessage(
                    # a schedule sends no attributes: the message's trace context goes in its body (sqsjobs._otel)
                    name=d.schedule_name, job=d.job_name, key=d.key or d.message_id,
                    body=_otel.body_carrying(d.body or "", _otel.attribute_carrier(d.message_attributes)),
                    due_at=now + d.delay, queue_arn=d.event_source_arn or schedules.queue_arn(url),
                    message_group_id=(d.group_id or d.message_id) if url.endswith(".fifo") else None,
                    purpose=f"retry of message {d.message_id}",
                ))
            except (ScheduleError, ConfigurationError) as error:
                self.log.error("could not schedule a long retry; the message comes back in at most 12 hours",
                               extra={**d.log_fields, "error": str(error)})
                d.finished(sent=False, why=str(error))
                continue
            self.log.info("retry scheduled", extra={**d.log_fields, "schedule": scheduled.name,
                                                    "due": scheduled.due.isoformat()})
            d.finished()

    def _resend(self, batch: Batch, deliveries: Sequence[Delivery]) -> None:
        by_queue: dict[str, list[Delivery]] = {}
        for d in deliveries:
            by_queue.setdefault(self.queue_url(d), []).append(d)
        for url, items in by_queue.items():
            fifo = url.endswith(".fifo")
            entries = [resend_entry(d, str(i), fifo, finish=self._finish_of(batch, d)) for i, d in enumerate(items)]
            sent = send_entries(self.sqs, url, entries)
            now = self.clock()
            new_ids = {d.message_id: answer.message_id for i, d in enumerate(items)
                       if (answer := sent.get(str(i))) is not None and answer.message_id}
            for error in carry_redrive_counts(self.store, new_ids, now=now,
                                              expires_at=expiry(now, self.record_ttl)):
                self.log.error("a re-sent message lost its redrive count", extra={"error": error})
            for i, d in enumerate(items):
                answer = sent.get(str(i))
                why = answer.error if answer is not None else "no answer"
                if why is not None:
                    self.log.error("could not re-send a message", extra={**d.log_fields, "error": why})
                d.finished(sent=why is None, why=why or "")

    def _finish_of(self, batch: Batch, d: Delivery) -> str | None:
        """The lease a re-sent copy finishes: this run's, when its completion could not be written (else a
        finish copy's own, kept)."""
        if d.outcome is Outcome.SUCCEEDED and batch.writes.failure(d) is not None:
            return batch.owner
        return records.finish_token(d)

    def _set_visibility(self, deliveries: Sequence[Delivery]) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        by_queue: dict[str, list[Delivery]] = {}
        for d in deliveries:
            by_queue.setdefault(self.queue_url(d), []).append(d)
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
                                   extra={**chunk[int(bad["Id"])].log_fields, "error": bad.get("Message")})


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
        stored = json.dumps(d.result, separators=(",", ":")) if ran else records.finish_result(d)
        if stored is not None:
            attributes[ATTR_RESULT] = {"DataType": "String", "StringValue": stored}
    letter = d.letter_of or records.letter_of(d)
    if letter is not None:  # a dead letter held back for a follow-up: its copy is that letter, never a new run
        attributes[ATTR_LETTER] = {"DataType": "String", "StringValue": letter}
    reservation = d.decision.reservation if d.decision is not None else None
    if reservation is not None:  # a deferred job's slots (flow/_schedule.py): its next delivery starts at them
        attributes[ATTR_SLOTS] = {"DataType": "String", "StringValue": reservation}
    entry: dict[str, Any] = {"Id": entry_id, "MessageBody": d.body or "", "MessageAttributes": attributes}
    if fifo:
        entry["MessageGroupId"] = d.group_id or d.message_id
        entry["MessageDeduplicationId"] = hashlib.sha256(f"resend:{d.message_id}".encode()).hexdigest()
    else:
        entry["DelaySeconds"] = min(int(d.delay), MAX_DELAY_SECONDS)
        if d.tenant is not None:
            entry["MessageGroupId"] = d.tenant
    return entry


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
