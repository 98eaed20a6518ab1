"""DLQ redrive: send dead letters back to their source queue, through the guard.

A redriven message is one more delivery of the same job: it passes the same
idempotency guard as the first one, so a job that completed meanwhile is
acknowledged as a duplicate and a job that failed runs once more
(docs/runbook.md, "DLQ not empty"). This module only moves bytes; it never runs a job.

What it must never do:

- delete a message from the DLQ before its send to the source queue succeeded
  (an interruption at any point leaves each message in the DLQ, in the source
  queue, or in both, and a re-run continues; "both" is the duplicate the guard
  absorbs);
- call AWS at import (clients are injected);
- leave a message it did not move hidden until its visibility timeout expires;
- believe a letter's ``sqsjobs.*`` attributes: its reason and its redrive
  count come from the idempotency table (the worker's evidence, and the
  ``redrive#<id>`` item this module writes for every message it sends back,
  before it deletes the letter; :mod:`sqsjobs.ops._dlq_evidence`).

:class:`Redrive` receives, filters, sends and deletes (``sqsjobs redrive``
and ``handlers/redrive.py``); SQS's own message move task, faster but unable
to filter, is in :mod:`sqsjobs.ops._redrive_native`. What a DLQ message says is
read by :mod:`sqsjobs.ops._dlq_letters`; queues are found by :mod:`sqsjobs.ops._queues`.

Error tree additions (all under :class:`sqsjobs.SqsJobsError`)::

    SqsJobsError
    ├── RedriveError                  bad redrive options (this module)
    ├── QueueNotFoundError (LookupError)  a URL, ARN or name leads to no queue (queues)
    ├── MoveTaskError                 no running message move task to cancel (redrive_native)
    └── StatusError                   status cannot tell which queues to read (status)
"""

from __future__ import annotations

import math
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS
from sqsjobs._errors import RedriveError, SqsJobsError
from sqsjobs._settings import DEFAULT_RECORD_TTL, ENV_DLQ_URL, ENV_QUEUE_URL, ENV_RECORD_TTL
from sqsjobs.enqueue._batching import SQS_MAX_BYTES, SQS_MAX_ENTRIES, batches
from sqsjobs.ops._dlq_evidence import read_letters
from sqsjobs.ops._dlq_letters import MAX_MESSAGE_ATTRIBUTES, DlqMessage, dedup_id, ignored_line, resend_attributes
from sqsjobs.ops._queues import queue_depth, queue_name, resolve_queue_url
from sqsjobs.ops._redrive_native import cancel_native_redrive, native_redrive_status, start_native_redrive
from sqsjobs.ops._redrive_report import (
    LetterNote,
    NoteKind,
    PlannedMove,
    RedriveSummary,
    SkipReason,
    StopReason,
)
from sqsjobs.ops._redrive_targets import RedriveTargets
from sqsjobs.store._lease import expiry
from sqsjobs.worker._budget import remaining_seconds
from sqsjobs.worker._dead_letters import redrive_record

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping, Sequence

    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        DeleteMessageBatchRequestEntryTypeDef,
        MessageTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )

    from sqsjobs.store._lease import LeaseStore

__all__ = [
    "LetterNote",
    "NoteKind",
    "PlannedMove",
    "Redrive",
    "RedriveOptions",
    "RedriveSummary",
    "SkipReason",
    "StopReason",
    "handle_redrive_event",
    "options_from_event",
    "record_ttl_from",
    "redrive",
    "refuse_filters_for_native",
]

# SQS batch APIs take at most 10 entries.
BATCH_SIZE: Final = SQS_MAX_ENTRIES
# A batch's total payload limit: SendMessageBatch's 1 MiB (each letter is within its DLQ's MaximumMessageSize).
BATCH_BYTES: Final = SQS_MAX_BYTES
# Consecutive receives that return only messages already seen in this run:
# the DLQ has been scanned (what is left is hidden by us or by someone else).
STALE_ROUNDS: Final = 3

# SQS error codes that mean "try later", not "this target is unreachable".
TRANSIENT_CODES: Final = frozenset({"RequestThrottled", "Throttling", "ThrottlingException", "ServiceUnavailable",
                                    "InternalError", "InternalFailure", "RequestTimeout"})
# How many dry-run lines and notes the Lambda returns (the rest are counted).
LAMBDA_PLANNED_LINES: Final = 100
DAY: Final = 86400.0


@dataclass(frozen=True, kw_only=True)
class RedriveOptions:
    """What to redrive, where to, and how fast.

    Targets: ``to`` (the operator's) wins; otherwise a letter goes to one of
    the DLQ's source queues (``ListDeadLetterSourceQueues``), the one its
    worker-written ``sqsjobs.source_queue`` names, else the only one, else
    ``default_to`` (the Lambda's ``SQSJOBS_QUEUE_URL``) when it is one of them
    (:mod:`sqsjobs.ops._redrive_targets`). ``record_ttl`` is how long idempotency
    records live (``SQSJOBS_RECORD_TTL_SECONDS``): older letters are counted
    and noted, because a replay may run a job that completed meanwhile.

    Example:
        >>> RedriveOptions(dlq="jobs-dlq", job="invoice-email", max_messages=100).rate is None
        True
    """

    dlq: str
    to: str | None = None
    default_to: str | None = None
    job: str | None = None
    error_type: str | None = None
    max_messages: int | None = None
    rate: float | None = None
    dry_run: bool = False
    force: bool = False
    max_redrives: int = 3
    malformed: Literal["move", "skip"] = "move"
    visibility_timeout: int = 60
    wait_time_seconds: int = 1
    stop_margin_seconds: float = 10.0
    record_ttl: float = DEFAULT_RECORD_TTL

    def __post_init__(self) -> None:
        if not self.dlq:
            raise RedriveError("a DLQ is required: pass --dlq URL_OR_NAME (or SQSJOBS_DLQ_URL)")
        if self.max_messages is not None and self.max_messages < 1:
            raise RedriveError(f"max_messages must be >= 1, got {self.max_messages}")
        if self.rate is not None and self.rate <= 0:
            raise RedriveError(f"rate must be > 0 messages per second, got {self.rate}")
        if self.max_redrives < 0:
            raise RedriveError(f"max_redrives must be >= 0, got {self.max_redrives}")
        if self.malformed not in ("move", "skip"):
            raise RedriveError(f"malformed must be 'move' or 'skip', got {self.malformed!r}")
        if not 0 <= self.wait_time_seconds <= 20:
            raise RedriveError(f"wait_time_seconds must be 0..20, got {self.wait_time_seconds}")
        if not 1 <= self.visibility_timeout <= MAX_VISIBILITY_SECONDS:
            raise RedriveError(f"visibility_timeout must be 1..{MAX_VISIBILITY_SECONDS}, got {self.visibility_timeout}")
        if not self.record_ttl > 0 or math.isinf(self.record_ttl):
            raise RedriveError(f"record_ttl must be a positive number of seconds, got {self.record_ttl}")

    @property
    def has_filters(self) -> bool:
        """True when a filter or a per-message decision needs the client-side engine."""
        return bool(self.job or self.error_type or self.max_messages or self.dry_run)


@dataclass
class _Held:
    """A received message this run is responsible for until it is deleted or released."""

    message: MessageTypeDef
    letter: DlqMessage
    target: str | None = None
    #: other DLQ copies of the same original message, deleted once this one is sent
    copies: list[_Held] = field(default_factory=list)
    #: the redrive count the message sent back carries (set when its entry is built)
    count: int = 0


class Redrive:
    """Receive from a DLQ, filter, send back to a source queue, delete after the send.

    Messages that do not move (filtered, poison, dry run) stay hidden only
    while the scan runs, then go back to visible with one
    ``ChangeMessageVisibilityBatch`` per 10. Releasing each one at once would
    hand it straight back to the next receive, and the scan would never reach
    the messages behind it. The visibility timeout bounds the hiding even if
    this process dies.

    Copies of one dead letter (the same original message, as their evidence
    says: an acknowledgement lost after the DLQ send) move once; the other
    copies are deleted after that send succeeded. With ``records`` (the
    idempotency table) a letter's reason and redrive count are the table's,
    and each message sent back gets its count there before its letter is
    deleted; without it they are the letters' own claims, unverified, and the
    summary says so (:attr:`RedriveSummary.unverified`).

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq, jobs = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("jobs-dlq", "jobs"))
        ...     for job in ("invoice-email", "sync"):
        ...         _ = sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"job": job, "key": f"{job}:1"}))
        ...     opts = RedriveOptions(dlq="jobs-dlq", to="jobs", job="invoice-email", dry_run=True, wait_time_seconds=0)
        ...     sorted((p.job, p.action) for p in Redrive(opts, sqs_client=sqs).run().planned)
        [('invoice-email', 'move'), ('sync', 'skip:filtered')]
    """

    def __init__(
        self,
        options: RedriveOptions,
        *,
        sqs_client: SQSClient,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
        remaining_time: Callable[[], float] | None = None,
        on_progress: Callable[[RedriveSummary], None] | None = None,
        records: LeaseStore | None = None,
    ) -> None:
        self.options = options
        #: the idempotency table: evidence and redrive counts, cancelled keys (None: letters unverified)
        self._records = records
        self._unverified: str | None = None
        self._counts_unrecorded = 0
        self._sqs = sqs_client
        self._clock = clock
        self._sleep = sleep
        self._remaining_time = remaining_time
        self._on_progress = on_progress
        self._dlq_url = ""
        self._targets: RedriveTargets | None = None
        self._held: dict[str, _Held] = {}
        self._seen: set[str] = set()
        # Ids SQS gave the messages this run sent: a dead letter that names one
        # (its evidence's original id, or the same id when SQS's own redrive
        # policy moved it) failed again during this run.
        self._sent_ids: set[str] = set()
        # Original message ids of letters this run sent back (in a dry run: would):
        # another DLQ copy of one of them is a duplicate to delete, not to send.
        self._replayed: set[str] = set()
        # Letters decided in the current round, by original id, until their send.
        self._pending: dict[str, _Held] = {}
        self._skipped: Counter[str] = Counter()
        self._planned: list[PlannedMove] = []
        self._notes: list[LetterNote] = []
        self._moved = 0
        self._matched = 0
        self._failed = 0
        self._delete_failed = 0
        self._duplicates = 0
        self._older = 0
        self._malformed_attributes = 0
        self._sent_total = 0
        self._started = 0.0
        self._left: int | None = None
        self._stopped: StopReason = "running"
        self._error: str | None = None

    def summary(self) -> RedriveSummary:
        """The counts so far (also valid after an interrupted :meth:`run`)."""
        return RedriveSummary(
            dlq_url=self._dlq_url or self.options.dlq,
            dry_run=self.options.dry_run,
            moved=self._moved,
            matched=self._matched,
            skipped=dict(self._skipped),
            failed=self._failed,
            delete_failed=self._delete_failed,
            duplicates=self._duplicates,
            older_than_record_ttl=self._older,
            malformed_attributes=self._malformed_attributes,
            counts_unrecorded=self._counts_unrecorded,
            unverified=self._unverified,
            record_ttl=self.options.record_ttl,
            target_errors=dict(self._targets.unreachable) if self._targets else {},
            left=self._left,
            stopped=self._stopped,
            error=self._error,
            planned=tuple(self._planned),
            notes=tuple(self._notes),
        )

    def run(self) -> RedriveSummary:
        """Redrive until drained, scanned, ``max_messages``, the deadline, or an AWS error.

        AWS errors end the run with ``stopped="error"`` and the message in
        ``error``, except a target that refuses a send: its letters stay in
        the DLQ (counted as failed, with notes) and the run goes on.
        KeyboardInterrupt releases what this run holds and propagates (read
        :meth:`summary` for the counts).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        self._started = self._clock()
        try:
            self._dlq_url = resolve_queue_url(self._sqs, self.options.dlq)
            to_url = resolve_queue_url(self._sqs, self.options.to) if self.options.to else None
            self._targets = RedriveTargets(self._sqs, self._dlq_url, to=to_url, default_to=self.options.default_to)
            self._stopped = self._loop()
        except (BotoCoreError, ClientError) as exc:
            self._stopped = "error"
            self._error = f"{type(exc).__name__}: {exc}"
        except SqsJobsError as exc:
            self._stopped = "error"
            self._error = str(exc)
            raise
        except BaseException:
            self._stopped = "interrupted"
            raise
        finally:
            self._release_all()
            self._left = self._depth()
        return self.summary()

    # -- the loop ---------------------------------------------------------

    def _loop(self) -> StopReason:
        stale = 0
        while True:
            remaining = self._remaining_quota()
            if remaining == 0:
                return "max"
            if self._deadline_near():
                return "deadline"
            messages = self._receive(min(remaining, self._receive_size()))
            if not messages:
                return "drained"
            fresh = [m for m, letter in zip(messages, self._read(messages), strict=True) if self._admit(m, letter)]
            stale = 0 if fresh else stale + 1
            if stale >= STALE_ROUNDS:
                return "scanned"
            self._pending = {}
            to_send = [held for held in map(self._decide, fresh) if held is not None]
            finished = self._send_all(to_send)
            self._report()
            if not finished:
                return "deadline"

    def _remaining_quota(self) -> int:
        if self.options.max_messages is None:
            return BATCH_SIZE
        return max(0, self.options.max_messages - self._matched)

    def _deadline_near(self, wait: float = 0.0) -> bool:
        if self._remaining_time is None:
            return False
        return self._remaining_time() - wait < self.options.stop_margin_seconds

    def _receive_size(self) -> int:
        # Under a slow rate, take no more than can be sent within half the
        # visibility timeout: a receipt handle that expires while its message
        # waits for its turn would let the message reappear in the DLQ mid-send.
        if self.options.rate is None:
            return BATCH_SIZE
        return max(1, min(BATCH_SIZE, math.floor(self.options.rate * self.options.visibility_timeout / 2)))

    def _receive(self, count: int) -> list[MessageTypeDef]:
        response = self._sqs.receive_message(
            QueueUrl=self._dlq_url,
            MaxNumberOfMessages=count,
            WaitTimeSeconds=self.options.wait_time_seconds,
            VisibilityTimeout=self.options.visibility_timeout,
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
        )
        return response.get("Messages", [])

    def _read(self, messages: Sequence[MessageTypeDef]) -> tuple[DlqMessage, ...]:
        """The round's letters, checked against the table (two batched reads); unverified without it."""
        reading = read_letters(messages, records=self._records, now=self._clock())
        if reading.note is not None and self._unverified is None:
            self._unverified = reading.note
        return reading.letters

    def _admit(self, message: MessageTypeDef, letter: DlqMessage) -> bool:
        """Hold ``message``; True when this run has not seen it before."""
        message_id = message.get("MessageId", "")
        if message_id in self._seen:
            # Its visibility ran out during a long scan and it came back: keep
            # the newest receipt handle so the release at the end still works.
            if message_id in self._held:
                self._held[message_id].message = message
            else:
                self._held[message_id] = _Held(message, letter)
            return False
        self._seen.add(message_id)
        self._held[message_id] = _Held(message, letter)
        return True

    def _decide(self, message: MessageTypeDef) -> _Held | None:
        """Return the held entry when it should be sent now; else record why not."""
        held = self._held[message.get("MessageId", "")]
        letter = held.letter
        self._note_attributes(letter)
        if self._is_copy(held):
            return None
        skip = self._skip_reason(letter)
        target = None
        if skip is None:
            assert self._targets is not None  # set by run() before the loop
            target, skip = self._targets.choose(letter)
            if skip is not None:
                detail = self._targets.skip_detail(letter, skip)
                if detail is not None:
                    kind = NoteKind.NOT_A_SOURCE if skip is SkipReason.NOT_A_SOURCE else NoteKind.TARGET_UNREACHABLE
                    self._note(letter, kind, detail)
            elif len(resend_attributes(message, redrive_count=0)) > MAX_MESSAGE_ATTRIBUTES:
                skip = SkipReason.TOO_MANY_ATTRIBUTES
        if skip is not None:
            self._skipped[skip] += 1
            if self.options.dry_run:
                self._planned.append(_plan(letter, f"skip:{skip}", None))
            return None
        self._matched += 1
        held.target = target
        self._check_age(letter)
        self._pending[letter.copy_of] = held
        if self.options.dry_run:
            self._planned.append(_plan(letter, "move", target))
            self._replayed.add(letter.copy_of)
            return None
        return held

    def _is_copy(self, held: _Held) -> bool:
        """True when ``held`` is another DLQ copy of a letter this run sends (or sent) back."""
        original = held.letter.copy_of
        twin = self._pending.get(original)
        if original not in self._replayed and twin is None:
            return False
        if self.options.dry_run:
            self._duplicates += 1
            self._planned.append(_plan(held.letter, "delete:duplicate", None))
        elif twin is not None:
            twin.copies.append(held)  # deleted after its twin's send succeeded
        else:
            self._delete([held], copies=True)  # its twin was sent back in an earlier round
        return True

    def _skip_reason(self, letter: DlqMessage) -> SkipReason | None:
        opts = self.options
        if self._sent_ids and {letter.message_id, letter.copy_of, letter.original_message_id} & self._sent_ids:
            # A live worker can fail and dead-letter a replay within seconds;
            # moving it again in the same run would spin it through the queue
            # until the poison guard stops it.
            return SkipReason.FAILED_AGAIN
        if not letter_matches(letter, job=opts.job, error_type=opts.error_type):
            return SkipReason.FILTERED
        if letter.malformed and opts.malformed == "skip":
            return SkipReason.MALFORMED
        if self._cancelled(letter):
            return SkipReason.CANCELLED
        if opts.force:
            return None
        if letter.redrive_count is None:
            return SkipReason.POISON_SUSPECT
        if letter.redrive_count >= opts.max_redrives:
            return SkipReason.POISON
        return None

    def _cancelled(self, letter: DlqMessage) -> bool:
        """The letter's key was cancelled: its job record says so (one read per letter with a key)."""
        if self._records is None or letter.key is None:
            return False
        from sqsjobs._errors import StoreError
        from sqsjobs.store._lease import LeaseState, is_reserved
        from sqsjobs.worker._job_records import JobState

        if is_reserved(letter.key):
            return False
        try:
            record = self._records.get(letter.key)
        except StoreError as error:
            self._note(letter, NoteKind.RECORD_UNREADABLE, f"its key's record could not be read: {error}")
            return False
        return (record is not None and record.state is LeaseState.DONE
                and record.get("outcome") == JobState.CANCELLED.value)

    # -- notes ------------------------------------------------------------

    def _note(self, letter: DlqMessage, kind: NoteKind, detail: str) -> None:
        self._notes.append(LetterNote(message_id=letter.original_message_id, job=letter.job, kind=kind,
                                      detail=detail))

    def _note_attributes(self, letter: DlqMessage) -> None:
        if letter.bad_attributes:
            self._malformed_attributes += 1
        for problem in letter.bad_attributes:
            detail = problem.line()
            if letter.poison_suspect and problem.name.endswith("redrive_count"):
                detail += " (poison-suspect: stays unless --force)"
            self._note(letter, NoteKind.MALFORMED_ATTRIBUTE, detail)
        if letter.ignored_attributes:
            self._note(letter, NoteKind.UNTRUSTED_ATTRIBUTE, ignored_line(letter))

    def _check_age(self, letter: DlqMessage) -> None:
        age = letter.delivery_age_seconds
        if age is None or age <= self.options.record_ttl:
            return
        self._older += 1
        self._note(letter, NoteKind.OLDER_THAN_RECORD_TTL,
                   f"first delivered {age / DAY:.1f} days ago, longer than idempotency records live "
                   f"({self.options.record_ttl / DAY:g} days): if the job completed meanwhile, this replay runs "
                   "it again")

    # -- sending ----------------------------------------------------------

    def _send_all(self, to_send: Sequence[_Held]) -> bool:
        """Send in paced chunks; False when the deadline stopped it (the rest stay held, then released)."""
        by_target: dict[str, list[_Held]] = {}
        for held in to_send:
            by_target.setdefault(held.target or "", []).append(held)
        chunks = [(target, chunk) for target, group in by_target.items()
                  for chunk in batches(group, max_items=self._chunk_size(), max_bytes=BATCH_BYTES,
                                       size_of=_entry_bytes)]
        for index, (target, chunk) in enumerate(chunks):
            assert self._targets is not None
            if target in self._targets.unreachable:
                self._give_up(target, chunk)
                continue
            wait = self._pace_wait()
            if self._deadline_near(wait):
                # Not sent, so not matched after all: they go back with the rest.
                self._matched -= sum(len(unsent) for _, unsent in chunks[index:])
                return False
            if wait > 0:
                self._sleep(wait)
            self._send_chunk(target, chunk)
        return True

    def _chunk_size(self) -> int:
        # Bursts are at most one second's worth of the rate limit.
        if self.options.rate is None:
            return BATCH_SIZE
        return max(1, min(BATCH_SIZE, math.floor(self.options.rate)))

    def _pace_wait(self) -> float:
        if self.options.rate is None:
            return 0.0
        due = self._started + self._sent_total / self.options.rate
        return max(0.0, due - self._clock())

    def _send_chunk(self, target: str, chunk: Sequence[_Held]) -> None:
        from botocore.exceptions import ClientError

        fifo = target.endswith(".fifo")
        entries = [self._send_entry(str(i), held, fifo=fifo) for i, held in enumerate(chunk)]
        # Counted before the call: an exception below ends the run, and pacing
        # must not let a retry burst past the rate.
        self._sent_total += len(entries)
        try:
            response = self._sqs.send_message_batch(QueueUrl=target, Entries=entries)
        except ClientError as exc:
            if _transient(exc):
                raise  # SQS itself is throttling or failing: stop, a re-run continues
            # This target refused (deleted, no permission, KMS): its letters stay, the others still move.
            assert self._targets is not None
            self._targets.mark_unreachable(target, f"{type(exc).__name__}: {exc}")
            self._failed += len(chunk)
            for held in chunk:
                self._note(held.letter, NoteKind.TARGET_UNREACHABLE,
                           f"send to {queue_name(target)} failed: {self._targets.unreachable[target]}")
            self._release(_with_copies(chunk))
            return
        sent = [(chunk[int(entry["Id"])], entry["MessageId"]) for entry in response.get("Successful", [])]
        self._sent_ids.update(message_id for _, message_id in sent)
        self._replayed.update(held.letter.copy_of for held, _ in sent)
        failed = response.get("Failed", [])
        self._failed += len(failed)
        if failed:
            # Not deleted, so still in the DLQ; release now so a re-run finds it.
            self._release(_with_copies([chunk[int(entry["Id"])] for entry in failed]))
        counted = self._record_counts(sent)
        self._delete(counted)
        self._delete([copy for held in counted for copy in held.copies], copies=True)

    def _record_counts(self, sent: Sequence[tuple[_Held, str]]) -> list[_Held]:
        """Write each sent message's redrive count (``redrive#<its new id>``); the letters whose count is kept.

        A letter whose count could not be written stays in the DLQ (released):
        deleting it would lose the count the poison guard stops a loop with.
        Its sent copy runs through the guard; a later redrive moves the letter
        again, and the guard absorbs that duplicate.
        """
        if self._records is None or not sent:
            return [held for held, _ in sent]
        now = self._clock()
        expires_at = expiry(now, self.options.record_ttl)
        written = self._records.write_many([
            redrive_record(message_id, count=held.count, redriven_from=held.letter.copy_of, job=held.letter.job,
                           now=now, expires_at=expires_at) for held, message_id in sent])
        kept, unrecorded = [], []
        for (held, _), answer in zip(sent, written, strict=True):
            if answer.ok:
                kept.append(held)
                continue
            unrecorded.append(held)
            self._note(held.letter, NoteKind.COUNT_UNRECORDED,
                       f"sent back, but its redrive count could not be written ({answer.error or 'refused'}): "
                       "it stays in the DLQ; run again (the guard absorbs the duplicate)")
        self._counts_unrecorded += len(unrecorded)
        self._release(_with_copies(unrecorded))
        return kept

    def _give_up(self, target: str, chunk: Sequence[_Held]) -> None:
        """Leave ``chunk`` in the DLQ: its target refused an earlier send of this run."""
        assert self._targets is not None
        self._matched -= len(chunk)
        self._skipped[SkipReason.TARGET_UNREACHABLE] += len(chunk)
        for held in chunk:
            self._note(held.letter, NoteKind.TARGET_UNREACHABLE, self._targets.refusal(target))
        self._release(_with_copies(chunk))

    def _send_entry(self, entry_id: str, held: _Held, *, fifo: bool) -> SendMessageBatchRequestEntryTypeDef:
        message, letter = held.message, held.letter
        count = held.count = self._next_redrive_count(letter)
        entry: SendMessageBatchRequestEntryTypeDef = {
            "Id": entry_id,
            "MessageBody": message.get("Body", ""),
            "MessageAttributes": resend_attributes(message, redrive_count=count),
        }
        if fifo:
            # The group keeps per-entity ordering; a message from a standard DLQ
            # has none, and its job name is the closest stand-in.
            entry["MessageGroupId"] = message.get("Attributes", {}).get("MessageGroupId") or letter.job
            entry["MessageDeduplicationId"] = dedup_id(message, count, original_message_id=letter.copy_of)
        return entry

    def _next_redrive_count(self, letter: DlqMessage) -> int:
        # An unreadable count moved with --force starts again at the limit: the
        # guard stops it next time unless forced once more.
        if letter.redrive_count is None:
            return self.options.max_redrives
        return letter.redrive_count + 1

    def _delete(self, sent: Sequence[_Held], *, copies: bool = False) -> None:
        if not sent:
            return
        entries: list[DeleteMessageBatchRequestEntryTypeDef] = [
            {"Id": str(i), "ReceiptHandle": held.message.get("ReceiptHandle", "")}
            for i, held in enumerate(sent)
        ]
        response = self._sqs.delete_message_batch(QueueUrl=self._dlq_url, Entries=entries)
        for entry in response.get("Successful", []):
            held = sent[int(entry["Id"])]
            self._held.pop(held.letter.message_id, None)
            if copies:
                self._duplicates += 1
            else:
                self._moved += 1
        # Sent but still in the DLQ: a re-run sends it again, and the guard
        # absorbs that duplicate. Counted so the operator sees it.
        self._delete_failed += len(response.get("Failed", []))

    # -- releasing and reporting -----------------------------------------

    def _release(self, entries: Iterable[_Held]) -> None:
        for chunk in batches(entries, max_bytes=BATCH_BYTES, size_of=_entry_bytes):
            self._sqs.change_message_visibility_batch(
                QueueUrl=self._dlq_url,
                Entries=[
                    {"Id": str(i), "ReceiptHandle": held.message.get("ReceiptHandle", ""),
                     "VisibilityTimeout": 0}
                    for i, held in enumerate(chunk)
                ],
            )
            for held in chunk:
                self._held.pop(held.letter.message_id, None)

    def _release_all(self) -> None:
        """Make every message this run still holds visible again (best effort)."""
        if not self._held or not self._dlq_url:
            return
        try:
            self._release(list(self._held.values()))
        except Exception as exc:  # the connection may be what failed; their timeout still runs out
            if self._error is None:
                self._error = f"release failed ({type(exc).__name__}: {exc}); held messages reappear after "
                self._error += f"their visibility timeout ({self.options.visibility_timeout}s)"

    def _depth(self) -> int | None:
        if not self._dlq_url:
            return None
        try:
            return queue_depth(self._sqs, self._dlq_url)
        except Exception:  # a summary without "left" beats no summary after a lost connection
            return None

    def _report(self) -> None:
        if self._on_progress is not None:
            self._on_progress(self.summary())


def letter_matches(letter: DlqMessage, *, job: str | None, error_type: str | None) -> bool:
    """True when ``letter`` passes the ``--job`` and ``--error`` filters (error: its error type or its reason).

    Example:
        >>> msg = {"MessageId": "m", "Body": '{"job": "a"}', "MessageAttributes": {
        ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "exhausted"}}}
        >>> letter = DlqMessage.from_message(msg, now=0.0)
        >>> letter_matches(letter, job="a", error_type="exhausted"), letter_matches(letter, job="b", error_type=None)
        (True, False)
    """
    if job is not None and letter.job != job:
        return False
    return error_type is None or error_type in (letter.error_type, letter.reason)


def redrive(
    options: RedriveOptions,
    *,
    sqs_client: SQSClient,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    remaining_time: Callable[[], float] | None = None,
    records: LeaseStore | None = None,
) -> RedriveSummary:
    """Run one redrive and return its summary; with ``records``, letters whose key was cancelled stay.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq, jobs = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("jobs-dlq", "jobs"))
        ...     for job in ("invoice-email", "sync"):
        ...         _ = sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"job": job, "key": f"{job}:1"}))
        ...     opts = RedriveOptions(dlq="jobs-dlq", to="jobs", job="sync", wait_time_seconds=0)
        ...     summary, moved = redrive(opts, sqs_client=sqs), sqs.receive_message(QueueUrl=jobs)["Messages"]
        ...     summary.moved, summary.left, [json.loads(m["Body"])["job"] for m in moved]
        (1, 1, ['sync'])
    """
    engine = Redrive(options, sqs_client=sqs_client, clock=clock, sleep=sleep, remaining_time=remaining_time,
                     records=records)
    return engine.run()


# -- message helpers -----------------------------------------------------------


def _plan(letter: DlqMessage, action: str, target: str | None) -> PlannedMove:
    return PlannedMove(
        message_id=letter.original_message_id,
        job=letter.job,
        reason=letter.reason,
        error_type=letter.error_type,
        age_seconds=letter.age_seconds,
        redrive_count=letter.redrive_count,
        action=action,
        target=target,
        verified=letter.verified,
    )


def _transient(error: Any) -> bool:
    """True for an SQS error that says "later" (throttling, a server fault), not "never to this queue".

    Example:
        >>> from botocore.exceptions import ClientError
        >>> _transient(ClientError({"Error": {"Code": "RequestThrottled"}}, "SendMessageBatch"))
        True
        >>> _transient(ClientError({"Error": {"Code": "AWS.SimpleQueueService.NonExistentQueue"},
        ...                         "ResponseMetadata": {"HTTPStatusCode": 400}}, "SendMessageBatch"))
        False
    """
    response = getattr(error, "response", {}) or {}
    code = str(response.get("Error", {}).get("Code", ""))
    status = response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
    return code.rsplit(".", 1)[-1] in TRANSIENT_CODES or (isinstance(status, int) and status >= 500)


def _with_copies(entries: Iterable[_Held]) -> list[_Held]:
    """``entries`` and the DLQ copies attached to them (released together when a send fails)."""
    return [item for held in entries for item in (held, *held.copies)]


def _entry_bytes(held: _Held) -> int:
    size = len(held.message.get("Body", "").encode())
    for name, value in held.message.get("MessageAttributes", {}).items():
        size += len(name) + len(value.get("DataType", "")) + len(value.get("StringValue", "").encode())
        size += len(value.get("BinaryValue", b""))
    return size + 64  # the redrive count attribute and FIFO ids


# -- the Lambda entry's logic ----------------------------------------------------


def refuse_filters_for_native(options: RedriveOptions) -> None:
    """Raise :class:`RedriveError` when ``options`` ask for what SQS's move task cannot do.

    Example:
        >>> refuse_filters_for_native(RedriveOptions(dlq="d", rate=10))
    """
    if options.has_filters:
        raise RedriveError(
            "--native moves every message and cannot filter, limit or dry-run; "
            "drop --job/--error/--max/--dry-run or run without --native"
        )


def options_from_event(
    event: Mapping[str, Any], *, environ: Mapping[str, str] | None = None
) -> RedriveOptions:
    """Options from a Lambda event; names follow the CLI flags (``error``, ``max``, ``dry_run``...).

    Example:
        >>> options_from_event({"job": "a", "max": 5}, environ={"SQSJOBS_DLQ_URL": "u"}).max_messages
        5
    """
    env = os.environ if environ is None else environ
    known = {"dlq", "to", "job", "error", "max", "rate", "dry_run", "force", "max_redrives", "malformed",
             "native", "status", "cancel", "wait_time_seconds", "visibility_timeout", "stop_margin_seconds",
             "record_ttl"}
    unknown = sorted(set(event) - known)
    if unknown:
        raise RedriveError(f"unknown redrive option(s) {unknown}; use {sorted(known)}")
    try:
        return RedriveOptions(
            dlq=str(event.get("dlq") or env.get(ENV_DLQ_URL, "")),
            to=event.get("to"),
            default_to=env.get(ENV_QUEUE_URL) or None,
            record_ttl=float(event["record_ttl"]) if event.get("record_ttl") is not None else record_ttl_from(env),
            job=event.get("job"),
            error_type=event.get("error"),
            max_messages=int(event["max"]) if event.get("max") is not None else None,
            rate=float(event["rate"]) if event.get("rate") is not None else None,
            dry_run=_flag(event, "dry_run"),
            force=_flag(event, "force"),
            max_redrives=int(event.get("max_redrives", 3)),
            malformed=event.get("malformed", "move"),
            wait_time_seconds=int(event.get("wait_time_seconds", 1)),
            visibility_timeout=int(event.get("visibility_timeout", 60)),
            stop_margin_seconds=float(event.get("stop_margin_seconds", 10.0)),
        )
    except (TypeError, ValueError) as exc:
        raise RedriveError(f"bad redrive option: {exc}") from exc


def record_ttl_from(environ: Mapping[str, str]) -> float:
    """How long idempotency records live: ``SQSJOBS_RECORD_TTL_SECONDS``, else the default (21 days).

    Example:
        >>> record_ttl_from({"SQSJOBS_RECORD_TTL_SECONDS": "1209600"}), record_ttl_from({})
        (1209600.0, 1814400.0)
    """
    raw = environ.get(ENV_RECORD_TTL)
    if not raw:
        return DEFAULT_RECORD_TTL
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise RedriveError(f"{ENV_RECORD_TTL} must be a positive number of seconds, got {raw!r}")
    return value


def _flag(event: Mapping[str, Any], name: str) -> bool:
    # bool("false") is True: a JSON string must not turn on --force by accident.
    value = event.get(name, False)
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise RedriveError(f"{name} must be true or false, got {value!r}")


def handle_redrive_event(
    event: Mapping[str, Any],
    context: Any,
    *,
    sqs_client: SQSClient,
    environ: Mapping[str, str] | None = None,
    records: LeaseStore | None = None,
) -> dict[str, Any]:
    """Run what the event asks (redrive, native start/status/cancel) within the Lambda's time.

    With ``records`` (the idempotency table), letters whose key was cancelled stay in the DLQ.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq, jobs = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("jobs-dlq", "jobs"))
        ...     for job in ("invoice-email", "sync"):
        ...         _ = sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"job": job, "key": f"{job}:1"}))
        ...     event = {"dlq": "jobs-dlq", "to": "jobs", "max": 1, "wait_time_seconds": 0}
        ...     result = handle_redrive_event(event, None, sqs_client=sqs, environ={})
        ...     result["moved"], result["stopped"], result["left"]
        (1, 'max', 1)
    """
    options = options_from_event(event, environ=environ)
    if _flag(event, "status"):
        tasks = native_redrive_status(options.dlq, sqs_client=sqs_client)
        return {"tasks": [t.to_dict() for t in tasks]}
    if _flag(event, "cancel"):
        return {"cancelled": True, "moved": cancel_native_redrive(options.dlq, sqs_client=sqs_client)}
    if _flag(event, "native"):
        refuse_filters_for_native(options)
        return {"task_handle": start_native_redrive(options.dlq, to=options.to, rate=options.rate,
                                                    sqs_client=sqs_client)}
    engine = Redrive(
        options,
        sqs_client=sqs_client,
        # Without a Lambda context (a direct call) there is no deadline to stop before.
        remaining_time=None if remaining_seconds(context) is None else lambda: remaining_seconds(context) or 0.0,
        records=records,
    )
    result = engine.run().to_dict()
    # Lambda's response is capped at 6 MB: a run over a large DLQ returns the
    # first lines and the counts (the CLI's --json has every message).
    for lines in ("planned", "notes"):
        result[f"{lines}_total"] = len(result[lines])
        result[lines] = result[lines][:LAMBDA_PLANNED_LINES]
    return result
