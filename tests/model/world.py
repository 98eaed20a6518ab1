"""The world the runtime model drives: the real worker over an in-memory store and a fake SQS, and a ledger.

Jobs run as users write them: plain functions (one at a time), ``async def``
jobs (``aa``, ``aconc`` under the concurrency limit, the batch handler ``abat``;
each yields to the loop a random number of times before and after its side
effect, so their completions come in random orders) and ``threads=True`` jobs
(``th``, on threads of their own, one at a time: ``SerialThreads``), several in
flight in one batch; the plans ``slow`` and ``timeout`` move the clock past
the crash window's bound inside a job (``timeout`` then kills the
invocation), and a kill may come with several jobs in flight.

Two deploys of one app (``version`` 1 and 2 of job ``c``) share one fake SQS
(whose jobs queue has SQS's redrive policy: the backstop, and SQS's largest
``MaximumMessageSize``, 1 MiB, as the apps' ``max_message_bytes``), one
in-memory store that fails the writes a rule arms (``FlakyStore``), one manual
clock (the second deploy's runs ``skew`` seconds ahead of it, or behind: its
leases, windows and records are written and judged on its own time) and one
seeded random. The batch handlers ``bat``, ``batlim``, ``batconc`` and ``battime`` run each item of a call as a job
of its own (``execute_items``), so every invariant counts items; ``batconc`` and ``battime`` have a time limit, a
call that runs past it ends every item of the call. Job ``big``'s messages are at the queue's size limit or just
under it. Every job function reports to the ledger: when it started,
whether the invocation is killed before or after its side effect, and which
runs of its key are active, so the invariants below can be checked after every
step (``check``) and once the world has settled (``settle``). A job may also
run long (plan ``slow``): time passes while it runs, up to its time limit or
the invocation's deadline (Lambda kills it there).

The invariants (docs/reliability.md states them for users):

1. nothing is lost: every message that left the jobs queue ran, was a
   duplicate of a completed key, was cancelled or expired (with its metric),
   was re-sent (the copy is tracked in turn), or is in the DLQ with a reason
   the worker wrote;
2. side effects per key <= 1 + kills that found it exposed + completion
   writes that failed after their retries + runs of a batch handler's item
   whose call then ran past its time limit (each counted per key). A kill
   exposes, in time: the jobs running at the kill, and those that finished
   less than ``flush_after`` (the worker's crash window) before it; a job
   that finished earlier must have its record written by then, unless the
   store failed a write of that invocation (the ledger says which);
3. a group's callback runs once (a callback is a job like any other: only a
   kill after its side effect or its unrecorded completion may repeat it, as
   invariant 2 bounds), only after every member is terminal, and a finished
   group's counts add up to its total;
4. no limiter is exceeded (rate: starts in any window; concurrency: runs at once);
   a rate-limited job (``lim``, ``batlim``: a reserved start slot each,
   flow/_schedule.py) eventually runs, ends or reaches the DLQ, and in a
   story where nothing is late or broken each of its messages is deferred at
   most once (its copy carries its slot);
5. nothing but an invocation's own death escapes ``handle_batch``;
6. a key never runs twice at once, and a delivery of another job's key is
   never taken for its duplicate;
7. debounce (job ``deb``, each request's ``v`` unique: an enqueue's burst, or
   a member, a step or a callback, which carry no token): side effects per
   request (its ``v``) obey invariant 2, runs of one key never overlap, a
   delivery is acknowledged as a duplicate only if its own request ran (a
   duplicate only of the same request, worker/_request.py), a delivery
   acknowledged as superseded carries a token that is not its key's latest
   (``JobSuperseded`` counts each), and once settled the last burst of every
   key ran with its arguments, and so did every request without a token that
   was sent, unless its message is in the DLQ;
8. dedupe (``dd`` until_done, ``ds`` until_started): a refused enqueue sent
   nothing (``JobDeduplicated`` counts each) and its key had a message in the
   jobs queue or the DLQ, or (``dd``) a run holding it; an enqueue of a
   cancelled key sends nothing and its receipt says ``cancelled``;
9. workflow callbacks (``callback=``, a job's request or a whole group: the
   follow-up of workflows/_callback_stage.py): an answer leaves only after the
   record it tells of (a success: the key's record is a success; a dead
   letter: the record, or the DLQ's letter of that request, says so; a
   cancel: the record is cancelled; a group: no member pending); each callback
   takes at most one answer (the fake, as the services, closes it), and the
   worker sends none twice unless a store fault lost the record's note that it
   was told; once settled, none is lost: every request acknowledged with a
   final fate, and every finished group, told its workflow (unless the
   workflow closed it first).

Clock skew between the deploys is bounded by the lease margin (5 s,
``Settings.lease_margin``): a rate limit then holds over any window of
``PER - |skew|`` seconds of the true clock.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import contextvars
import functools
import json
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypedDict

from sqsjobs import DurableCallback, JobApp, Outcome, PermanentError, TaskToken, TimeLimitExceeded
from sqsjobs.enqueue._envelope import CallbackTo
from sqsjobs.enqueue._sizes import WORKER_ATTRIBUTE_BYTES
from sqsjobs.store._lease import LeaseState, Operation
from sqsjobs.store._lease_ops import Acquire, Amend, Close, Complete, Release, Renew, Transact
from sqsjobs.store._rate_ops import TakeSlots
from sqsjobs.testing.callbacks import FakeCallbacks
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
#: the jobs queue's visibility timeout: at least the function's timeout + the lease margin (``sqsjobs check`` E9101)
VISIBILITY_TIMEOUT = 70
#: SQS's largest MaximumMessageSize: the queues' and the apps' ``max_message_bytes``
MAX_MESSAGE_BYTES = 1024 * 1024
#: job ``big``'s message ``n`` is this many bytes under the largest a producer may send (the limit less what the
#: worker keeps for its own attributes, enqueue/_sizes.py), body and attributes as SQS counts them
BIG_SLACK = (0, 40, 400, 4000)
#: the batch handlers ``batconc`` and ``battime`` stop a call that runs longer (``TimeLimitExceeded``)
TIME_LIMIT = 5.0
#: how long a ``slow`` run takes (up to its time limit, or the invocation's deadline)
SLOW_SECONDS = 58.0
RATE, PER = 1, 10.0
SLOTS = 1
EXPIRES_IN = 40.0
DEBOUNCE = 4.0
#: the jobs a rule may enqueue alone or as members and steps
PLAIN_JOBS = ("a", "b", "c", "lim", "conc", "exp", "bat", "batlim", "batconc", "battime", "big", "aa", "th", "aconc",
              "abat")
#: the jobs a group's member or a chain's step may be (the debounced and deduplicated ones too: a key is shared by
#: every kind of delivery; async and threaded ones too)
MEMBER_JOBS = ("a", "b", "c", "exp", "bat", "deb", "dd", "ds", "big", "aa", "th")
#: what a group's ``on_complete`` may be: ``report`` (the model counts its runs) or a job another path runs too
CALLBACK_JOBS = ("report", "a", "bat", "deb", "dd", "aa")
#: items per call of the batch handlers (``batlim`` shares ``lim``'s rate limit, ``batconc`` ``conc``'s slots)
BATCH = 3
#: the batch handlers (a rule enqueues all of one's keys at once)
BATCH_JOBS = ("bat", "batlim", "batconc", "battime", "abat")
#: the jobs whose starts the rate limit counts
RATE_JOBS = ("lim", "batlim")
#: the jobs whose runs at once the concurrency limit counts
SLOT_JOBS = ("conc", "batconc", "aconc")
#: what one execution of a job does (``overrun``: its time limit's alarm lands in it; ``slow``: time passes, up to
#: its time limit or the invocation's deadline; ``timeout``: ``TIMEOUT_AFTER`` passes, past the crash window's
#: bound, and the invocation dies then, as Lambda's timeout kills one: issue 32's story)
PLANS = ("ok", "transient", "permanent", "kill_before", "kill_after", "nest", "overrun", "slow", "timeout")
#: how long a ``timeout`` run takes before the invocation dies (the worker's flush timer fires meanwhile)
TIMEOUT_AFTER = 2.0
#: the jobs a workflow may await alone (``callback=``): neither debounced nor deduplicated (they take none)
AWAITED_JOBS = ("a", "b", "c", "lim", "conc", "exp", "bat", "battime")
#: the outcomes that end a request for good: its callback must be told
FINAL_OUTCOMES = frozenset({Outcome.SUCCEEDED, Outcome.DUPLICATE, Outcome.CANCELLED, Outcome.EXPIRED,
                            Outcome.DEAD_LETTERED})
#: the writes a store fault may hit
FAULTS = ("claim", "completion", "retry_record", "dead_letter_record", "count", "limiter", "any")


class BatItem(TypedDict):
    """One item of the batch handlers ``bat`` and ``batlim``."""

    n: int


def note(text: str) -> None:
    """A hypothesis event (``--hypothesis-show-statistics`` counts them), or nothing when replaying a story by hand."""
    from hypothesis import event
    from hypothesis.errors import InvalidArgument

    with contextlib.suppress(InvalidArgument):
        event(text)


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
    #: when Lambda kills it (its deadline)
    deadline: float = float("inf")


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


class SkewedClock:
    """A deploy's own clock: the world's, ``skew`` seconds ahead (or behind); sleeping moves the world's.

    It is a timer too (``worker/_timer.py``): the worker's timers on it (a record's ``flush_after``, the deadline
    margin) fire as the world's clock reaches their moment, on its own time. Without ``call_at`` the worker would
    take it for a clock that moves by itself and serve it from a thread on real time: the model would no longer
    replay a story exactly.
    """

    def __init__(self, base: ManualClock, skew: float) -> None:
        self.base, self.skew = base, skew

    def __call__(self) -> float:
        return self.base() + self.skew

    def advance(self, seconds: float) -> None:
        self.base.advance(seconds)

    def call_at(self, when: float, callback: Callable[[], None]) -> Any:
        return self.base.call_at(when - self.skew, callback)


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
        "limiter": lambda op: any(o.key.startswith("limit#") and isinstance(o, Acquire | Renew | Release | TakeSlots)
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
    #: a batch handler's items that ran before their call ran past its time limit (the call ends them all)
    overrun_after: Counter[str] = field(default_factory=Counter)
    #: completion writes that failed after the worker's retries, per key (BatchResult.unrecorded)
    unrecorded: Counter[str] = field(default_factory=Counter)
    #: message id -> the outcome of the delivery that acknowledged it
    acked: dict[str, Outcome | None] = field(default_factory=dict)
    #: message id -> how many of its receives were killed at or past its backstop receive, or were SQS delivering
    #: it again after its delete at or past that receive (SQS's redrive then moves it: no worker sees it)
    killed_late: Counter[str] = field(default_factory=Counter)
    starts: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    #: runs that started, per key (job ``deb``: per request, ``deb:<n>@<v>``)
    started: Counter[str] = field(default_factory=Counter)
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
    #: the ``v`` of debounced requests without a token (a member, a step, a callback)
    untokened: set[int] = field(default_factory=set)
    deduplicated: int = 0
    #: deferrals by the rate limit, per key of RATE_JOBS
    rate_deferrals: Counter[str] = field(default_factory=Counter)


class World:
    """Two deploys of one app over one fake SQS, one flaky store, one clock (see the module docstring)."""

    def __init__(self, seed: int, skew: float = 0.0) -> None:
        self.clock = ManualClock()
        #: the second deploy's clock is this many seconds ahead of the world's (behind when negative)
        self.skew = skew
        self.random = random.Random(seed)
        self.sqs = FakeSQS(clock=self.clock)
        self.queue = self.sqs.queue_url("jobs")
        self.dlq = self.sqs.queue_url("jobs-dlq")
        self.sqs.set_redrive_policy(self.queue, self.dlq, MAX_RECEIVE_COUNT)
        self.sqs.set_visibility_timeout(self.queue, VISIBILITY_TIMEOUT)
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
        #: the ``v`` of the last debounced request (each one's is unique)
        self.edits = 0
        #: a store fault was armed in this story (an unstarted claim may then keep its attempt)
        self.store_faults = False
        #: something late or broken happened in this story (a fault, a kill, a slow or nested run, a poller
        #: that did not poll for a while, skewed clocks): a rate-limited job may then be deferred more than once
        self.disturbed = skew != 0.0
        #: the bodies of groups' callbacks (``kinds_of``)
        self.callback_bodies: set[str] = set()
        #: the workflows awaiting requests and groups: callback id -> ("job", key) or ("group", group id)
        self.awaited: dict[str, tuple[str, str]] = {}
        #: callbacks their workflow closed first (a timeout): answers to them are refused
        self.closed_by_workflow: set[str] = set()
        self.callbacks = FakeCallbacks(on_answer=self._answered)
        self.apps = [self._app(version) for version in (1, 2)]

    def new_callback(self, heartbeat: bool) -> CallbackTo:
        """A fresh callback: a durable one or a task token, in turn."""
        n = len(self.awaited)
        if n % 2:
            return TaskToken(f"token-{n}", heartbeat=heartbeat)
        return DurableCallback(base64.b64encode(f"callback-{n}".encode()).decode(), heartbeat=heartbeat)

    def _answered(self, callback: CallbackTo, answer: Any) -> None:
        """An answer is about to be taken: it tells what the records say now (invariant 9, "after the record")."""
        kind, ref = self.awaited.get(callback.id, ("", ""))
        note(f"callback told: {kind} {answer.told}")
        violations = self.ledger.violations
        if kind == "group":
            status = self.apps[1].group_status(ref)
            if status is None or status.pending:
                violations.append(f"group {ref}'s callback answered while members are pending ({status})")
            return
        item = self.store.get(ref)
        outcome = item.get("outcome") if item is not None else None
        if answer.succeeded and (item is None or item.state is not LeaseState.DONE or outcome != "succeeded"):
            violations.append(f"{ref}'s callback told success, but its record says {outcome}")
        elif answer.error_type == "sqsjobs.DeadLettered" and outcome != "dead_lettered" and not any(
                (parsed(m.body).get("callback") or {}).get("id") == callback.id for m in self.sqs.sent_to(self.dlq)):
            violations.append(f"{ref}'s callback told a dead letter, but neither its record ({outcome}) nor the "
                              "DLQ says so")
        elif answer.error_type == "sqsjobs.Cancelled" and outcome != "cancelled":
            violations.append(f"{ref}'s callback told a cancel, but its record says {outcome}")

    # ------------------------------------------------------------ the apps
    def _app(self, version: int) -> JobApp:
        clock = self.clock if version == 1 else SkewedClock(self.clock, self.skew)
        app = JobApp(queue_url=self.queue, dlq_url=self.dlq, max_attempts=MAX_ATTEMPTS,
                     function_timeout=FUNCTION_TIMEOUT, backoff_base=2.0, backoff_cap=30.0,
                     store=self.store, sqs_client=self.sqs, clock=clock,  # type: ignore[arg-type]
                     random=random.Random(self.random.random()), sleep=self.clock.advance,
                     emit_metrics=self.metrics.append, environ={}, max_message_bytes=MAX_MESSAGE_BYTES,
                     callback_sender=self.callbacks)
        app.rate_limit("rate", rate=RATE, per=PER)
        app.concurrency_limit("slots", SLOTS)

        @app.job("a", key="k:{n}", callbacks=True)
        def a(n: int) -> None:
            self.execute("a", f"k:{n}")

        @app.job("b", key="k:{n}", callbacks=True)  # two jobs on one key template
        def b(n: int) -> None:
            self.execute("b", f"k:{n}")

        if version == 1:
            @app.job("c", key="c:{n}", callbacks=True)
            def c1(n: int) -> None:
                self.execute("c", f"c:{n}")
        else:
            @app.job("c", key="c:{n}", version=2, callbacks=True)
            def c2(n: int, loud: bool = False) -> None:
                self.execute("c", f"c:{n}")

            @c2.upcaster(from_version=1)
            def quiet(args: dict[str, Any]) -> dict[str, Any]:
                return {**args, "loud": False}

        @app.job("lim", key="lim:{n}", limits=["rate"], callbacks=True)
        def lim(n: int) -> None:
            self.execute("lim", f"lim:{n}")

        @app.job("conc", key="conc:{n}", limits=["slots"], callbacks=True)
        def conc(n: int) -> None:
            self.execute("conc", f"conc:{n}")

        @app.job("exp", key="exp:{n}", expires_in=EXPIRES_IN, callbacks=True)
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
        @app.job("bat", key="bat:{n}", batch=BATCH, callbacks=True)
        def bat(items: list[BatItem]) -> dict[int, BaseException]:
            return self.execute_items("bat", items)

        @app.job("batlim", key="batlim:{n}", batch=BATCH, limits=["rate"])
        def batlim(items: list[BatItem]) -> dict[int, BaseException]:
            return self.execute_items("batlim", items)

        @app.job("batconc", key="batconc:{n}", batch=BATCH, limits=["slots"], time_limit=TIME_LIMIT)
        def batconc(items: list[BatItem]) -> dict[int, BaseException]:
            return self.execute_items("batconc", items)

        @app.job("battime", key="battime:{n}", batch=BATCH, time_limit=TIME_LIMIT, callbacks=True)
        def battime(items: list[BatItem]) -> dict[int, BaseException]:
            return self.execute_items("battime", items)

        @app.job("big", key="big:{n}")
        def big(n: int, pad: str) -> None:
            self.execute("big", f"big:{n}")

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

    # ------------------------------------------------------------ what producers send
    def big(self, app: int, n: int) -> Any:
        """Job ``big``'s message ``n``: ``BIG_SLACK[n]`` bytes under the limit, as SQS counts them (its enqueue time
        is in its body: measured now)."""
        big = self.apps[app].jobs["big"]
        room = MAX_MESSAGE_BYTES - WORKER_ATTRIBUTE_BYTES - BIG_SLACK[n]
        return big.message(n=n, pad="x" * (room - big.message(n=n, pad="").size()))

    def message(self, app: int, job: str, n: int) -> Any:
        """A message of ``job`` for a group, a chain or a callback (a debounced job's: a request without a token)."""
        jobs = self.apps[app].jobs
        if job == "deb":
            self.edits += 1
            self.ledger.untokened.add(self.edits)
            return jobs["deb"].message(n=n % 2, v=self.edits)
        if job == "big":
            return self.big(app, n)
        return jobs[job].message(n=n)

    # ------------------------------------------------------------ what the jobs do
    def execute(self, job: str, key: str, *, limit: float | None = None) -> None:
        """One run of a job: checks, then the plan the running rule drew for it (``limit``: its time limit)."""
        plan = self._start(job, key)
        try:
            self._body(plan, key, limit=limit)
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
            if plan not in ("ok", "transient", "permanent"):
                self.disturbed = True
            if led.active[key]:
                led.violations.append(f"{key} started while another run of it was still going")
            if job in RATE_JOBS:
                window = PER - abs(self.skew)  # the deploys judge windows on clocks up to ``skew`` apart
                recent = [t for name in RATE_JOBS for t in led.starts[name] if t > now - window]
                if len(recent) >= RATE:
                    led.violations.append(f"rate limit exceeded: {len(recent) + 1} starts within {window} s at {now}")
            if job in SLOT_JOBS and sum(n for k, n in led.active.items() if k.split(":")[0] in SLOT_JOBS) >= SLOTS:
                led.violations.append(f"concurrency limit exceeded at {now}")
            led.starts[job].append(now)
            led.started[key] += 1
            led.active[key] += 1
        return plan

    def _stop(self, key: str) -> None:
        with self._lock:
            self.ledger.active[key] -= 1

    def _body(self, plan: str, key: str, record: str | None = None, *, limit: float | None = None) -> None:
        if plan == "kill_before":
            self._kill(key)
        if plan == "overrun" and limit is not None:  # the time limit's alarm lands in the job's own code
            raise TimeLimitExceeded(f"{key} ran past its time_limit")
        if plan == "slow":
            self._run_long(key, limit)
        if plan == "timeout":
            self.clock.advance(TIMEOUT_AFTER)  # the worker's timers fire meanwhile
            self._kill(key)
        if plan == "transient":
            raise ConnectionError(f"{key}: transient")
        if plan == "permanent":
            raise PermanentError(f"{key}: permanent")
        with self._lock:
            if plan in ("nest", "slow") and self._nest is not None:
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

    def _run_long(self, key: str, limit: float | None) -> None:
        """Time passes while the job runs (the worker's timers fire meanwhile): up to its time limit (its alarm
        stops it), or the invocation's deadline (Lambda kills the invocation there)."""
        invocation = _INVOCATION.get()
        deadline = invocation.deadline if invocation is not None else float("inf")
        left = SLOW_SECONDS if limit is None else max(0.0, limit)
        took = min(SLOW_SECONDS, left, max(0.0, deadline - self.clock()))
        self.clock.advance(took)
        if limit is not None and took >= limit:
            raise TimeLimitExceeded(f"ran past its time_limit of {limit} s")
        if self.clock() >= deadline:
            self._kill(f"{key}: the invocation's deadline")

    def execute_debounced(self, n: int, v: int) -> None:
        """One run of a debounced request: the request (``v``) is the unit of side effects, the key that of overlap.

        A burst runs only while its token is its key's latest; a request without a token (a member, a step, a
        callback) runs undebounced."""
        key = f"deb:{n}"
        if self.ledger.active[key]:
            self.ledger.violations.append(f"{key} started while another run of it was still going")
        item = self.store.get(key)
        latest = item.get("debounce_token") if item is not None else None
        if v not in self.ledger.untokened and (latest is None or self.ledger.tokens.get(latest) != v):
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
        items whose plan failed are named (a kill ends the whole call, and the invocation; a call that runs past
        its time limit ends every item of the call, those that ran before included)."""
        led = self.ledger
        with self._lock:
            running = sum(n for k, n in led.active.items() if k.split(":")[0] in SLOT_JOBS)
            if job in SLOT_JOBS and running + len(items) > SLOTS:  # a call's items run at once
                led.violations.append(f"concurrency limit exceeded by a call of {len(items)} at {self.clock()}")
        limit = TIME_LIMIT if job in ("batconc", "battime") else None
        failed: dict[int, BaseException] = {}
        done: list[str] = []
        started = self.clock()
        for index, item in enumerate(items):
            key = f"{job}:{item['n']}"
            plan = self._start(job, key)
            try:
                self._body(plan, key, limit=None if limit is None else limit - (self.clock() - started))
            except (ConnectionError, PermanentError) as error:
                failed[index] = error
            except TimeLimitExceeded:
                note(f"a batch call ran past its time limit after {len(done)} item(s)")
                with self._lock:
                    for ran in done:  # their side effects happened; the call ends them as failed
                        led.overrun_after[ran] += 1
                raise
            else:
                done.append(key)
            finally:
                self._stop(key)
        self._finished(*done)  # the call returned: every item it did ends now
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
        invocation = Invocation(failures_before=self.store.failures, deadline=self.clock() + remaining_ms / 1000)
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
        self._note_kinds(taken)
        for key in getattr(result, "unrecorded", ()):
            self.ledger.unrecorded[key] += 1
        self._note_outcomes(app, result)
        for d in result.deliveries:
            if d.outcome is Outcome.DEFERRED and d.deferred_by == "rate":
                self.ledger.rate_deferrals[d.key] += 1
            if d.outcome is Outcome.DEAD_LETTERED:
                # The DLQ accepted its letter: the key's job ended for good once, even when the acknowledgement
                # is withheld for a follow-up (its group's count or answer, workflows/_stage.py) and a redrive
                # runs it again before that copy comes back.
                self.ledger.ended.add(d.key)
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
            self._check_ack(d, bodies[d.message_id])
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

    def kinds_of(self, message: QueuedMessage) -> set[str]:
        """Which paths a delivered message came by (a re-sent member is both)."""
        body = parsed(message.body)
        kinds = set()
        if body.get("debounce") is not None:
            kinds.add("debounced")
        if body.get("member_of") is not None:
            kinds.add("member")
        if body.get("step_of") is not None:
            kinds.add("chain step")
        if message.body in self.callback_bodies:
            kinds.add("callback")
        if body.get("job") in ("dd", "ds") and not kinds:
            kinds.add("deduplicated")
        if body.get("job") in BATCH_JOBS:
            kinds.add("batch item")
        if message.attribute("sqsjobs.redrive_count") is not None:
            kinds.add("redriven")
        if message.attribute("sqsjobs.resends") is not None:
            kinds.add("re-sent")
        if body.get("job") == "big":
            kinds.add("at the size limit")
        return kinds or {"standalone"}

    def _note_kinds(self, taken: list[QueuedMessage]) -> None:
        """Hypothesis's statistics (``--hypothesis-show-statistics``): which kinds of deliveries of one key shared a
        batch (tests/model/README: every kind with every other)."""
        by_key: dict[str, list[set[str]]] = defaultdict(list)
        for message in taken:
            with contextlib.suppress(ValueError, AttributeError):
                kinds = self.kinds_of(message)
                by_key[str(parsed(message.body).get("key"))].append(kinds)
                for kind in kinds:
                    note(f"delivered: {kind}")
                if len(kinds) > 1:
                    note(f"delivered: {' + '.join(sorted(kinds))}")
        for shared in by_key.values():
            for i, first in enumerate(shared):
                for other in shared[i + 1:]:
                    for a in first:
                        for b in other:
                            note(f"one key, one batch: {' + '.join(sorted((a, b)))}")

    def _note_outcomes(self, app: int, result: Any) -> None:
        for d in result.deliveries:
            if d.took_over:
                note(f"a lease taken over (skew {self.skew:+.0f} s, by deploy {app + 1})")
            if d.job_name == "big" and d.outcome is not None:
                note(f"at the size limit: {d.outcome.value} ({d.state.value})")
            if d.outcome is Outcome.DEAD_LETTERED and d.job_name in ("deb", *BATCH_JOBS):
                note(f"dead-lettered: {'debounced' if d.job_name == 'deb' else 'batch item'}")

    def _check_superseded(self, d: Any, body: str) -> None:
        token = parsed(body).get("debounce")
        item = self.store.get(d.key)
        if token is None or item is None or item.get("debounce_token") == token:
            self.ledger.violations.append(f"{d.message_id} acknowledged as superseded, but its token {token} is "
                                          f"{d.key}'s latest")

    def refused(self, job: str, key: str) -> None:
        """A deduplicated enqueue was refused: a request of its key must be queued (or, for dd, running)."""
        self.ledger.deduplicated += 1
        in_queue = any(parsed(m.body).get("key") == key for m in self.sqs.messages(self.queue))
        in_dlq = any(parsed(m.body).get("key") == key for m in self.sqs.messages(self.dlq))
        item = self.store.get(key)
        running = job == "dd" and item is not None and item.held_live(self.clock())
        if not (in_queue or in_dlq or running):
            self.ledger.violations.append(f"an enqueue of {key} was refused, but no request of it is queued")

    def _check_ack(self, d: Any, body: str) -> None:
        """An acknowledged delivery ran, or its key was completed, cancelled, or it expired, or is dead-lettered.

        Side effects count per request for job ``deb`` (its ``v``): a duplicate only of the same request."""
        led = self.ledger
        v = parsed(body).get("args", {}).get("v")
        ran = f"{d.key}@{v}" if d.job_name == "deb" else d.key
        if d.outcome is Outcome.SUCCEEDED and not led.effects[ran]:  # it ran in this invocation
            led.violations.append(f"{d.message_id} ({ran}) acknowledged as succeeded, but it never ran")
        if d.outcome is Outcome.DUPLICATE:
            item = self.store.get(d.key)
            owner = item.get("job") if item is not None else None
            if item is not None and owner not in (None, d.job_name):
                led.violations.append(f"{d.message_id} ({d.job_name}) acknowledged as a duplicate of {owner}'s "
                                      f"record of {d.key}")
            done = item is not None and item.state is LeaseState.DONE and d.job_name != "deb"
            # a letter delivered again (or its copy, re-sent at its backstop): the DLQ has it, whatever the record
            # says since (a redrive may have run it again)
            copy_of = (d.message_attributes.get("sqsjobs.letter") or {}).get("stringValue")
            letter = copy_of or d.message_id
            if not done and not item_dead_lettered(item, letter) and not self._lettered(letter) \
                    and not led.effects[ran]:
                led.violations.append(f"{d.message_id} ({ran}) acknowledged as a duplicate, but its request never "
                                      "ran")
        elif d.outcome is Outcome.CANCELLED:
            item = self.store.get(d.key)
            if item is None or item.get("outcome") != "cancelled":
                led.violations.append(f"{d.message_id} acknowledged as cancelled, but {d.key} is not")
        elif d.outcome is Outcome.DEAD_LETTERED and not self._lettered(d.message_id):
            led.violations.append(f"{d.message_id} acknowledged as dead-lettered with no letter in the DLQ")
        if (d.job_name == "deb" and v not in led.untokened and d.reason is not None
                and d.reason.value in ("exhausted", "lost")
                and not led.started[ran] and not self.store_faults and "re-sends" not in str(d.error)):
            # A debounced key's bursts count their own attempts: one never run cannot have used them up (unless a
            # store fault kept an unstarted claim's attempt; or it was never started, re-sent). A member or a
            # step shares its key's attempts with a request of the key still retrying.
            led.violations.append(f"{d.message_id} ({ran}) dead-lettered {d.reason.value}, but it never started")

    def _lettered(self, message_id: str) -> bool:
        """The DLQ took a letter of ``message_id`` with the worker's reason (its attributes, or its evidence)."""
        for letter in self.sqs.sent_to(self.dlq):
            if letter.attribute("sqsjobs.original_message_id") == message_id and letter.attribute("sqsjobs.reason"):
                return True
            evidence = self.store.get(f"dlq#{letter.message_id}")
            if evidence is not None and evidence.get("original_message_id") == message_id:
                return True
        return False

    # ------------------------------------------------------------ the checks
    def check(self) -> None:
        """The invariants that hold after every step."""
        led = self.ledger
        assert not led.violations, led.violations
        for key, runs in led.effects.items():
            allowed = 1 + led.kills_after[key] + led.unrecorded[key] + led.overrun_after[key]
            assert runs <= allowed, (f"{key} had {runs} side effects; allowed {allowed} (kills after the side "
                                     f"effect {led.kills_after[key]}, completions unrecorded {led.unrecorded[key]}, "
                                     f"calls past their time limit after it {led.overrun_after[key]})")
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
        if not self.disturbed and led.rate_deferrals:
            # Each message of a rate-limited job is deferred at most once, to its slot (flow/_schedule.py): its
            # copy carries the slot and starts at it. The copies the worker sent carry ``sqsjobs.slots``.
            sends = Counter(message_key(m) for m in self.sqs.sent_to(self.queue)
                            if m.attribute("sqsjobs.slots") is None)
            for key, deferrals in led.rate_deferrals.items():
                assert deferrals <= sends[key], f"{key} deferred {deferrals} times, sent {sends[key]} times"
        assert emitted["JobDeduplicated"] == led.deduplicated, (emitted["JobDeduplicated"], led.deduplicated)
        told = Counter(t.callback.id for t in self.callbacks.told)
        assert all(n == 1 for n in told.values()), told
        again = [t.callback.id for t in self.callbacks.refused if t.callback.id not in self.closed_by_workflow]
        assert not again or self.store_faults, f"callbacks answered twice with no store fault: {again}"

    def settle(self) -> None:
        """Run everything to the end, then check what must hold once nothing is moving.

        The store's faults are cleared; SQS refusals still armed are left to run
        out (each is a bounded number of calls), so the dead letters a settling
        world sends meet them too.
        """
        self.store.clear_faults()
        self.callbacks.clear_faults()
        for _ in range(400):
            if not self.sqs.messages(self.queue):
                break
            visible = [m.visible_at for m in self.sqs.messages(self.queue)]
            self.clock.advance(max(0.0, min(visible) - self.clock()))
            self.deliver(app=1, size=10, remaining_ms=60_000)
            self.check()
        assert not self.sqs.messages(self.queue), f"{len(self.sqs.messages(self.queue))} messages never settled"
        for letter in self.sqs.messages(self.dlq):
            # The worker's letters carry their reason, and its evidence says it too (dlq#<the letter's id>): what
            # every reader goes by (ops/_dlq_evidence.py); a letter too large for attributes has only the evidence.
            if letter.attribute("sqsjobs.reason") is None and self.store.get(f"dlq#{letter.message_id}") is None:
                kills = self.ledger.killed_late[letter.message_id]
                assert kills > BACKSTOP_SLACK, (
                    f"letter {letter.message_id} has no reason the worker wrote ({kills} killed or repeated late "
                    "receives)")
        letters = [parsed(m.body) for m in self.sqs.messages(self.dlq)]
        for sent in self.sqs.sent_to(self.queue):  # every rate-limited job eventually runs (or ends otherwise)
            body = parsed(sent.body)
            if body.get("job") in RATE_JOBS:
                key = str(body.get("key"))
                lettered = any(b.get("key") == key for b in letters)
                assert self.ledger.started[key] >= 1 or key in self.ledger.ended or lettered, (
                    f"rate-limited {key} never ran, ended or reached the DLQ")
        for key, v in self.ledger.last_burst.items():
            lettered = any(b.get("args", {}).get("v") == v and b.get("key") == key for b in letters)
            assert self.ledger.effects[f"{key}@{v}"] >= 1 or lettered, (
                f"{key}'s last burst (v={v}) never ran and is not in the DLQ")
        for sent in self.sqs.sent_to(self.queue):  # a request without a token (a member, a step) runs undebounced
            body = parsed(sent.body)
            if body.get("job") != "deb" or body.get("debounce") is not None:
                continue
            v, key = body["args"]["v"], body["key"]
            lettered = any(b.get("args", {}).get("v") == v and b.get("key") == key for b in letters)
            assert self.ledger.effects[f"{key}@{v}"] >= 1 or lettered, (
                f"{key}'s request v={v} (no token: a member, a step or a callback) never ran and is not in the DLQ")
        # A letter SQS's redrive moved after a kill at its backstop receive was never seen by a worker: its group
        # waits, running, until an operator redrives it (docs/runbook.md); such a group is checked only for that.
        moved_by_sqs = {(parsed(m.body).get("member_of") or {}).get("group") for m in self.sqs.messages(self.dlq)
                        if m.attribute("sqsjobs.reason") is None and self.ledger.killed_late[m.message_id]}
        self._settled_callbacks(moved_by_sqs)
        for book in self.groups:
            status = self.apps[1].group_status(book.id)
            assert status is not None, book.id
            if status.pending and book.id in moved_by_sqs:
                assert status.state == "running" and not book.runs["complete"], (book.id, status, dict(book.runs))
                continue
            assert status.pending == 0, (book.id, status)
            assert status.succeeded + status.failed == status.total, status
            if "complete" not in book.callbacks:  # another job's key: sent once, run unless its key was done before
                head = self.store.get(f"group#{book.id}")
                assert head is not None and head.get("on_complete_sent") is not None, (book.id, status)
                continue
            assert book.runs["complete"] >= 1, (book.id, dict(book.runs), status)
            wanted = "success" in book.callbacks and status.state == "succeeded"
            assert bool(book.runs["success"]) == wanted, (book.id, dict(book.runs), status)


    def _settled_callbacks(self, moved_by_sqs: set[Any]) -> None:
        """Invariant 9 at rest: no callback is lost (every request ended for good, every finished group, told)."""
        told = {t.callback.id for t in self.callbacks.told}
        for callback_id, (kind, ref) in self.awaited.items():
            if callback_id in told or callback_id in self.closed_by_workflow:
                continue
            if kind == "group":
                status = self.apps[1].group_status(ref)
                assert status is None or status.pending or ref in moved_by_sqs, (
                    f"group {ref} finished ({status}), but its workflow was never told")
                continue
            ended = [m.message_id for m in self.sqs.sent_to(self.queue)
                     if (parsed(m.body).get("callback") or {}).get("id") == callback_id
                     and self.ledger.acked.get(m.message_id) in FINAL_OUTCOMES]
            assert not ended, f"{ref}'s request ended ({ended}), but its workflow was never told"


@functools.lru_cache(maxsize=4096)
def parsed(body: str) -> dict[str, Any]:
    """A message's body as JSON, parsed once (job ``big``'s are a mebibyte; the model reads each many times)."""
    value = json.loads(body)
    return value if isinstance(value, dict) else {}


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
        return str(parsed(message.body).get("key"))
    except ValueError:
        return None
