"""The job records a batch writes as its jobs end: gathered, written together, retried within the deadline.

A record's write after a run is what keeps the job from running again (the
completion) or from burning attempts it did not use. The batch's record
writes go together (``LeaseStore.write_batch``: one ``BatchExecuteStatement``
for up to 25, ``store/_statements.py``), so a batch of quick successes costs
one DynamoDB call for its completions, not one a job. Gathering has a price,
the crash window: a crash (a timeout, running out of memory) before the call
leaves the finished jobs it gathered unrecorded, and they run again once their
lease ends (their keys stay held until then, so nothing runs them twice at
once). So the window is bounded in time, not in jobs: a record waits at most
``flush_after`` seconds (the ``flush_after`` setting, 1 s by default) after
it was submitted. A timer on the injected clock (``worker/_timer.py``) writes
the records gathered so far when the oldest reaches that age, even while
another job runs on for minutes, overlapped with it; the rest go together
when the batch's jobs have run. At the invocation's deadline margin
(``hurry``) everything waiting is written, and every later record as it
comes; ``flush_after=0`` writes each record as its job ends (as Powertools
does: one call a job). Jobs running at once on several threads submit here
concurrently: the pending records are guarded by a lock that is never held
while a write runs. A write that fails (after botocore's own retries, or a
statement that failed on its own: throttled, an internal error) is tried
again with full jitter while the invocation has time left before its
deadline margin; what still fails is reported (``failed``): the consumer
re-sends a success whose completion failed as a finish copy (``worker/_decision.py``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from sqsjobs._backoff import BackoffPolicy, RandomSource, Retries
from sqsjobs._settings import DEFAULT_FLUSH_AFTER

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseStore, Operation, Written
    from sqsjobs.worker._delivery import Delivery
    from sqsjobs.worker._timer import Timer, TimerHandle

#: tries of one record write in all (botocore's own retries are inside each), full jitter between
RECORD_WRITE_RETRIES = Retries(tries=6, backoff=BackoffPolicy(base=0.05, cap=1.0))
#: seconds a finished job's record may wait to be written with others (the crash window, in time): the default
#: of the ``flush_after`` setting
FLUSH_AFTER = DEFAULT_FLUSH_AFTER


def write_with_retries(store: LeaseStore, op: Operation, *, sleep: Callable[[float], None],
                       time_left: Callable[[], float | None], random: RandomSource | None = None) -> Written:
    """Write ``op``; after a store failure try again with full jitter while ``time_left()`` allows; the last answer.

    Example:
        >>> from sqsjobs.store._lease_ops import Close
        >>> from sqsjobs.testing.flaky_store import FlakyStore
        >>> store = FlakyStore()
        >>> store.fail(lambda op: True, times=9)
        >>> write_with_retries(store, Close(key="k", now=0.0, expires_at=9.0), sleep=lambda s: None,
        ...                    time_left=lambda: 60.0).error  # six tries in all, then the last answer
        'injected by FlakyStore.fail'
    """
    for _ in RECORD_WRITE_RETRIES.attempts(sleep=sleep, random=random, time_left=time_left):  # one try at least
        answer = store.write(op)
        if answer.error is None:
            break
    return answer


def write_batch_with_retries(store: LeaseStore, ops: Sequence[Operation], *, sleep: Callable[[float], None],
                             time_left: Callable[[], float | None], random: RandomSource | None = None
                             ) -> list[Written]:
    """Write ``ops`` together; those the store failed again together, with full jitter, while time allows.

    Example:
        >>> from sqsjobs.store._lease_ops import Close
        >>> from sqsjobs.testing.flaky_store import FlakyStore
        >>> store = FlakyStore()
        >>> store.fail(lambda op: op.key == "b", times=2)
        >>> ops = [Close(key=k, now=0.0, expires_at=9.0) for k in ("a", "b")]
        >>> [w.ok for w in write_batch_with_retries(store, ops, sleep=lambda s: None, time_left=lambda: 60.0)]
        [True, True]
    """
    answers: dict[int, Written] = {}
    failed = list(range(len(ops)))
    for _ in RECORD_WRITE_RETRIES.attempts(sleep=sleep, random=random, time_left=time_left):
        answers.update(zip(failed, store.write_batch([ops[i] for i in failed]), strict=True))
        failed = [i for i in failed if answers[i].error is not None]
        if not failed:
            break
    return [answers[i] for i in range(len(ops))]


class RecordWrites:
    """The record writes of one batch, by delivery; jobs on several threads may submit at once.

    Example:
        >>> from sqsjobs.store._lease_ops import Close
        >>> from sqsjobs.testing.flaky_store import FlakyStore
        >>> store = FlakyStore()
        >>> store.fail(lambda op: True, times=2)
        >>> waited = []
        >>> writes = RecordWrites(store, sleep=waited.append, time_left=lambda: 60.0)
        >>> writes.write_now(Close(key="k", now=0.0, expires_at=9.0)).ok, len(waited)
        (True, 2)
    """

    def __init__(self, store: LeaseStore, *, sleep: Callable[[float], None], time_left: Callable[[], float | None],
                 random: RandomSource | None = None, clock: Callable[[], float] | None = None,
                 timer: Timer | None = None, flush_after: float = FLUSH_AFTER) -> None:
        self.store = store
        #: the batch's clock and its timer (None: records wait for ``wait``); a record waits ``flush_after`` at most
        self.clock = clock
        self.timer = timer
        self.flush_after = flush_after
        self.sleep = sleep
        #: seconds this invocation may still spend before its deadline margin (None: unbounded)
        self.time_left = time_left
        self.random = random
        self._lock = threading.RLock()
        self._pending: list[tuple[Delivery, Operation]] = []
        #: when the oldest record waiting was submitted, and the timer that writes it in time
        self._oldest: float | None = None
        self._due: TimerHandle | None = None
        self._due_at = 0.0
        #: past the deadline margin (or told to hurry): every record is written as it comes
        self._hurried = False
        self._started: list[tuple[list[tuple[Delivery, Operation]], Future[list[Written]]]] = []
        #: each delivery's last record write, once answered
        self.answers: dict[int, Written] = {}
        #: writes whose fence was lost: the lease ran out and another invocation took the key over
        self.lost: list[Delivery] = []
        #: writes the store failed even after the retries, with the error
        self.failed: list[tuple[Delivery, str]] = []

    def submit(self, d: Delivery, op: Operation, *, at: float | None = None) -> None:
        """Add ``d``'s record to the batch's writes; they start once the oldest has waited ``flush_after``.

        ``at`` is when the record became due (its job's end; default: now).
        """
        with self._lock:
            self._pending.append((d, op))
            now = self.clock() if self.clock is not None else 0.0
            since = now if at is None else min(at, now)
            if self._oldest is None or since < self._oldest:
                self._oldest = since
            if self._hurried or self.flush_after <= 0 or (self.clock is not None
                                                          and now - self._oldest >= self.flush_after):
                part = self._take()  # writing each as it comes, or it is due already (a job's bookkeeping waited)
            else:
                part = []
                self._arm(self._oldest + self.flush_after)
        self._launch(part)

    def hurry(self) -> None:
        """The deadline margin: write what waits now, and from now on each record as it comes."""
        with self._lock:
            self._hurried = True
            part = self._take()
        self._launch(part)

    def abandon(self) -> None:
        """The invocation is dying (an exception escaped the batch): no timer outlives it, nothing more starts."""
        with self._lock:
            self._hurried = False
            self._take()

    def _arm(self, when: float) -> None:
        """The timer writes what waits at ``when`` (the lock is held); an earlier moment replaces a later one."""
        if self.timer is None or (self._due is not None and self._due_at <= when):
            return
        if self._due is not None:
            self._due.cancel()
        self._due, self._due_at = self.timer.call_at(when, self._on_due), when

    def _on_due(self) -> None:
        with self._lock:
            self._due = None
            part = self._take()
        self._launch(part)

    def _take(self) -> list[tuple[Delivery, Operation]]:
        """The records waiting, in the batch's order (the lock is held); the timer is off until the next comes."""
        part, self._pending, self._oldest = sorted(self._pending, key=lambda pending: pending[0].index), [], None
        if self._due is not None:
            self._due.cancel()
            self._due = None
        return part

    def _launch(self, part: list[tuple[Delivery, Operation]]) -> None:
        """Start writing ``part`` (the store's thread pool, or here), overlapped with the jobs still running."""
        if not part:
            return
        done: Future[list[Written]] = Future()
        with self._lock:  # registered before it starts, so ``wait`` never misses a write under way
            self._started.append((part, done))
        ops = [op for _, op in part]
        self.store.run(lambda: self._write(ops)).add_done_callback(lambda future: _pass_on(future, done))

    def _write(self, ops: Sequence[Operation]) -> list[Written]:
        return write_batch_with_retries(self.store, ops, sleep=self.sleep, time_left=self.time_left,
                                        random=self.random)

    def write_now(self, op: Operation) -> Written:
        """Write ``op``, trying again after a store failure while there is time; the last answer."""
        return write_with_retries(self.store, op, sleep=self.sleep, time_left=self.time_left, random=self.random)

    def wait(self) -> None:
        """Write every record not started yet, together; wait for those started; read the answers."""
        with self._lock:
            part = self._take()
        self._launch(part)
        with self._lock:
            started, self._started = self._started, []
        for part, future in started:
            self._read(part, future.result())

    def _read(self, pending: list[tuple[Delivery, Operation]], answers: list[Written]) -> None:
        for (d, _), answer in zip(pending, answers, strict=True):
            self.answers[d.index] = answer
            if answer.error is not None:
                self.failed.append((d, answer.error))
            elif not answer.ok:
                self.lost.append(d)

    def failure(self, d: Delivery) -> str | None:
        """Why ``d``'s record could not be written (None: it was, or there was nothing to write)."""
        answer = self.answers.get(d.index)
        return answer.error if answer is not None else None


def _pass_on(source: Future[list[Written]], target: Future[list[Written]]) -> None:
    error = source.exception()
    if error is None:
        target.set_result(source.result())
    else:  # a bug in the write path: ``wait`` raises it, as it did before the writes were overlapped
        target.set_exception(error)
