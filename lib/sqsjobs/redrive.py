"""DLQ redrive: send dead letters back to their source queue, through the guard.

A redriven message is one more delivery of the same job: it passes the same
idempotency guard as the first one, so a job that completed meanwhile is
acknowledged as a duplicate and a job that failed runs once more (invariant 7
in DESIGN.md). This module only moves bytes; it never runs a job.

What it must never do:

- delete a message from the DLQ before its send to the source queue succeeded
  (an interruption at any point leaves each message in the DLQ, in the source
  queue, or in both, and a re-run continues; "both" is the duplicate the guard
  absorbs);
- call AWS at import (clients are injected);
- leave a message it did not move hidden until its visibility timeout expires.

:class:`Redrive` receives, filters, sends and deletes (``sqsjobs redrive``
and ``handlers/redrive.py``); SQS's own message move task, faster but unable
to filter, is in :mod:`sqsjobs.redrive_native`. What a DLQ message says is
read by :mod:`sqsjobs.dlq_message`; queues are found by :mod:`sqsjobs.queues`.

Error tree additions (all under :class:`sqsjobs.errors.SqsJobsError`)::

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
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal

from sqsjobs.dlq_message import MAX_MESSAGE_ATTRIBUTES, DlqMessage, dedup_id, resend_attributes
from sqsjobs.errors import RedriveError, SqsJobsError
from sqsjobs.queues import dead_letter_sources, queue_depth, resolve_queue_url
from sqsjobs.redrive_native import cancel_native_redrive, native_redrive_status, start_native_redrive

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence

    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.type_defs import (
        DeleteMessageBatchRequestEntryTypeDef,
        MessageTypeDef,
        SendMessageBatchRequestEntryTypeDef,
    )

# SQS batch APIs take at most 10 entries.
BATCH_SIZE: Final = 10
# A batch's total payload limit. SQS accepts more today (1 MiB), but 256 KiB
# is what every region and the local cloud accept, and costs one extra call at most.
BATCH_BYTES: Final = 256 * 1024
# Consecutive receives that return only messages already seen in this run:
# the DLQ has been scanned (what is left is hidden by us or by someone else).
STALE_ROUNDS: Final = 3

# Skip reasons reported in RedriveSummary.skipped.
SKIP_FILTERED: Final = "filtered"
SKIP_POISON: Final = "poison"
SKIP_MALFORMED: Final = "malformed"
SKIP_NO_SOURCE: Final = "no-source"
SKIP_TOO_MANY_ATTRIBUTES: Final = "too-many-attributes"
# Moved by this run, failed again and dead-lettered again while the run went on.
SKIP_FAILED_AGAIN: Final = "failed-again"

# How many dry-run lines the Lambda returns (the rest are counted).
LAMBDA_PLANNED_LINES: Final = 100

StopReason = Literal["drained", "scanned", "max", "deadline", "error", "interrupted", "running"]



@dataclass(frozen=True, kw_only=True)
class RedriveOptions:
    """What to redrive, where to, and how fast.

    ``to`` wins over the message's ``sqsjobs.source_queue`` attribute, which
    wins over ``default_to`` (the Lambda's ``SQSJOBS_QUEUE_URL``), which wins
    over the DLQ's only redrive source (``ListDeadLetterSourceQueues``).

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
        if not 1 <= self.visibility_timeout <= 43200:
            raise RedriveError(f"visibility_timeout must be 1..43200, got {self.visibility_timeout}")

    @property
    def has_filters(self) -> bool:
        """True when a filter or a per-message decision needs the client-side engine."""
        return bool(self.job or self.error_type or self.max_messages or self.dry_run)


@dataclass(frozen=True, kw_only=True)
class PlannedMove:
    """A dry-run line: what would happen to one dead letter.

    Example:
        >>> PlannedMove(message_id="m1", job="a", reason="exhausted", error_type="TimeoutError",
        ...             age_seconds=5.0, redrive_count=0, action="move", target="q").action
        'move'
    """

    #: the id the worker logged (the letter's ``sqsjobs.original_message_id``, else the DLQ's own id)
    message_id: str
    job: str
    reason: str
    error_type: str
    age_seconds: float | None
    redrive_count: int
    action: str  # "move" or "skip:<reason>"
    target: str | None


@dataclass(frozen=True, kw_only=True)
class RedriveSummary:
    """What a redrive did: moved, skipped by reason, failed, and what is left.

    ``left`` is the DLQ's approximate depth (visible + in flight) after the
    run, or None when it could not be read. ``stopped`` says why the run ended.

    Example:
        >>> RedriveSummary(dlq_url="u", dry_run=False, moved=3).to_dict()["moved"]
        3
    """

    dlq_url: str
    dry_run: bool
    moved: int = 0
    matched: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    failed: int = 0
    delete_failed: int = 0
    left: int | None = None
    stopped: StopReason = "running"
    error: str | None = None
    planned: tuple[PlannedMove, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing failed and the run was not cut short by an error."""
        return self.failed == 0 and self.delete_failed == 0 and self.error is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the Lambda's return value and ``--json`` output)."""
        data = asdict(self)
        data["skipped"] = dict(self.skipped)
        data["planned"] = [asdict(p) for p in self.planned]
        data["ok"] = self.ok
        return data


@dataclass
class _Held:
    """A received message this run is responsible for until it is deleted or released."""

    message: MessageTypeDef
    letter: DlqMessage
    target: str | None = None


class Redrive:
    """Receive from a DLQ, filter, send back to the source, delete after the send.

    Messages that do not move (filtered, poison, dry run) stay hidden only
    while the scan runs, then go back to visible with one
    ``ChangeMessageVisibilityBatch`` per 10. Releasing each one at once would
    hand it straight back to the next receive, and the scan would never reach
    the messages behind it. The visibility timeout bounds the hiding even if
    this process dies.

    Example:
        >>> import boto3  # doctest: +SKIP
        >>> opts = RedriveOptions(dlq="jobs-dlq", job="invoice-email", dry_run=True)  # doctest: +SKIP
        >>> Redrive(opts, sqs_client=boto3.client("sqs")).run().planned  # doctest: +SKIP
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
    ) -> None:
        self.options = options
        self._sqs = sqs_client
        self._clock = clock
        self._sleep = sleep
        self._remaining_time = remaining_time
        self._on_progress = on_progress
        self._dlq_url = ""
        self._to_url: str | None = None
        self._redrive_sources: list[str] | None = None
        self._held: dict[str, _Held] = {}
        self._seen: set[str] = set()
        # Ids SQS gave the messages this run sent: a dead letter that names one
        # (the worker's original_message_id, or the same id when SQS's own
        # redrive policy moved it) failed again during this run.
        self._sent_ids: set[str] = set()
        self._skipped: Counter[str] = Counter()
        self._planned: list[PlannedMove] = []
        self._moved = 0
        self._matched = 0
        self._failed = 0
        self._delete_failed = 0
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
            left=self._left,
            stopped=self._stopped,
            error=self._error,
            planned=tuple(self._planned),
        )

    def run(self) -> RedriveSummary:
        """Redrive until drained, scanned, ``max_messages``, the deadline, or an AWS error.

        AWS errors end the run with ``stopped="error"`` and the message in
        ``error``; KeyboardInterrupt releases what this run holds and propagates
        (read :meth:`summary` for the counts).
        """
        from botocore.exceptions import BotoCoreError, ClientError

        self._started = self._clock()
        try:
            self._dlq_url = resolve_queue_url(self._sqs, self.options.dlq)
            if self.options.to:
                self._to_url = resolve_queue_url(self._sqs, self.options.to)
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
            fresh = [m for m in messages if self._admit(m)]
            stale = 0 if fresh else stale + 1
            if stale >= STALE_ROUNDS:
                return "scanned"
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

    def _admit(self, message: MessageTypeDef) -> bool:
        """Hold ``message``; True when this run has not seen it before."""
        message_id = message.get("MessageId", "")
        if message_id in self._seen:
            # Its visibility ran out during a long scan and it came back: keep
            # the newest receipt handle so the release at the end still works.
            if message_id in self._held:
                self._held[message_id].message = message
            else:
                self._held[message_id] = _Held(message, DlqMessage.from_message(message, now=self._clock()))
            return False
        self._seen.add(message_id)
        self._held[message_id] = _Held(message, DlqMessage.from_message(message, now=self._clock()))
        return True

    def _decide(self, message: MessageTypeDef) -> _Held | None:
        """Return the held entry when it should be sent now; else record why not."""
        held = self._held[message.get("MessageId", "")]
        letter = held.letter
        skip = self._skip_reason(letter)
        target = None
        if skip is None:
            target = self._target(letter)
            if target is None:
                skip = SKIP_NO_SOURCE
            elif len(resend_attributes(message, letter)) > MAX_MESSAGE_ATTRIBUTES:
                skip = SKIP_TOO_MANY_ATTRIBUTES
        if skip is not None:
            self._skipped[skip] += 1
            if self.options.dry_run:
                self._planned.append(_plan(letter, f"skip:{skip}", None))
            return None
        self._matched += 1
        held.target = target
        if self.options.dry_run:
            self._planned.append(_plan(letter, "move", target))
            return None
        return held

    def _skip_reason(self, letter: DlqMessage) -> str | None:
        opts = self.options
        if self._sent_ids and {letter.message_id, letter.original_message_id} & self._sent_ids:
            # A live worker can fail and dead-letter a replay within seconds;
            # moving it again in the same run would spin it through the queue
            # until the poison guard stops it.
            return SKIP_FAILED_AGAIN
        if opts.job is not None and letter.job != opts.job:
            return SKIP_FILTERED
        if opts.error_type is not None and opts.error_type not in (letter.error_type, letter.reason):
            return SKIP_FILTERED
        if letter.malformed and opts.malformed == "skip":
            return SKIP_MALFORMED
        if letter.redrive_count >= opts.max_redrives and not opts.force:
            return SKIP_POISON
        return None

    def _target(self, letter: DlqMessage) -> str | None:
        if self._to_url:
            return self._to_url
        if letter.source_queue:
            return letter.source_queue
        if self.options.default_to:
            return self.options.default_to
        if self._redrive_sources is None:
            self._redrive_sources = list(dead_letter_sources(self._sqs, self._dlq_url))
        return self._redrive_sources[0] if len(self._redrive_sources) == 1 else None

    # -- sending ----------------------------------------------------------

    def _send_all(self, to_send: Sequence[_Held]) -> bool:
        """Send in paced chunks; False when the deadline stopped it (the rest stay held, then released)."""
        by_target: dict[str, list[_Held]] = {}
        for held in to_send:
            by_target.setdefault(held.target or "", []).append(held)
        chunks = [(target, chunk) for target, group in by_target.items()
                  for chunk in _chunks(group, self._chunk_size())]
        for index, (target, chunk) in enumerate(chunks):
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
        fifo = target.endswith(".fifo")
        entries = [_send_entry(str(i), held, fifo=fifo) for i, held in enumerate(chunk)]
        # Counted before the call: an exception below ends the run, and pacing
        # must not let a retry burst past the rate.
        self._sent_total += len(entries)
        response = self._sqs.send_message_batch(QueueUrl=target, Entries=entries)
        sent = [chunk[int(entry["Id"])] for entry in response.get("Successful", [])]
        self._sent_ids.update(entry["MessageId"] for entry in response.get("Successful", []))
        failed = response.get("Failed", [])
        self._failed += len(failed)
        if failed:
            # Not deleted, so still in the DLQ; release now so a re-run finds it.
            self._release([chunk[int(entry["Id"])] for entry in failed])
        self._delete(sent)

    def _delete(self, sent: Sequence[_Held]) -> None:
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
            self._moved += 1
        # Sent but still in the DLQ: a re-run sends it again, and the guard
        # absorbs that duplicate. Counted so the operator sees it.
        self._delete_failed += len(response.get("Failed", []))

    # -- releasing and reporting -----------------------------------------

    def _release(self, entries: Iterable[_Held]) -> None:
        for chunk in _chunks(list(entries), BATCH_SIZE):
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


def redrive(
    options: RedriveOptions,
    *,
    sqs_client: SQSClient,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    remaining_time: Callable[[], float] | None = None,
) -> RedriveSummary:
    """Run one redrive and return its summary.

    Example:
        >>> summary = redrive(RedriveOptions(dlq="jobs-dlq"), sqs_client=sqs)  # doctest: +SKIP
        >>> summary.moved, dict(summary.skipped), summary.left  # doctest: +SKIP
        (12, {'poison': 1}, 1)
    """
    engine = Redrive(options, sqs_client=sqs_client, clock=clock, sleep=sleep, remaining_time=remaining_time)
    return engine.run()


# -- message helpers -----------------------------------------------------------


def _plan(letter: DlqMessage, action: str, target: str | None) -> PlannedMove:
    return PlannedMove(
        message_id=letter.original_message_id or letter.message_id,
        job=letter.job,
        reason=letter.reason,
        error_type=letter.error_type,
        age_seconds=letter.age_seconds,
        redrive_count=letter.redrive_count,
        action=action,
        target=target,
    )


def _send_entry(entry_id: str, held: _Held, *, fifo: bool) -> SendMessageBatchRequestEntryTypeDef:
    message, letter = held.message, held.letter
    entry: SendMessageBatchRequestEntryTypeDef = {
        "Id": entry_id,
        "MessageBody": message.get("Body", ""),
        "MessageAttributes": resend_attributes(message, letter),
    }
    if fifo:
        # The group keeps per-entity ordering; a message from a standard DLQ
        # has none, and its job name is the closest stand-in.
        entry["MessageGroupId"] = message.get("Attributes", {}).get("MessageGroupId") or letter.job
        entry["MessageDeduplicationId"] = dedup_id(message, letter.redrive_count + 1)
    return entry


def _entry_bytes(held: _Held) -> int:
    size = len(held.message.get("Body", "").encode())
    for name, value in held.message.get("MessageAttributes", {}).items():
        size += len(name) + len(value.get("DataType", "")) + len(value.get("StringValue", "").encode())
        size += len(value.get("BinaryValue", b""))
    return size + 64  # the redrive count attribute and FIFO ids


def _chunks(items: Sequence[_Held], size: int) -> Iterator[list[_Held]]:
    """Chunks of at most ``size`` entries and ``BATCH_BYTES`` bytes."""
    chunk: list[_Held] = []
    total = 0
    for item in items:
        nbytes = _entry_bytes(item)
        if chunk and (len(chunk) >= size or total + nbytes > BATCH_BYTES):
            yield chunk
            chunk, total = [], 0
        chunk.append(item)
        total += nbytes
    if chunk:
        yield chunk


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
             "native", "status", "cancel", "wait_time_seconds", "visibility_timeout", "stop_margin_seconds"}
    unknown = sorted(set(event) - known)
    if unknown:
        raise RedriveError(f"unknown redrive option(s) {unknown}; use {sorted(known)}")
    try:
        return RedriveOptions(
            dlq=str(event.get("dlq") or env.get("SQSJOBS_DLQ_URL", "")),
            to=event.get("to"),
            default_to=env.get("SQSJOBS_QUEUE_URL") or None,
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
) -> dict[str, Any]:
    """Run what the event asks (redrive, native start/status/cancel) within the Lambda's time.

    Example:
        >>> event = {"job": "invoice-email", "max": 100}
        >>> handle_redrive_event(event, context, sqs_client=sqs)  # doctest: +SKIP
        {'moved': 100, 'stopped': 'max', 'left': 20, ...}
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
        remaining_time=lambda: float(context.get_remaining_time_in_millis()) / 1000.0,
    )
    result = engine.run().to_dict()
    # Lambda's response is capped at 6 MB: a dry run over a large DLQ returns
    # the first lines and the count (the CLI's --json has every message).
    result["planned_total"] = len(result["planned"])
    result["planned"] = result["planned"][:LAMBDA_PLANNED_LINES]
    return result
