"""Test an app's own jobs in-process: ``with app.testing() as t:`` (or ``sqsjobs.testing.use(app)``).

Inside the block the app's idempotency store is an ``InMemoryStore``, its SQS
client a recording ``FakeSQS``, its clock a ``ManualClock`` and its metrics a
list; ``JobApp.use`` swaps them in and puts the app back exactly as it was
afterwards, so the app a test imports (``handlers.app:app``) is the one it
drives, and nothing leaks into the next test.

``t.run(...)`` delivers messages as one batch, the way Lambda's SQS poller
does; ``t.drain()`` plays the poller over the jobs queue until it is empty,
moving the clock to each retry instead of sleeping. ``t.outcomes``,
``t.enqueued()``, ``t.dead_letters()`` and ``t.calls`` show what happened.

A job due beyond SQS's 900 s (``delay=2 * 86_400``), and a retry beyond 12
hours, waits in a ``FakeScheduler`` one-time schedule, as it would in
EventBridge Scheduler: ``t.scheduled()`` lists them, ``t.advance(seconds)``
moves the clock and sends what fell due to its queue, and ``t.drain()`` runs it
(``drain`` never jumps ahead to a schedule: time beyond SQS's is the test's to
give). ``app.cancel(key)`` and ``replace=True`` act on those schedules too.

Example:
    >>> from sqsjobs import JobApp, Outcome
    >>> app = JobApp()
    >>> sent = []
    >>> @app.job("greet", key="greet:{user_id}")
    ... def greet(user_id: int) -> None:
    ...     sent.append(user_id)
    >>> with app.testing() as t:
    ...     result = t.run(greet.message(user_id=7), greet.message(user_id=7))
    ...     [o.outcome.value for o in t.outcomes], sent
    (['succeeded', 'duplicate'], [7])
    >>> app.settings.queue_url is None  # restored
    True
"""

from __future__ import annotations

import heapq
import json
import random as _random
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqsjobs.enqueue._message import ATTR_TRACE_ID
from sqsjobs.store._memory import InMemoryStore
from sqsjobs.testing.events import FakeContext, record_from_message
from sqsjobs.testing.fake_scheduler import FakeSchedule, FakeScheduler
from sqsjobs.testing.fake_sqs import FakeSQS, QueuedMessage, SqsCall
from sqsjobs.testing.records import given_attempts

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from sqsjobs._app import JobApp
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.ops._dlq_letters import DlqMessage
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._delivery import BatchResult, Outcome
    from sqsjobs.workflows._callback_sender import CallbackSender

#: 2026-01-01T00:00:00Z: where a ManualClock starts
EPOCH = 1_767_225_600.0
DEFAULT_QUEUE = "sqsjobs-test-jobs"
DEFAULT_DLQ = "sqsjobs-test-dlq"
#: the schedule group and delivery role an app under test gets when it has none
DEFAULT_SCHEDULE_GROUP = "sqsjobs-test-delayed"
DEFAULT_SCHEDULER_ROLE = "arn:aws:iam::123456789012:role/sqsjobs-test-delivery"


class ManualClock:
    """Epoch seconds that move only when a test (or a retry delay) moves them; a timer on them, too.

    The worker's timers (``sqsjobs.worker._timer``: a finished job's record written within ``flush_after``, the
    deadline margin) run on this clock: ``advance`` calls whatever fell due, in order, each with the clock
    set to its own moment, before it returns. A job that "runs for 600 s" by advancing the clock sees the
    records of the jobs that finished before it written after one second, as a Lambda would.

    Example:
        >>> clock = ManualClock()
        >>> fired = []
        >>> _ = clock.call_at(EPOCH + 1, lambda: fired.append(clock() - EPOCH))
        >>> clock.advance(30); clock() - EPOCH, fired
        (30.0, [1.0])
    """

    def __init__(self, now: float = EPOCH) -> None:
        self.now = float(now)
        self._due: list[_Due] = []
        self._lock = threading.Lock()
        self._order = 0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        """Move the clock forward by ``seconds``, calling each timer that falls due on the way."""
        with self._lock:
            target = self.now + float(seconds)
        while True:
            with self._lock:
                due = self._due[0] if self._due and self._due[0].when <= target else None
                if due is not None:
                    heapq.heappop(self._due)
                    self.now = max(self.now, due.when)
            if due is None:
                break
            due.callback()  # outside the lock: it may advance the clock itself (a retry's pause)
        with self._lock:
            self.now = max(self.now, target)

    def call_at(self, when: float, callback: Callable[[], None]) -> _Due:
        """Call ``callback`` once ``advance`` reaches ``when``; ``cancel()`` the handle to take it back."""
        with self._lock:
            self._order += 1
            due = _Due(when=float(when), order=self._order, callback=callback, clock=self)
            heapq.heappush(self._due, due)
        return due

    def _cancel(self, due: _Due) -> None:
        with self._lock:
            if due in self._due:
                self._due.remove(due)
                heapq.heapify(self._due)


@dataclass(eq=False)
class _Due:
    """One timer of a ``ManualClock``."""

    when: float
    order: int
    callback: Callable[[], None]
    clock: ManualClock

    def __lt__(self, other: _Due) -> bool:
        return (self.when, self.order) < (other.when, other.order)

    def cancel(self) -> None:
        self.clock._cancel(self)


@dataclass(frozen=True, kw_only=True)
class JobOutcome:
    """What the worker did with one delivered message."""

    job: str
    key: str
    outcome: Outcome
    message_id: str
    attempt: int
    error: BaseException | None
    result: Any


@dataclass(frozen=True, kw_only=True)
class SentJob:
    """A job message the code under test sent to the jobs queue."""

    job: str | None
    key: str | None
    args: dict[str, Any]
    message_id: str
    delay: float
    group: str | None
    trace_id: str | None


class JobTester:
    """The handle ``app.testing()`` yields: run batches, drain the queue, read what happened."""

    def __init__(self, app: JobApp, *, sqs: FakeSQS, store: LeaseStore, clock: ManualClock,
                 metrics: list[str], scheduler: FakeScheduler, callbacks: Any = None) -> None:
        self.app = app
        #: what answered the workflows' callbacks (a ``FakeCallbacks`` unless the test gave its own)
        self.callbacks = callbacks
        self.sqs = sqs
        #: the one-time schedules delayed jobs and long retries wait in
        self.scheduler = scheduler
        self.store = store
        self.clock = clock
        #: the EMF metric documents the worker wrote (JSON text), in order
        self.metrics = metrics
        #: every batch run, in order
        self.results: list[BatchResult] = []

    @property
    def queue_url(self) -> str:
        """The jobs queue (the app's ``queue_url``, or a fake one when the app has none)."""
        return self.app.settings.require("queue_url")

    @property
    def queue_urls(self) -> list[str]:
        """Every jobs queue: the default one first, then the named ones (``queue="critical"``), by name."""
        named = [url for _, url in sorted(self.app.settings.queues.items()) if url]
        return [self.queue_url, *(url for url in named if url != self.queue_url)]

    @property
    def dlq_url(self) -> str:
        """The DLQ the worker dead-letters to."""
        return self.app.settings.require("dlq_url")

    @property
    def calls(self) -> list[SqsCall]:
        """Every SQS call the app made (the poller's own receives and deletes are not among them)."""
        return self.sqs.calls

    @property
    def outcomes(self) -> list[JobOutcome]:
        """What became of every delivered message, batch after batch."""
        return [
            JobOutcome(job=d.job_name, key=d.key, outcome=d.outcome, message_id=d.message_id, attempt=d.attempt,
                       error=d.error, result=d.result)
            for result in self.results for d in result.deliveries if d.outcome is not None
        ]

    def count(self, outcome: Outcome, job: str | None = None) -> int:
        """How many deliveries ended with ``outcome`` (of ``job``, when given)."""
        return sum(1 for o in self.outcomes if o.outcome is outcome and (job is None or o.job == job))

    def run(self, *messages: JobMessage | Mapping[str, Any] | str, attempt: int = 1,
            remaining_ms: int = 60_000) -> BatchResult:
        """Deliver ``messages`` to the worker as one batch; return what it did.

        Each is a ``JobMessage`` (``job.message(...)``), an envelope dict or a raw body
        (to test a malformed one). ``attempt`` is the attempt they are (5: the fifth):
        their receive count, and for a ``JobMessage`` whose key has no record yet, a
        record of ``attempt - 1`` failed runs (attempts are counted in the record).
        """
        if not messages:
            raise ValueError("run() needs at least one message (an empty batch is not an SQS event)")
        if attempt < 1:
            raise ValueError(f"attempt counts deliveries from 1, got {attempt}")
        from sqsjobs.enqueue._message import JobMessage

        if attempt > 1:
            for sent in messages:
                if isinstance(sent, JobMessage) and sent.key and self.app.status(sent.key) is None:
                    given_attempts(self.app, sent, attempt - 1, now=self.clock())
        placed = [self._place(message) for message in messages]
        for message in placed:
            message.receive_count = attempt - 1
        only = {m.message_id for m in placed}
        # One batch comes from one queue, as one event source mapping delivers it.
        urls = {url for url in self.queue_urls if any(m.message_id in only for m in self.sqs.messages(url))}
        if len(urls) > 1:
            raise ValueError("run() delivers one batch from one queue: these messages go to different queues")
        url = urls.pop() if urls else self.queue_url
        taken = self.sqs.receive(url, len(placed), only=only)
        return self._deliver(taken, remaining_ms, url)

    def drain(self, *, max_batches: int = 100, batch_size: int = 10, remaining_ms: int = 60_000) -> list[BatchResult]:
        """Run the jobs queues' messages (what the code under test enqueued) until they are empty.

        Every queue of the app is polled (the default one, then the named ones), one
        batch per queue per round. Retries come back when their delay has passed on
        the clock, which jumps ahead instead of sleeping. Raises ``AssertionError`` if
        ``max_batches`` do not empty them.
        """
        results: list[BatchResult] = []
        while len(results) < max_batches:
            self.scheduler.fire_due()  # what fell due (the clock jumps below) goes to its queue first
            batches = [(url, taken) for url in self.queue_urls if (taken := self.sqs.receive(url, batch_size))]
            if not batches:
                waiting = [at for url in self.queue_urls if (at := self.sqs.next_visible_at(url)) is not None]
                if not waiting:
                    return results
                self.clock.advance(max(0.0, min(waiting) - self.clock()))
                continue
            for url, taken in batches:
                results.append(self._deliver(taken, remaining_ms, url))
        left = sum(len(self.sqs.messages(url)) for url in self.queue_urls)
        if left:
            raise AssertionError(f"the jobs queues still hold {left} message(s) after {len(results)} batches")
        return results

    def advance(self, seconds: float) -> list[FakeSchedule]:
        """Move the clock ``seconds`` ahead and send the schedules that fell due to their queues; those sent.

        ``t.drain()`` then runs them.

        Example:
            >>> from sqsjobs import JobApp
            >>> app = JobApp()
            >>> @app.job("digest", key="digest:{user_id}")
            ... def digest(user_id: int) -> None: ...
            >>> with app.testing() as t:
            ...     _ = digest.enqueue(user_id=7, delay=2 * 86_400)
            ...     [(s.key, s.kind) for s in t.scheduled()], t.drain()
            ...     [s.key for s in t.advance(2 * 86_400)], [o.outcome.value for o in t.drain()[0].deliveries]
            ([('digest:7', 'enqueue')], [])
            (['digest:7'], ['succeeded'])
        """
        self.clock.advance(seconds)
        return self.scheduler.fire_due()

    def scheduled(self, job: str | None = None) -> list[FakeSchedule]:
        """The schedules waiting (of ``job``, when given), soonest first: delayed enqueues and long retries."""
        return [s for s in self.scheduler.pending() if job is None or s.job == job]

    def enqueued(self, job: str | None = None) -> list[SentJob]:
        """The job messages the code under test sent to the jobs queues (of ``job``, when given), oldest first."""
        sent = [_sent_job(m) for m in sorted((m for url in self.queue_urls for m in self.sqs.sent_to(url)),
                                             key=lambda m: m.sent_at)]
        return [s for s in sent if job is None or s.job == job]

    def dead_letters(self) -> list[DlqMessage]:
        """The letters on the DLQ, read as ``sqsjobs status`` reads them: checked against the store's evidence."""
        from sqsjobs.ops._dlq_evidence import read_letters

        messages = [m.to_wire() for m in self.sqs.messages(self.dlq_url)]
        return list(read_letters(messages, records=self.store, now=self.clock()).letters)  # type: ignore[arg-type]

    def _place(self, message: JobMessage | Mapping[str, Any] | str) -> QueuedMessage:
        if isinstance(message, str):
            return self.sqs.put(self.queue_url, message)
        if isinstance(message, Mapping):
            return self.sqs.put(self.queue_url, json.dumps(message))
        url = self.app.runtime.router.url(message.queue)
        fifo = url.endswith(".fifo")
        return self.sqs.put(url, message.body, attributes=message.attributes(),
                            group_id=(message.group or message.key[:128]) if fifo else message.tenant,
                            dedup_id=message.dedup_id if fifo else None)

    def _deliver(self, taken: list[QueuedMessage], remaining_ms: int, queue_url: str) -> BatchResult:
        arn = self.sqs.arn(queue_url)
        event = {"Records": [record_from_message(m.to_wire(), arn) for m in taken]}
        result = self.app.process_batch(event, FakeContext(remaining_ms=remaining_ms, clock=self.clock))
        failed = set(result.failures)
        for message in taken:
            if message.message_id not in failed:
                self.sqs.remove(message)  # Lambda's poller deletes what the batch did not report failed
        self.results.append(result)
        return result


@contextmanager
def use(
    app: JobApp,
    *,
    sqs: FakeSQS | None = None,
    store: LeaseStore | None = None,
    clock: ManualClock | None = None,
    random: _random.Random | None = None,
    dynamodb_client: DynamoDBClient | None = None,
    settings: Mapping[str, Any] | None = None,
    scheduler: FakeScheduler | None = None,
    callbacks: CallbackSender | None = None,
) -> Iterator[JobTester]:
    """Drive ``app`` with an in-memory store, a recording fake SQS and a manual clock; restore it afterwards.

    ``settings`` override the app's (``{"max_attempts": 3}``); a queue URL and a DLQ URL are
    made up when the app has none, and so is the URL of a named queue known by name only
    (``queues={"critical": None}``). ``dynamodb_client`` (e.g. moto's) is for jobs that use
    DynamoDB themselves: chunked and scheduled jobs, transactions. Delayed jobs wait in a
    ``FakeScheduler`` (``scheduler``) on the same clock, in the app's schedule group or a made-up one.
    Workflow callbacks (``callback=``, docs/durable.md) are answered into ``callbacks``: a
    ``FakeCallbacks`` unless given (``RunnerCallbacks(runner)`` routes them to a durable test runner).
    """
    from sqsjobs.testing.callbacks import FakeCallbacks  # workflows' modules: only for a test that drives an app

    clock = clock or ManualClock()
    sqs = sqs or FakeSQS(clock=clock)
    scheduler = scheduler or FakeScheduler(sqs=sqs, clock=clock)
    store = store if store is not None else InMemoryStore()
    callbacks = callbacks if callbacks is not None else FakeCallbacks()
    metrics: list[str] = []
    named = {name: url or sqs.queue_url(f"{DEFAULT_QUEUE}-{name}") for name, url in app.settings.queues.items()}
    overrides: dict[str, Any] = {
        "queue_url": app.settings.queue_url or sqs.queue_url(DEFAULT_QUEUE),
        "dlq_url": app.settings.dlq_url or sqs.queue_url(DEFAULT_DLQ),
        "schedule_group": app.settings.schedule_group or DEFAULT_SCHEDULE_GROUP,
        "scheduler_role_arn": app.settings.scheduler_role_arn or DEFAULT_SCHEDULER_ROLE,
        **({"queues": named} if named else {}),
        **(settings or {}),
    }
    limit = int(overrides.get("max_message_bytes", app.settings.max_message_bytes))
    for url in [overrides["queue_url"], overrides["dlq_url"], *named.values()]:
        sqs.set_maximum_message_size(url, limit)  # the template gives the queues and the functions one size
    with app.use(store=store, sqs_client=sqs, dynamodb_client=dynamodb_client, clock=clock,
                 random=random or _random.Random(0), sleep=clock.advance, emit_metrics=metrics.append,
                 settings=overrides, scheduler_client=scheduler, callback_sender=callbacks):
        yield JobTester(app, sqs=sqs, store=store, clock=clock, metrics=metrics, scheduler=scheduler,
                        callbacks=callbacks)


def _sent_job(message: QueuedMessage) -> SentJob:
    try:
        body = json.loads(message.body)
    except ValueError:
        body = {}
    body = body if isinstance(body, dict) else {}
    args = body.get("args")
    return SentJob(job=body.get("job"), key=body.get("key"), args=args if isinstance(args, dict) else {},
                   message_id=message.message_id, delay=max(0.0, message.visible_at - message.sent_at),
                   group=message.group_id, trace_id=message.attribute(ATTR_TRACE_ID))
