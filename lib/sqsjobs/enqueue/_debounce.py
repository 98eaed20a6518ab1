"""Debounce and dedupe at enqueue: one conditional write on the key's record, before (or instead of) the send.

**Debounce** (``debounce=SECONDS``). Each enqueue writes the key's latest
*burst token* to its record (``store/_enqueue_ops.py`` ``Debounce``: one
``UpdateItem``, 1 WCU, whoever holds the key) and sends a message delayed by
the window that carries the token (``Envelope.debounce``); a window beyond
900 s waits in the key's one-time schedule (``schedules/_one_time.py``),
replaced on each enqueue. The job runs once, a window after the last enqueue,
with the last enqueue's arguments.

How a debounced key keeps the key rule: *the burst's token names the run*.
A delivery runs only if its token is the key's latest (``debounce_token``),
no other delivery holds the key, and no run completed that burst. The
worker's stage (``enqueue/_debounce_stage.py``) reads the records of a
batch's debounced deliveries (one ``BatchGetItem``) and acknowledges a
superseded one (``JobSuperseded``, outcome ``superseded``) with no write; the
claim itself writes the token it runs for (``ran_token``) and returns the
record as it was, so a token replaced between the read and the claim is
still caught (``before_run``), atomically. A completed burst leaves the record
DONE with ``completed_token`` = its token (written by its completion, never
by a claim: worker/_request.py): a copy of it is a duplicate. An enqueue
after that starts a new burst (a new token); its delivery finds the record
DONE with ``completed_token`` not its own and re-arms it (``Rearm``: DONE →
RELEASED, only for the latest token, never for a cancelled key), then claims
it like any delivery. So at most one run per token, runs of one key never
overlap, and a burst enqueued while a run goes on runs after it. A group's
member or a chain's step of the job carries no token: it is a request of its
own, run undebounced, and the record remembers it once completed
(``ran_requests``, worker/_request.py: a delivery is a duplicate only of the
same request).

The trade: the arguments are the last enqueue's, so a key must name
everything that must not be dropped (``key="reindex:{product_id}"``).

**Dedupe** (``dedupe="until_started"|"until_done"``). An enqueue takes the
key's record (``Reserve``: one ``UpdateItem``, 1 WCU) before sending; a key
already queued (or, for ``until_done``, running or retrying) refuses it, and
nothing is sent: ``enqueue`` returns the existing request's receipt with
``duplicate=True`` and ``JobDeduplicated`` counts it. A cancelled key refuses
it too, until its record's TTL, and the receipt says ``cancelled=True``: a
request sent there would only be acknowledged ``cancelled``, unrun, and the
same write already tells, at no cost (refusing beats raising: a cancel is a
state an operator chose, not an error every producer must catch). The claim frees an
``until_started`` key; a finished run frees an ``until_done`` one. A record
whose message was lost blocks the key only until its ``queued_until``:
:func:`dedupe_hold` says how long (the delay, plus every attempt's visibility
timeout and longest backoff).

This module never imports boto3; it writes through the ``LeaseStore``.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs import _metrics as m
from sqsjobs._errors import ConfigurationError, EnqueueError, InvalidArgumentsError
from sqsjobs._job_options import Declaring, JobOption
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.store._enqueue_ops import Debounce, Reserve
from sqsjobs.store._lease import LeaseState, expiry
from sqsjobs.store._lease_ops import Amend

if TYPE_CHECKING:
    from sqsjobs._job import Job, Services
    from sqsjobs._job_options import JobOptions
    from sqsjobs._settings import Settings
    from sqsjobs.enqueue._message import EnqueueRequest, JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport
    from sqsjobs.store._lease import LeaseItem

#: the longest debounce window: a one-time schedule's longest delay (docs/delays.md)
MAX_DEBOUNCE = 365 * 24 * 3600.0
#: the visibility timeout assumed per attempt when the function's timeout is not known (Lambda's longest run)
DEFAULT_ATTEMPT_SECONDS = 900.0


class Dedupe(StrEnum):
    """How long an enqueue of a deduplicated key is refused."""

    UNTIL_STARTED = "until_started"  #: while a request of the key is queued (its claim frees the key)
    UNTIL_DONE = "until_done"  #: while queued, scheduled, running or retrying (a finished run frees it)


class Receipt(str):
    """What ``enqueue`` of a deduplicated job returns: the request's id, and whether it was refused.

    The text is the request's id (the one that holds the key, for a
    duplicate; the key itself, for a cancelled key); ``message_id`` is SQS's
    id when this call sent it. ``cancelled``: the key was cancelled
    (``app.cancel``) and stays so until its record's TTL, so nothing was sent.

    Example:
        >>> r = Receipt("req-1", duplicate=True)
        >>> r, r.duplicate, r.cancelled, r.message_id
        ('req-1', True, False, None)
    """

    duplicate: bool
    cancelled: bool
    message_id: str | None

    def __new__(cls, request: str, *, duplicate: bool = False, cancelled: bool = False,
                message_id: str | None = None) -> Receipt:
        receipt = super().__new__(cls, request)
        receipt.duplicate = duplicate
        receipt.cancelled = cancelled
        receipt.message_id = message_id
        return receipt

    @property
    def refused(self) -> bool:
        """Nothing was sent: a request of the key is queued (``duplicate``), or the key is ``cancelled``."""
        return self.duplicate or self.cancelled


def debounce_seconds(job: str, value: Any, *, error: type[Exception] = ConfigurationError) -> float | None:
    """A debounce window, checked: positive seconds, at most a year (None: not debounced).

    Example:
        >>> debounce_seconds("reindex", 30), debounce_seconds("reindex", None)
        (30.0, None)
        >>> debounce_seconds("reindex", 0)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'reindex': debounce must be a positive number of seconds (at most \
31536000), got 0
    """
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_DEBOUNCE:
        raise error(f"job {job!r}: debounce must be a positive number of seconds (at most {int(MAX_DEBOUNCE)}), "
                    f"got {value!r}")
    return float(value)


def dedupe_mode(job: str, value: Any) -> Dedupe | None:
    """A dedupe option, checked (None: not deduplicated).

    Example:
        >>> dedupe_mode("export", "until_done").value
        'until_done'
    """
    if value is None:
        return None
    try:
        return Dedupe(value)
    except ValueError:
        raise ConfigurationError(
            f"job {job!r}: dedupe must be one of {[d.value for d in Dedupe]} (or None), got {value!r}") from None


def check_coalescing(job: str, *, debounce: float | None, dedupe: Dedupe | None, chunked: bool) -> None:
    """Refuse option sets that cannot mean one thing."""
    if debounce is not None and dedupe is not None:
        raise ConfigurationError(
            f"job {job!r}: debounce and dedupe do not combine: debounce keeps the last request of a burst, "
            "dedupe keeps the first; choose one")
    if chunked and (debounce is not None or dedupe is not None):
        raise ConfigurationError(f"job {job!r}: a chunked job's pages are not debounced or deduplicated")


def _declared_debounce(declaring: Declaring, value: Any) -> float | None:
    window = debounce_seconds(declaring.job, value)
    check_coalescing(declaring.job, debounce=window, dedupe=None, chunked=declaring.chunked)
    return window


def _declared_dedupe(declaring: Declaring, value: Any) -> Dedupe | None:
    mode = dedupe_mode(declaring.job, value)
    check_coalescing(declaring.job, debounce=debounce_seconds(declaring.job, declaring.given.get("debounce")),
                     dedupe=mode, chunked=declaring.chunked)
    return mode


#: coalesce a burst of enqueues of one key: run once, this many seconds after the last
DEBOUNCE: JobOption[float | None] = JobOption("debounce", None, _declared_debounce)
#: refuse an enqueue of a key already queued (``until_started``) or not yet done (``until_done``)
DEDUPE: JobOption[Dedupe | None] = JobOption("dedupe", None, _declared_dedupe)


def dedupe_hold(options: JobOptions, settings: Settings, delay: float) -> float:
    """How long a deduplicated request holds its key at most: what a lost message blocks.

    The message is due after ``delay``; each attempt may take a visibility
    timeout (the function's timeout, else 900 s) and wait the longest backoff.

    Example:
        >>> from sqsjobs import Settings
        >>> from sqsjobs._job_options import JobOptions
        >>> dedupe_hold(JobOptions(max_attempts=3), Settings(function_timeout=60.0), delay=0)  # 3 x (60 + 600)
        1980.0
    """
    attempts = options.max_attempts or settings.max_attempts
    per_attempt = (settings.function_timeout or DEFAULT_ATTEMPT_SECONDS) + options.backoff.cap
    return delay + attempts * per_attempt


def with_token(message: JobMessage, token: str) -> JobMessage:
    """``message`` with its envelope carrying the burst token."""
    envelope = replace(Envelope.decode(message.body), debounce=token)
    return replace(message, body=envelope.encode())


def _due(message: JobMessage, now: float) -> float:
    return message.due_at if message.due_at is not None else now + message.delay


def send_debounced(runtime: Services, message: JobMessage) -> str:
    """Write the burst's token (1 WCU), then send ``message`` carrying it (delayed by the window)."""
    now = runtime.clock()
    token = uuid.uuid4().hex
    written = runtime.store.write(Debounce(
        key=message.key, job=message.job, token=token, now=now, due=_due(message, now),
        expires_at=expiry(now, runtime.settings.record_ttl)))
    if written.error is not None:
        raise EnqueueError(f"job {message.job!r}: could not write the debounce token of {message.key!r}: "
                           f"{written.error}")
    if not written.ok:
        owner = written.item.get("job") if written.item is not None else None
        raise InvalidArgumentsError(f"job {message.job!r}: the key {message.key!r} belongs to job {owner!r}: "
                                    "a key names one operation")
    return runtime.send(with_token(message, token))


def reserve(runtime: Services, messages: Sequence[JobMessage], modes: Sequence[Dedupe],
            holds: Sequence[float]) -> list[Receipt]:
    """Take each message's key (one write each, concurrently): a ``Receipt`` per message, ``duplicate`` if refused.

    A repeated key within ``messages`` is refused without a write: the first
    one holds the key. A refusal counts in ``JobDeduplicated``.
    """
    now = runtime.clock()
    first: dict[str, int] = {}
    ops: list[tuple[int, Reserve]] = []
    receipts: list[Receipt] = []
    for i, (message, mode, hold) in enumerate(zip(messages, modes, holds, strict=True)):
        if message.key in first:
            receipts.append(Receipt(receipts[first[message.key]], duplicate=True))
            continue
        first[message.key] = i
        request = uuid.uuid4().hex
        receipts.append(Receipt(request))
        ops.append((i, Reserve(key=message.key, job=message.job, request=request, now=now, until=now + hold,
                               expires_at=expiry(now, runtime.settings.record_ttl, now + hold),
                               until_done=mode is Dedupe.UNTIL_DONE)))
    for (i, _), written in zip(ops, runtime.store.write_many([op for _, op in ops]), strict=True):
        message, item = messages[i], written.item
        if written.error is not None:
            raise EnqueueError(f"job {message.job!r}: could not reserve {message.key!r}: {written.error}")
        if written.ok:
            continue
        if item is not None and item.get("job") not in (None, message.job):
            raise InvalidArgumentsError(f"job {message.job!r}: the key {message.key!r} belongs to job "
                                        f"{item.get('job')!r}: a key names one operation")
        if item is not None and item.state is LeaseState.DONE and item.get("outcome") == "cancelled":
            receipts[i] = Receipt(message.key, cancelled=True)
            continue
        holder = item.get("queued_id") if item is not None else None
        receipts[i] = Receipt(str(holder or message.key), duplicate=True)
    for i, message in enumerate(messages):  # a repeat follows its first copy's answer
        j = first[message.key]
        if j != i:
            receipts[i] = receipts[j] if receipts[j].cancelled else Receipt(receipts[j], duplicate=True)
    refused = [messages[i].job for i, r in enumerate(receipts) if r.duplicate]
    if refused:
        batch = m.BatchMetrics(namespace=runtime.settings.namespace, service=runtime.settings.service,
                               emit=runtime.emit_metrics)
        for job in refused:
            batch.count(job, m.DEDUPLICATED)
        batch.flush()
    return receipts


def unreserve(runtime: Services, message: JobMessage, receipt: Receipt) -> None:
    """The send failed: give the key back (only while this request still holds it)."""
    runtime.store.write(Amend(key=message.key, data={"queued_until": None, "queued_id": None, "queued_mode": None},
                              expect={"queued_id": str(receipt)}))


def send_deduplicated(runtime: Services, message: JobMessage, mode: Dedupe, hold: float) -> Receipt:
    """Reserve the key (1 WCU), then send; a refused request sends nothing (a holder's receipt, a cancelled key)."""
    receipt = reserve(runtime, [message], [mode], [hold])[0]
    if receipt.refused:
        return receipt
    try:
        sent = runtime.send(message)
    except Exception:
        unreserve(runtime, message, receipt)
        raise
    return Receipt(receipt, message_id=str(sent))


def enqueue_coalesced(runtime: Services, job: Job[..., Any], request: EnqueueRequest) -> str:
    """One ``job.enqueue`` of a debounced or deduplicated job (``enqueue/_request.py`` sends the others here only
    with ``debounce=``): into its key's burst, or through the key's reservation (a ``Receipt``)."""
    debounce, dedupe = DEBOUNCE.of(job.options), DEDUPE.of(job.options)
    if request.debounce is not None and debounce is None:
        raise InvalidArgumentsError(
            f"job {job.name!r}: debounce= overrides the window of a job declared with debounce=SECONDS; "
            "declare this one with it (its bursts' arguments differ, so its key may not hash them)")
    window = debounce if request.debounce is None else \
        debounce_seconds(job.name, request.debounce, error=InvalidArgumentsError)
    if request.callback is not None:
        raise InvalidArgumentsError(
            f"job {job.name!r}: a {'debounced' if window is not None else 'deduplicated'} enqueue may send "
            "nothing (a later one replaces it, or the key is queued already), so it takes no callback=")
    if window is not None:
        if dedupe is not None:
            raise InvalidArgumentsError(f"job {job.name!r}: debounce does not combine with dedupe")
        if request.delay or request.eta is not None:
            raise InvalidArgumentsError(f"job {job.name!r}: a debounced enqueue is due a window after it "
                                        "(debounce=); it takes no delay or eta")
        return send_debounced(runtime, job.message(
            delay=window, replace=True, group=request.group, trace_id=request.trace_id,
            expires_in=request.expires_in, tenant=request.tenant, **request.args))
    assert dedupe is not None  # enqueue/_request.py sends only a job that sets one of the two here
    message = job.message(delay=request.delay, eta=request.eta, replace=request.replace, group=request.group,
                          trace_id=request.trace_id, expires_in=request.expires_in, tenant=request.tenant,
                          **request.args)
    now = runtime.clock()
    wait = message.due_at - now if message.due_at is not None else float(message.delay)
    return send_deduplicated(runtime, message, dedupe, dedupe_hold(job.options, runtime.settings, wait))


def refuse_debounced(message: JobMessage) -> None:
    """A prepared message of a debounced job would carry no burst token: only ``job.enqueue`` writes one."""
    if message.source is not None and DEBOUNCE.of(message.source.options) is not None:
        raise InvalidArgumentsError(
            f"job {message.job!r} is debounced: enqueue it with {message.job}.enqueue(...) (or "
            f"app.enqueue({message.job!r}, ...)), which writes its burst's token; a prepared message has none")


def send_prepared(runtime: Services, message: JobMessage) -> str:
    """``app.enqueue(message)``: a deduplicated job's key is reserved first; a debounced job's is refused."""
    refuse_debounced(message)
    source = message.source
    mode = None if source is None else DEDUPE.of(source.options)
    if source is None or mode is None:
        return runtime.send(message)
    now = runtime.clock()
    return send_deduplicated(runtime, message, mode,
                             dedupe_hold(source.options, runtime.settings, _due(message, now) - now))


def dedupe_many(runtime: Services, messages: Sequence[JobMessage],
                send: Callable[[list[JobMessage]], EnqueueReport]) -> EnqueueReport:
    """``enqueue_many``: deduplicated jobs' keys reserved first (repeats in the list refused too), the rest sent.

    The report's positions are the input's; refused ones are in ``duplicates`` (a request of the key is queued)
    or ``cancelled`` (the key was cancelled). A debounced job's message is refused (``refuse_debounced``).
    """
    from sqsjobs.enqueue._producer import EnqueueReport

    for message in messages:
        refuse_debounced(message)

    dedup = [i for i, m in enumerate(messages) if m.source is not None and DEDUPE.of(m.source.options) is not None]
    if not dedup:
        return send(list(messages))
    chosen = [messages[i] for i in dedup]
    modes = [mode for m in chosen if m.source is not None and (mode := DEDUPE.of(m.source.options)) is not None]
    now = runtime.clock()
    holds = [dedupe_hold(m.source.options, runtime.settings, _due(m, now) - now) for m in chosen
             if m.source is not None]
    receipts = dict(zip(dedup, reserve(runtime, chosen, modes, holds), strict=True))
    kept = [i for i in range(len(messages)) if i not in receipts or not receipts[i].refused]
    report = send([messages[i] for i in kept])
    for failed in report.failed:  # not sent: the key is given back
        if kept[failed.index] in receipts:
            unreserve(runtime, messages[kept[failed.index]], receipts[kept[failed.index]])
    return EnqueueReport(
        message_ids={kept[i]: mid for i, mid in report.message_ids.items()},
        failed=tuple(replace(f, index=kept[f.index]) for f in report.failed), calls=report.calls,
        scheduled={kept[i]: s for i, s in report.scheduled.items()},
        duplicates={i: str(r) for i, r in receipts.items() if r.duplicate},
        cancelled={i: str(r) for i, r in receipts.items() if r.cancelled})


@dataclass(frozen=True, kw_only=True)
class Coalescing:
    """What ``sqsjobs job KEY`` adds for a debounced or deduplicated key (``coalescing``).

    Example:
        >>> from sqsjobs.store._lease import LeaseItem, LeaseState
        >>> item = LeaseItem(key="reindex:7", state=LeaseState.RELEASED, data={
        ...     "job": "reindex", "debounce_token": "b", "debounce_due": 60.0, "debounce_count": 20})
        >>> view = coalescing(item, now=0.0)
        >>> view.state, view.coalesced, view.due_at
        ('waiting', 20, 60.0)
    """

    key: str
    job: str | None
    #: ``waiting`` (a debounced burst not claimed yet) or ``queued`` (a deduplicated request holds the key)
    state: str
    due_at: float | None = None
    #: the enqueues the waiting burst coalesced
    coalesced: int = 0
    #: the deduplicated request that holds the key, until when at most, and how
    request: str | None = None
    held_until: float | None = None
    dedupe: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The view as JSON-ready fields."""
        return asdict(self)


def coalescing(item: LeaseItem, *, now: float) -> Coalescing | None:
    """A debounced key's waiting burst, or a deduplicated key's live reservation; None when neither."""
    token = item.get("debounce_token")
    if token is not None and item.get("ran_token") != token:
        count = int(item.get("debounce_count") or 0) - int(item.get("debounce_base") or 0)
        return Coalescing(key=item.key, job=item.get("job"), state="waiting", due_at=item.get("debounce_due"),
                          coalesced=count)
    until = item.get("queued_until")
    if item.get("queued_id") is not None and until is not None and until >= now:
        return Coalescing(key=item.key, job=item.get("job"), state="queued", request=item.get("queued_id"),
                          held_until=until, dedupe=item.get("queued_mode"))
    return None
