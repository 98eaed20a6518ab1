"""The world the runtime model drives: the real worker over an in-memory store and a fake SQS, and a ledger.

Jobs run as users write them: plain functions (one at a time), ``async def``
jobs (``aa``, ``aconc`` under the concurrency limit, the batch handler ``abat``;
each yields to the loop a random number of times before and after its side
effect, so their completions come in random orders) and ``threads=True`` jobs
(``th``, on threads of their own, one at a time: ``SerialThreads``), several in
flight in one batch; a plan ``slow`` moves the clock past
the crash window's bound inside a job, and a kill may come with several jobs
in flight.

Two deploys of one app (``version`` 1 and 2 of job ``c``) share one fake SQS
(whose jobs queue has SQS's redrive policy: the backstop), one in-memory store
that fails the writes a rule arms (``FlakyStore``), one manual clock and one
seeded random. The batch handlers ``bat``, ``batlim`` and ``batconc`` run each item of a call as a job of its own
(``execute_items``), so every invariant counts items. Every job function reports to the ledger: when it started,
whether the invocation is killed before or after its side effect, and which
runs of its key are active, so the invariants below can be checked after every
step (``check``) and once the world has settled (``settle``).

The invariants (docs/reliability.md states them for users):

1. nothing is lost: every message that left the jobs queue ran, was a
   duplicate of a completed key, was cancelled or expired (with its metric),
   was re-sent (the copy is tracked in turn), or is in the DLQ with a reason
   the worker wrote;
2. side effects per key <= 1 + kills that found it exposed + completion
   writes that failed after their retries (both counted per key). A kill
   exposes, in time: the jobs running at the kill, and those that finished
   less than ``flush_after`` (the worker's crash window) before it; a job
   that finished earlier must have its record written by then, unless the
   store failed a write of that invocation (the ledger says which);
3. a group's callback runs once (a callback is a job like any other: only a
   kill after its side effect or its unrecorded completion may repeat it, as
   invariant 2 bounds), only after every member is terminal, and a finished
   group's counts add up to its total;
4. no limiter is exceeded (rate: starts in any window; concurrency: runs at once);
5. nothing but an invocation's own death escapes ``handle_batch``;
6. a key never runs twice at once, and a delivery of another job's key is
   never taken for its duplicate;
7. debounce (job ``deb``, each enqueue's ``v`` unique): side effects per burst
   (its ``v``) obey invariant 2, runs of one key never overlap, a delivery
   acknowledged as superseded carries a token that is not its key's latest
   (``JobSuperseded`` counts each), and once settled the last burst of every
   key ran with its arguments, unless its message is in the DLQ;
8. dedupe (``dd`` until_done, ``ds`` until_started): a refused enqueue sent
   nothing (``JobDeduplicated`` counts each) and its key had a message in the
   jobs queue or the DLQ, or (``dd``) a run holding it.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict

from sqsjobs import JobApp, Outcome, PermanentError
from sqsjobs.store._lease import LeaseState, Operation
from sqsjobs.store._lease_ops import Acquire, Amend, Close, Complete, Release, Renew, Transact
from sqsjobs.testing.events import FakeContext, record_from_message
from sqsjobs.testing.fake_sqs import FakeSQS, QueuedMessage
from sqsjobs.testing.flaky_store import FlakyStore
from sqsjobs.testing.tester import ManualClock
from sqsjobs.worker._record_writes import FLUSH_AFTER

MAX_ATTEMPTS = 3
#: SQS's redrive moves a message received more often than this (template.yaml: MaxAttempts + 1)
MAX_RECEIVE_COUNT = MAX_ATTEMPTS + 1
BACKSTOP_SLACK = MAX_RECEIVE_COUNT - (MAX_ATTEMPTS + 1)
FUNCTION_TIMEOUT = 60.0
RATE, PER = 1, 10.0
SLOTS = 1
EXPIRES_IN = 40.0
DEBOUNCE = 4.0
#: the jobs a rule may enqueue alone or as members and steps
PLAIN_JOBS = ("a", "b", "c", "lim", "conc", "exp", "bat", "batlim", "batconc", "aa", "th", "aconc", "abat")
MEMBER_JOBS = ("a", "b", "c", "exp", "bat", "aa", "th")
#: items per call of the batch handlers ``bat``, ``batlim`` and ``batconc`` (``batlim`` shares ``lim``'s rate limit,
#: ``batconc`` ``conc``'s slots)
BATCH = 3
#: the batch handlers (a rule enqueues all of one's keys at once)
BATCH_JOBS = ("bat", "batlim", "batconc", "abat")
#: the jobs whose starts the rate limit counts
RATE_JOBS = ("lim", "batlim")
#: the jobs whose runs at once the concurrency limit counts
SLOT_JOBS = ("conc", "batconc", "aconc")
#: what one execution of a job does (``slow``: it takes longer than the crash window's bound; ``timeout``: it does,
#: and the invocation dies then, as Lambda's timeout kills one: issue 32's story)
PLANS = ("ok", "transient", "permanent", "kill_before", "kill_after", "nest", "slow", "timeout")
#: how long a ``slow`` job takes (the ManualClock moves: the worker's flush timer fires meanwhile)
SLOW_SECONDS = 2.0

#: the writes a store fault may hit
FAULTS = ("claim", "completion", "retry_record", "dead_letter_record", "count", "limiter", "any")


class BatItem(TypedDict):
    """One item of the batch handlers ``bat`` and ``batlim``."""

    n: int


class Killed(BaseException):
    """The invocation dies here (a timeout, out of memory): nothing after it runs, nothing is acknowledged."""


@dataclass
class Invocation:
    """What one invocation's jobs did (each job finds its own through a context variable, on any thread)."""

    #: the side effects, in order (a side effect's key), and the record each belongs to
    effects: list[str] = field(default_factory=list)
    records: dict[str, str] = field(default_factory=dict)
    #: when each job whose side effect happened returned (a batch handler's items: when the call returned)
    finished: dict[str, float] = field(default_factory=dict)
    #: when a job of it raised ``Killed``
    killed_at: float | None = None
    #: the store's injected failures when it started
    failures_before: int = 0


_INVOCATION: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar("model_invocation", default=None)


class SerialThreads:
    """The model's job threads: a ``threads=True`` job runs on a thread of its own, the next one only once it
    ended, while the invocation's thread waits.

    Hypothesis replays a story exactly, so the model may not let the OS choose how threads interleave: here a
    threaded job runs off the invocation's thread (its context copied there, its bookkeeping done there under
    the batch's lock), deterministically. Threaded jobs that truly overlap are tested in
    tests/unit/test_batch_concurrency.py and tests/integration/test_async_moto.py.
    """

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        done: Future[Any] = Future()

        def run() -> None:
            try:
                done.set_result(fn(*args))
            except BaseException as error:  # a kill too: the run step raises it from the future
                done.set_exception(error)

        thread = threading.Thread(target=run, name="model-job-thread")
        thread.start()
        thread.join()
        return done


def _ops(op: Operation) -> tuple[Operation, ...]:
    return op.ops if isinstance(op, Transact) else (op,)


def fault_matcher(kind: str) -> Callable[[Operation], bool]:
    """Which writes a store fault of ``kind`` hits."""
    def reserved(key: str) -> bool:
        return "#" in key

    def job_key_op(op: Operation, cls: type, outcome: str | None = None) -> bool:
        return any(isinstance(o, cls) and not reserved(o.key)
                   and (outcome is None or o.data.get("outcome") == outcome) for o in _ops(op))

    matchers: dict[str, Callable[[Operation], bool]] = {
        "claim": lambda op: job_key_op(op, Acquire),
        "completion": lambda op: job_key_op(op, Complete),
        "retry_record": lambda op: job_key_op(op, Release, "retrying"),
        "dead_letter_record": lambda op: job_key_op(op, Release, "dead_lettered")
        or job_key_op(op, Close, "dead_lettered"),
        "count": lambda op: any(o.key.startswith("group#") and isinstance(o, Amend | Close) for o in _ops(op)),
        "limiter": lambda op: any(o.key.startswith("limit#") and isinstance(o, Acquire | Renew | Release)
                                  for o in _ops(op)),
        "any": lambda op: True,
    }
    return matchers[kind]


@dataclass
class GroupBook:
    """What the model knows of one group it enqueued."""

    id: str
    label: str
    members: list[str]
    callbacks: dict[str, str]  # callback kind -> its ``g`` argument
    runs: Counter[str] = field(default_factory=Counter)  # callback kind -> runs


@dataclass
class Ledger:
    """What happened, from the jobs' side and the poller's side."""

    effects: Counter[str] = field(default_factory=Counter)
    kills_after: Counter[str] = field(default_factory=Counter)
    #: completion writes that failed after the worker's retries, per key (BatchResult.unrecorded)
    unrecorded: Counter[str] = field(default_factory=Counter)
    #: message id -> the outcome of the delivery that acknowledged it
    acked: dict[str, Outcome | None] = field(default_factory=dict)
    #: message id -> how many of its receives were killed at or past its backstop receive, or were SQS delivering
    #: it again after its delete at or past that receive (SQS's redrive then moves it: no worker sees it)
    killed_late: Counter[str] = field(default_factory=Counter)
    starts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    active: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    cancelled_or_expired: Counter[Outcome] = field(default_factory=Counter)
    #: keys whose job reached a terminal outcome at least once (succeeded, cancelled, expired, dead-lettered)
    ended: set[str] = field(default_factory=set)
    #: a debounced key -> the ``v`` of its last enqueue that wrote its token
    last_burst: dict[str, int] = field(default_factory=dict)
    superseded: int = 0
    #: a burst token -> the ``v`` of the enqueue that wrote it
    tokens: dict[str, int] = field(default_factory=dict)
    deduplicated: int = 0


class World:
    """Two deploys of one app over one fake SQS, one flaky store, one clock (see the module docstring)."""

    def __init__(self, seed: int) -> None:
        self.clock = ManualClock()
        self.random = random.Random(seed)
        self.sqs = FakeSQS(clock=self.clock)
        self.queue = self.sqs.queue_url("jobs")
        self.dlq = self.sqs.queue_url("jobs-dlq")
        self.sqs.set_redrive_policy(self.queue, self.dlq, MAX_RECEIVE_COUNT)
        self.store = FlakyStore()
        self.metrics: list[str] = []
        self.ledger = Ledger()
        self.groups: list[GroupBook] = []
        self.chains: list[list[str]] = []
        self._plans: list[str] = []
        self._nest: Callable[[], None] | None = None
        #: jobs of one batch run on several threads: the ledger and the plans are changed under this lock
        self._lock = threading.RLock()
        #: DLQ letters a redrive moved back (the message they were is neither queued nor in the DLQ now)
        self.redriven: set[str] = set()
        #: messages the poller deleted: SQS's at-least-once delivery may bring one back (``FakeSQS.deliver_again``)
        self.deleted: list[QueuedMessage] = []
        self._emitted: Counter[str] = Counter()
        self._metrics_read = 0
        #: the ``v`` of the last debounced enqueue (each one's is unique)
        self.edits = 0
        self.apps = [self._app(version) for version in (1, 2)]

    # ------------------------------------------------------------ the apps
    def _app(self, version: int) -> JobApp:
        app = JobApp(queue_url=self.queue, dlq_url=self.dlq, max_attempts=MAX_ATTEMPTS,
                     function_timeout=FUNCTION_TIMEOUT, backoff_base=2.0, backoff_cap=30.0,
                     store=self.store, sqs_client=self.sqs, clock=self.clock,  # type: ignore[arg-type]
                     random=random.Random(self.random.random()), sleep=self.clock.advance,
                     emit_metrics=self.metrics.append, environ={})
        app.rate_limit("rate", rate=RATE, per=PER)
        app.concurrency_limit("slots", SLOTS)

        @app.job("a", key="k:{n}")
        def a(n: int) -> None:
            self.execute("a", f"k:{n}")

        @app.job("b", key="k:{n}")  # two jobs on one key template
        def b(n: int) -> None:
            self.execute("b", f"k:{n}")

        if version == 1:
            @app.job("c", key="c:{n}")
            def c1(n: int) -> None:
                self.execute("c", f"c:{n}")
        else:
            @app.job("c", key="c:{n}", version=2)
            def c2(n: int, loud: bool = False) -> None:
                self.execute("c", f"c:{n}")

            @c2.upcaster(from_version=1)
            def quiet(args: dict[str, Any]) -> dict[str, Any]:
                return {**args, "loud": False}

        @app.job("lim", key="lim:{n}", limits=["rate"])
        def lim(n: int) -> None:
            self.execute("lim", f"lim:{n}")

        @app.job("conc", key="conc:{n}", limits=["slots"])
        def conc(n: int) -> None:
            self.execute("conc", f"conc:{n}")

        @app.job("exp", key="exp:{n}", expires_in=EXPIRES_IN)
        def exp(n: int) -> None:
            self.execute("exp", f"exp:{n}")

        @app.job("deb", key="deb:{n}", debounce=DEBOUNCE)
        def deb(n: int, v: int) -> None:
            self.execute_debounced(n, v)

        @app.job("dd", key="dd:{n}", dedupe="until_done")
        def dd(n: int) -> None:
            self.execute("dd", f"dd:{n}")

        @app.job("ds", key="ds:{n}", dedupe="until_started")
        def ds(n: int) -> None:
            self.execute("ds", f"ds:{n}")
        @app.job("bat", key="bat:{n}", batch=BATCH)
        def bat(items: list[BatItem]) -> dict[int, BaseException]:
            return self.execute_items("bat", items)

        @app.job("batlim", key="batlim:{n}", batch=BATCH, limits=["rate"])
        def batlim(items: list[BatItem]) -> dict[int, BaseException]:
            return self.execute_items("batlim", items)

        @app.job("batconc", key="batconc:{n}", batch=BATCH, limits=["slots"])
        def batconc(items: list[BatItem]) -> dict[int, BaseException]:
            return self.execute_items("batconc", items)

        @app.job("aa", key="aa:{n}")
        async def aa(n: int) -> None:
            await self.execute_async("aa", f"aa:{n}")

        @app.job("th", key="th:{n}", threads=True)
        def th(n: int) -> None:
            self.execute("th", f"th:{n}")

        @app.job("aconc", key="aconc:{n}", limits=["slots"])
        async def aconc(n: int) -> None:
            await self.execute_async("aconc", f"aconc:{n}")

        @app.job("abat", key="abat:{n}", batch=BATCH)
        async def abat(items: list[BatItem]) -> dict[int, BaseException]:
            await self.pause()
            return self.execute_items("abat", items)

        @app.job("report", key="report:{g}")
        def report(g: str) -> None:
            self.callback(g)

        @app.scheduled("tick", schedule="rate(1 hour)")
        def tick(period: str) -> None:
            self.execute("tick", f"tick:{period}")

        app.runtime.consumer.runners._pool = SerialThreads()  # type: ignore[assignment]
        return app

    # ------------------------------------------------------------ what the jobs do
    def execute(self, job: str, key: str) -> None:
        """One run of a job: checks, then the plan the running rule drew for it."""
        plan = self._start(job, key)
        try:
            self._body(plan, key)
        finally:
            self._stop(key)
        self._finished(key)

    async def execute_async(self, job: str, key: str) -> None:
        """``execute`` for an async job: it yields to the loop before and after its body, a random number of times."""
        plan = self._start(job, key)
        try:
            await self.pause()
            self._body(plan, key)
            await self.pause()
        finally:
            self._stop(key)
        self._finished(key)

    async def pause(self) -> None:
        with self._lock:
            turns = self.random.randint(0, 3)
        for _ in range(turns):
            await asyncio.sleep(0)

    def _start(self, job: str, key: str) -> str:
        led = self.ledger
        with self._lock:
            now = self.clock()
            plan = self._plans.pop(0) if self._plans else "ok"
            if led.active[key]:
                led.violations.append(f"{key} started while another run of it was still going")
            if job in RATE_JOBS:
                recent = [t for name in RATE_JOBS for t in led.starts[name] if t > now - PER]
                if len(recent) >= RATE:
                    led.violations.append(f"rate limit exceeded: {len(recent) + 1} starts within {PER} s at {now}")
            if job in SLOT_JOBS and sum(n for k, n in led.active.items() if k.split(":")[0] in SLOT_JOBS) >= SLOTS:
                led.violations.append(f"concurrency limit exceeded at {now}")
            led.starts[job].append(now)
            led.active[key] += 1
        return plan

    def _stop(self, key: str) -> None:
        with self._lock:
            self.ledger.active[key] -= 1

    def _body(self, plan: str, key: str, record: str | None = None) -> None:
        if plan == "kill_before":
            self._kill(key)
        if plan == "transient":
            raise ConnectionError(f"{key}: transient")
        if plan == "permanent":
            raise PermanentError(f"{key}: permanent")
        if plan in ("slow", "timeout"):
            self.clock.advance(SLOW_SECONDS)  # the worker's timers fire meanwhile
        if plan == "timeout":
            self._kill(key)
        with self._lock:
            if plan == "nest" and self._nest is not None:
                nest, self._nest = self._nest, None
            else:
                nest = None
        if nest is not None:
            nest()  # a second invocation runs while this one is inside its job
        with self._lock:
            self.ledger.effects[key] += 1
            invocation = _INVOCATION.get()
            if invocation is not None:
                invocation.effects.append(key)
                invocation.records[key] = record or key
        if plan == "kill_after":
            self._kill(key)

    def _kill(self, key: str) -> None:
        invocation = _INVOCATION.get()
        if invocation is not None and invocation.killed_at is None:
            invocation.killed_at = self.clock()
        raise Killed(key)

    def _finished(self, *keys: str) -> None:
        """Jobs returned (their side effects are done): the worker records them from now on."""
        invocation = _INVOCATION.get()
        if invocation is None:
            return
        with self._lock:
            now = self.clock()
            for key in keys:
                if key in invocation.records:
                    invocation.finished.setdefault(key, now)

    def execute_debounced(self, n: int, v: int) -> None:
        """One run of a debounced burst: the burst (``v``) is the unit of side effects, the key that of overlap."""
        key = f"deb:{n}"
        if self.ledger.active[key]:
            self.ledger.violations.append(f"{key} started while another run of it was still going")
        item = self.store.get(key)
        latest = item.get("debounce_token") if item is not None else None
        if latest is None or self.ledger.tokens.get(latest) != v:
            self.ledger.violations.append(f"{key} ran burst v={v}, but its latest burst is "
                                          f"v={self.ledger.tokens.get(latest or '')}")
        with self._lock:
            self.ledger.active[key] += 1
        try:
            plan = self._start("deb", f"{key}@{v}")
            try:
                self._body(plan, f"{key}@{v}", record=key)
            finally:
                self._stop(f"{key}@{v}")
            self._finished(f"{key}@{v}")
        finally:
            self._stop(key)

    def execute_items(self, job: str, items: list[BatItem]) -> dict[int, BaseException]:
        """One call of a batch handler: each item runs as ``execute`` runs a job, with a plan of its own; the
        items whose plan failed are named (a kill ends the whole call, and the invocation)."""
        led = self.ledger
        with self._lock:
            running = sum(n for k, n in led.active.items() if k.split(":")[0] in SLOT_JOBS)
            if job in SLOT_JOBS and running + len(items) > SLOTS:  # a call's items run at once
                led.violations.append(f"concurrency limit exceeded by a call of {len(items)} at {self.clock()}")
        failed: dict[int, BaseException] = {}
        for index, item in enumerate(items):
            key = f"{job}:{item['n']}"
            plan = self._start(job, key)
            try:
                self._body(plan, key)
            except (ConnectionError, PermanentError) as error:
                failed[index] = error
            finally:
                self._stop(key)
        self._finished(*[f"{job}:{item['n']}" for item in items])  # the call returned: every item ends now
        return failed

    def callback(self, g: str) -> None:
        """A group's callback ran: once, and only after every member is terminal."""
        label, _, kind = g.rpartition("-")
        book = next((b for b in self.groups if b.label == label), None)
        with self._lock:
            self.ledger.effects[f"report:{g}"] += 1
            invocation = _INVOCATION.get()
            if invocation is not None:  # a kill soon after exposes it, as it does a job's (``execute``)
                invocation.effects.append(f"report:{g}")
                invocation.records[f"report:{g}"] = f"report:{g}"
        self._finished(f"report:{g}")
        if book is None:
            return
        book.runs[kind] += 1  # at most once, like any key: the side-effect bound in ``check`` holds it
        waiting = [k for k in book.members if not self.terminal(k)]
        if waiting:
            self.ledger.violations.append(f"group {label}: {kind} ran while {waiting} were not terminal")

    def terminal(self, key: str) -> bool:
        """The key's job ended for good once (a redrive may run it again later), or its record says so now."""
        if key in self.ledger.ended:
            return True
        item = self.store.get(key)
        if item is None:
            return False
        return item.state is LeaseState.DONE or item.get("outcome") in ("dead_lettered", "expired")

    # ------------------------------------------------------------ the poller
    @contextmanager
    def plans(self, plans: list[str]) -> Iterator[None]:
        self._plans = list(plans)
        try:
            yield
        finally:
            self._plans = []

    def deliver(self, *, app: int, size: int, remaining_ms: int, nest: Callable[[], None] | None = None) -> None:
        """One invocation of the worker over up to ``size`` visible messages, as Lambda's poller runs it."""
        taken = self.sqs.receive(self.queue, size)
        if not taken:
            return
        self._nest = nest
        arn = self.sqs.arn(self.queue)
        event = {"Records": [record_from_message(m.to_wire(), arn) for m in taken]}
        context = FakeContext(remaining_ms=remaining_ms, clock=self.clock)
        invocation = Invocation(failures_before=self.store.failures)
        token = _INVOCATION.set(invocation)
        try:
            result = self.apps[app].process_batch(event, context)
        except Killed:
            self._exposed_by_kill(invocation)
            for message in taken:
                if message.receive_count >= MAX_ATTEMPTS + 1:
                    self.ledger.killed_late[message.message_id] += 1
            return  # nothing is deleted: every message comes back after its visibility timeout
        except Exception as error:
            self.ledger.violations.append(f"handle_batch raised {type(error).__name__}: {error}")
            return
        finally:
            self._nest = None
            _INVOCATION.reset(token)
        failed = set(result.failures)
        bodies = {m.message_id: m.body for m in taken}
        for key in getattr(result, "unrecorded", ()):
            self.ledger.unrecorded[key] += 1
        for d in result.deliveries:
            if d.message_id in failed:
                continue
            self.ledger.acked[d.message_id] = d.outcome
            if d.outcome in (Outcome.SUCCEEDED, Outcome.DUPLICATE, Outcome.CANCELLED, Outcome.EXPIRED,
                             Outcome.DEAD_LETTERED):
                self.ledger.ended.add(d.key)
            if d.outcome in (Outcome.CANCELLED, Outcome.EXPIRED):
                self.ledger.cancelled_or_expired[d.outcome] += 1
            if d.outcome is Outcome.SUPERSEDED:
                self.ledger.superseded += 1
                self._check_superseded(d, bodies[d.message_id])
            self._check_ack(d)
        for message in taken:
            if message.message_id not in failed:
                self.sqs.remove(message)
                self.deleted.append(message)

    def _exposed_by_kill(self, invocation: Invocation) -> None:
        """A kill exposes, in time, the side effects whose record may not be written yet (invariant 2)."""
        killed_at = invocation.killed_at if invocation.killed_at is not None else self.clock()
        store_failed = self.store.failures > invocation.failures_before
        for key in invocation.effects:
            finished = invocation.finished.get(key)
            if finished is None or killed_at < finished + FLUSH_AFTER or store_failed:
                self.ledger.kills_after[key] += 1  # running at the kill, within the window, or a write failed
                continue
            item = self.store.get(invocation.records[key])
            if item is None or item.state is not LeaseState.DONE:
                self.ledger.violations.append(
                    f"{key} returned {killed_at - finished:.1f} s before the kill (the window is {FLUSH_AFTER} s), "
                    f"and its record is {item.state.value if item is not None else 'absent'}, not written")

    def _check_superseded(self, d: Any, body: str) -> None:
        token = json.loads(body).get("debounce")
        item = self.store.get(d.key)
        if token is None or item is None or item.get("debounce_token") == token:
            self.ledger.violations.append(f"{d.message_id} acknowledged as superseded, but its token {token} is "
                                          f"{d.key}'s latest")

    def refused(self, job: str, key: str) -> None:
        """A deduplicated enqueue was refused: a request of its key must be queued (or, for dd, running)."""
        self.ledger.deduplicated += 1
        in_queue = any(json.loads(m.body).get("key") == key for m in self.sqs.messages(self.queue))
        in_dlq = any(json.loads(m.body).get("key") == key for m in self.sqs.messages(self.dlq))
        item = self.store.get(key)
        running = job == "dd" and item is not None and item.held_live(self.clock())
        if not (in_queue or in_dlq or running):
            self.ledger.violations.append(f"an enqueue of {key} was refused, but no request of it is queued")

    def _check_ack(self, d: Any) -> None:
        """An acknowledged delivery ran, or its key was completed, cancelled, or it expired, or is dead-lettered."""
        led = self.ledger
        if d.outcome is Outcome.DUPLICATE:
            item = self.store.get(d.key)
            owner = item.get("job") if item is not None else None
            if item is not None and owner not in (None, d.job_name):
                led.violations.append(f"{d.message_id} ({d.job_name}) acknowledged as a duplicate of {owner}'s "
                                      f"record of {d.key}")
            done = item is not None and item.state is LeaseState.DONE
            if not done and not item_dead_lettered(item, d.message_id) and not led.effects[d.key]:
                led.violations.append(f"{d.message_id} acknowledged as a duplicate of {d.key}, which never ran")
        elif d.outcome is Outcome.CANCELLED:
            item = self.store.get(d.key)
            if item is None or item.get("outcome") != "cancelled":
                led.violations.append(f"{d.message_id} acknowledged as cancelled, but {d.key} is not")
        elif d.outcome is Outcome.DEAD_LETTERED and not any(
                m.attribute("sqsjobs.original_message_id") == d.message_id and m.attribute("sqsjobs.reason")
                for m in self.sqs.sent_to(self.dlq)):
            led.violations.append(f"{d.message_id} acknowledged as dead-lettered with no letter in the DLQ")

    # ------------------------------------------------------------ the checks
    def check(self) -> None:
        """The invariants that hold after every step."""
        led = self.ledger
        assert not led.violations, led.violations
        for key, runs in led.effects.items():
            allowed = 1 + led.kills_after[key] + led.unrecorded[key]
            assert runs <= allowed, (f"{key} had {runs} side effects; allowed {allowed} (kills after the side "
                                     f"effect {led.kills_after[key]}, completions unrecorded {led.unrecorded[key]})")
        jobs_queue = {m.message_id for m in self.sqs.messages(self.queue)}
        dlq = {m.message_id for m in self.sqs.messages(self.dlq)}
        for message in self.sqs.sent_to(self.queue):
            mid = message.message_id
            if mid in jobs_queue or mid in led.acked or mid in dlq or mid in self.redriven:
                continue
            raise AssertionError(f"message {mid} ({message.body[:80]}) is lost: not queued, acknowledged or in the DLQ")
        emitted = self._emitted
        emitted.update(emitted_counts(self.metrics[self._metrics_read:]))
        self._metrics_read = len(self.metrics)
        for outcome, metric in ((Outcome.CANCELLED, "JobCancelled"), (Outcome.EXPIRED, "JobExpired")):
            assert emitted[metric] == led.cancelled_or_expired[outcome], (
                f"{metric}: {emitted[metric]} counted, {led.cancelled_or_expired[outcome]} deliveries")
        assert emitted["JobSuperseded"] == led.superseded, (emitted["JobSuperseded"], led.superseded)
        assert emitted["JobDeduplicated"] == led.deduplicated, (emitted["JobDeduplicated"], led.deduplicated)

    def settle(self) -> None:
        """Run everything to the end, then check what must hold once nothing is moving.

        The store's faults are cleared; SQS refusals still armed are left to run
        out (each is a bounded number of calls), so the dead letters a settling
        world sends meet them too.
        """
        self.store.clear_faults()
        for _ in range(400):
            if not self.sqs.messages(self.queue):
                break
            visible = [m.visible_at for m in self.sqs.messages(self.queue)]
            self.clock.advance(max(0.0, min(visible) - self.clock()))
            self.deliver(app=1, size=10, remaining_ms=60_000)
            self.check()
        assert not self.sqs.messages(self.queue), f"{len(self.sqs.messages(self.queue))} messages never settled"
        for letter in self.sqs.messages(self.dlq):
            if letter.attribute("sqsjobs.reason") is None:
                kills = self.ledger.killed_late[letter.message_id]
                assert kills > BACKSTOP_SLACK, (
                    f"letter {letter.message_id} has no reason the worker wrote ({kills} killed or repeated late "
                    "receives)")
        for key, v in self.ledger.last_burst.items():
            lettered = any(json.loads(m.body).get("args", {}).get("v") == v and json.loads(m.body).get("key") == key
                           for m in self.sqs.messages(self.dlq))
            assert self.ledger.effects[f"{key}@{v}"] >= 1 or lettered, (
                f"{key}'s last burst (v={v}) never ran and is not in the DLQ")
        # A letter SQS's redrive moved after a kill at its backstop receive was never seen by a worker: its group
        # waits, running, until an operator redrives it (docs/runbook.md); such a group is checked only for that.
        moved_by_sqs = {(json.loads(m.body).get("member_of") or {}).get("group") for m in self.sqs.messages(self.dlq)
                        if m.attribute("sqsjobs.reason") is None and self.ledger.killed_late[m.message_id]}
        for book in self.groups:
            status = self.apps[1].group_status(book.id)
            assert status is not None, book.id
            if status.pending and book.id in moved_by_sqs:
                assert status.state == "running" and not book.runs["complete"], (book.id, status, dict(book.runs))
                continue
            assert status.pending == 0, (book.id, status)
            assert status.succeeded + status.failed == status.total, status
            assert book.runs["complete"] >= 1, (book.id, dict(book.runs), status)
            wanted = "success" in book.callbacks and status.state == "succeeded"
            assert bool(book.runs["success"]) == wanted, (book.id, dict(book.runs), status)


def item_dead_lettered(item: Any, message_id: str) -> bool:
    return item is not None and item.get("dead_letter_of") == message_id


def emitted_counts(lines: list[str]) -> Counter[str]:
    """Each metric's total over the ``{service}`` dimension set (every datum counts once there)."""
    totals: Counter[str] = Counter()
    for line in lines:
        doc = json.loads(line)
        directives = doc.get("_aws", {}).get("CloudWatchMetrics", [])
        if not any(["service"] in d.get("Dimensions", []) for d in directives):
            continue
        for directive in directives:
            for metric in directive.get("Metrics", []):
                value = doc.get(metric["Name"])
                totals[metric["Name"]] += int(sum(value) if isinstance(value, list) else value or 0)
    return totals


def message_key(message: QueuedMessage) -> str | None:
    try:
        return str(json.loads(message.body).get("key"))
    except ValueError:
        return None
