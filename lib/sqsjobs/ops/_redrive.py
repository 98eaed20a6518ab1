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
read by :mod:`sqsjobs.ops._dlq_letters`; queues are found by :mod:`sqsjobs.enqueue._addresses`.
Its options are :mod:`sqsjobs.ops._redrive_options`, which letters move
:mod:`sqsjobs.ops._redrive_select`, the messages it holds
:mod:`sqsjobs.ops._redrive_held`, its counts :mod:`sqsjobs.ops._redrive_report`,
and the Lambda's entry :mod:`sqsjobs.ops._redrive_event`.

Its errors (``RedriveError``, ``MoveTaskError``) are :mod:`sqsjobs.ops._errors`'s, in the one tree
(:mod:`sqsjobs._errors`).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Final

from sqsjobs._errors import SqsJobsError
from sqsjobs.enqueue._addresses import queue_name, resolve_queue_url
from sqsjobs.enqueue._batching import batches
from sqsjobs.ops._dlq_evidence import read_letters
from sqsjobs.ops._dlq_letters import MAX_MESSAGE_ATTRIBUTES, DlqMessage, resend_attributes
from sqsjobs.ops._queues import queue_depth
from sqsjobs.ops._redrive_held import (
    BATCH_BYTES,
    BATCH_SIZE,
    HeldMessage,
    Holding,
    entry_bytes,
    plan,
    record_counts,
    send_entry,
    transient,
    with_copies,
)
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.ops._redrive_report import (
    LetterNote,
    NoteKind,
    RedriveCounts,
    RedriveSummary,
    SkipReason,
    StopReason,
)
from sqsjobs.ops._redrive_select import age_note, attribute_notes, cancelled, skip_reason
from sqsjobs.ops._redrive_targets import RedriveTargets

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Sequence

    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        MessageTypeDef,
    )

    from sqsjobs.store._lease import LeaseStore

__all__ = ["Redrive", "redrive"]

# Consecutive receives that return only messages already seen in this run:
# the DLQ has been scanned (what is left is hidden by us or by someone else).
STALE_ROUNDS: Final = 3


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
        self._sqs = sqs_client
        self._clock = clock
        self._sleep = sleep
        self._remaining_time = remaining_time
        self._on_progress = on_progress
        self._dlq_url = ""
        self._targets: RedriveTargets | None = None
        self._holding = Holding(sqs_client)
        # Ids SQS gave the messages this run sent: a dead letter that names one
        # (its evidence's original id, or the same id when SQS's own redrive
        # policy moved it) failed again during this run.
        self._sent_ids: set[str] = set()
        # Original message ids of letters this run sent back (in a dry run: would):
        # another DLQ copy of one of them is a duplicate to delete, not to send.
        self._replayed: set[str] = set()
        # Letters decided in the current round, by original id, until their send.
        self._pending: dict[str, HeldMessage] = {}
        self._counts = RedriveCounts()
        self._sent_total = 0
        self._started = 0.0
        self._left: int | None = None
        self._stopped: StopReason = "running"
        self._error: str | None = None

    def summary(self) -> RedriveSummary:
        """The counts so far (also valid after an interrupted :meth:`run`)."""
        return self._counts.summary(
            dlq_url=self._dlq_url or self.options.dlq,
            dry_run=self.options.dry_run,
            unverified=self._unverified,
            record_ttl=self.options.record_ttl,
            target_errors=dict(self._targets.unreachable) if self._targets else {},
            left=self._left,
            stopped=self._stopped,
            error=self._error,
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
            self._dlq_url = self._holding.dlq_url = resolve_queue_url(self._sqs, self.options.dlq)
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
            messages = self._receive(min(remaining, self.options.receive_size()))
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
        return max(0, self.options.max_messages - self._counts.matched)

    def _deadline_near(self, wait: float = 0.0) -> bool:
        if self._remaining_time is None:
            return False
        return self._remaining_time() - wait < self.options.stop_margin_seconds

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
        return self._holding.admit(message, letter)

    def _decide(self, message: MessageTypeDef) -> HeldMessage | None:
        """Return the held entry when it should be sent now; else record why not."""
        held = self._holding[message.get("MessageId", "")]
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
            self._counts.skipped[skip] += 1
            if self.options.dry_run:
                self._counts.planned.append(plan(letter, f"skip:{skip}", None))
            return None
        self._counts.matched += 1
        held.target = target
        self._check_age(letter)
        self._pending[letter.copy_of] = held
        if self.options.dry_run:
            self._counts.planned.append(plan(letter, "move", target))
            self._replayed.add(letter.copy_of)
            return None
        return held

    def _is_copy(self, held: HeldMessage) -> bool:
        """True when ``held`` is another DLQ copy of a letter this run sends (or sent) back."""
        original = held.letter.copy_of
        twin = self._pending.get(original)
        if original not in self._replayed and twin is None:
            return False
        if self.options.dry_run:
            self._counts.duplicates += 1
            self._counts.planned.append(plan(held.letter, "delete:duplicate", None))
        elif twin is not None:
            twin.copies.append(held)  # deleted after its twin's send succeeded
        else:
            self._delete([held], copies=True)  # its twin was sent back in an earlier round
        return True

    def _skip_reason(self, letter: DlqMessage) -> SkipReason | None:
        return skip_reason(letter, self.options, sent_ids=self._sent_ids, cancelled=self._cancelled)

    def _cancelled(self, letter: DlqMessage) -> bool:
        is_cancelled, unreadable = cancelled(self._records, letter)
        if unreadable is not None:
            self._note(letter, NoteKind.RECORD_UNREADABLE, unreadable)
        return is_cancelled

    # -- notes ------------------------------------------------------------

    def _note(self, letter: DlqMessage, kind: NoteKind, detail: str) -> None:
        self._counts.notes.append(LetterNote(message_id=letter.original_message_id, job=letter.job, kind=kind,
                                      detail=detail))

    def _note_attributes(self, letter: DlqMessage) -> None:
        if letter.bad_attributes:
            self._counts.malformed_attributes += 1
        for kind, detail in attribute_notes(letter):
            self._note(letter, kind, detail)

    def _check_age(self, letter: DlqMessage) -> None:
        detail = age_note(letter, self.options.record_ttl)
        if detail is not None:
            self._counts.older_than_record_ttl += 1
            self._note(letter, NoteKind.OLDER_THAN_RECORD_TTL, detail)

    # -- sending ----------------------------------------------------------

    def _send_all(self, to_send: Sequence[HeldMessage]) -> bool:
        """Send in paced chunks; False when the deadline stopped it (the rest stay held, then released)."""
        by_target: dict[str, list[HeldMessage]] = {}
        for held in to_send:
            by_target.setdefault(held.target or "", []).append(held)
        chunks = [(target, chunk) for target, group in by_target.items()
                  for chunk in batches(group, max_items=self.options.chunk_size(), max_bytes=BATCH_BYTES,
                                       size_of=entry_bytes)]
        for index, (target, chunk) in enumerate(chunks):
            assert self._targets is not None
            if target in self._targets.unreachable:
                self._give_up(target, chunk)
                continue
            wait = self.options.pace_wait(started=self._started, sent=self._sent_total, now=self._clock())
            if self._deadline_near(wait):
                # Not sent, so not matched after all: they go back with the rest.
                self._counts.matched -= sum(len(unsent) for _, unsent in chunks[index:])
                return False
            if wait > 0:
                self._sleep(wait)
            self._send_chunk(target, chunk)
        return True

    def _send_chunk(self, target: str, chunk: Sequence[HeldMessage]) -> None:
        from botocore.exceptions import ClientError

        fifo = target.endswith(".fifo")
        entries = [send_entry(str(i), held, fifo=fifo, max_redrives=self.options.max_redrives)
                   for i, held in enumerate(chunk)]
        # Counted before the call: an exception below ends the run, and pacing
        # must not let a retry burst past the rate.
        self._sent_total += len(entries)
        try:
            response = self._sqs.send_message_batch(QueueUrl=target, Entries=entries)
        except ClientError as exc:
            if transient(exc):
                raise  # SQS itself is throttling or failing: stop, a re-run continues
            # This target refused (deleted, no permission, KMS): its letters stay, the others still move.
            assert self._targets is not None
            self._targets.mark_unreachable(target, f"{type(exc).__name__}: {exc}")
            self._counts.failed += len(chunk)
            for held in chunk:
                self._note(held.letter, NoteKind.TARGET_UNREACHABLE,
                           f"send to {queue_name(target)} failed: {self._targets.unreachable[target]}")
            self._release(with_copies(chunk))
            return
        sent = [(chunk[int(entry["Id"])], entry["MessageId"]) for entry in response.get("Successful", [])]
        self._sent_ids.update(message_id for _, message_id in sent)
        # A worker's letter of a replay names the first message (one id everywhere): that id marks it too.
        self._sent_ids.update(held.letter.original_message_id for held, _ in sent)
        self._replayed.update(held.letter.copy_of for held, _ in sent)
        failed = response.get("Failed", [])
        self._counts.failed += len(failed)
        if failed:
            # Not deleted, so still in the DLQ; release now so a re-run finds it.
            self._release(with_copies([chunk[int(entry["Id"])] for entry in failed]))
        counted = self._record_counts(sent)
        self._delete(counted)
        self._delete([copy for held in counted for copy in held.copies], copies=True)

    def _record_counts(self, sent: Sequence[tuple[HeldMessage, str]]) -> list[HeldMessage]:
        """Write each sent message's redrive count; the letters whose count is kept (the others are released).

        A letter whose count could not be written stays in the DLQ: deleting it
        would lose the count the poison guard stops a loop with. Its sent copy
        runs through the guard; a later redrive moves the letter again, and the
        guard absorbs that duplicate.
        """
        if self._records is None or not sent:
            return [held for held, _ in sent]
        kept, unrecorded = [], []
        for held, error in record_counts(self._records, sent, now=self._clock(), record_ttl=self.options.record_ttl):
            if error is None:
                kept.append(held)
                continue
            unrecorded.append(held)
            self._note(held.letter, NoteKind.COUNT_UNRECORDED,
                       f"sent back, but its redrive count could not be written ({error}): "
                       "it stays in the DLQ; run again (the guard absorbs the duplicate)")
        self._counts.counts_unrecorded += len(unrecorded)
        self._release(with_copies(unrecorded))
        return kept

    def _give_up(self, target: str, chunk: Sequence[HeldMessage]) -> None:
        """Leave ``chunk`` in the DLQ: its target refused an earlier send of this run."""
        assert self._targets is not None
        self._counts.matched -= len(chunk)
        self._counts.skipped[SkipReason.TARGET_UNREACHABLE] += len(chunk)
        for held in chunk:
            self._note(held.letter, NoteKind.TARGET_UNREACHABLE, self._targets.refusal(target))
        self._release(with_copies(chunk))

    def _delete(self, sent: Sequence[HeldMessage], *, copies: bool = False) -> None:
        deleted, failed = self._holding.delete(sent)
        if copies:
            self._counts.duplicates += deleted
        else:
            self._counts.moved += deleted
        # Sent but still in the DLQ: a re-run sends it again, and the guard
        # absorbs that duplicate. Counted so the operator sees it.
        self._counts.delete_failed += failed

    # -- releasing and reporting -----------------------------------------

    def _release(self, entries: Iterable[HeldMessage]) -> None:
        self._holding.release(entries)

    def _release_all(self) -> None:
        """Make every message this run still holds visible again (best effort)."""
        try:
            self._holding.release_all()
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
