"""The job records a batch writes as its jobs end: gathered, written together, retried within the deadline.

A record's write after a run is what keeps the job from running again (the
completion) or from burning attempts it did not use. The batch's record
writes go together (``LeaseStore.write_batch``: one ``BatchExecuteStatement``
for up to 25, ``store/_statements.py``), so a batch of quick successes costs
one DynamoDB call for its completions, not one a job. Gathering has a price,
the crash window: a crash (a timeout, running out of memory) before the call
leaves the finished jobs it gathered unrecorded, and they run again once their
lease ends (their keys stay held until then, so nothing runs them twice at
once). So the window is bounded in time, not in jobs: when ``flush_after``
seconds (the injected clock) have passed since the last write started, the
records gathered so far are written at once, overlapped with the next job;
the rest go together when the batch's jobs have run. A write that fails (after botocore's own retries, or a statement
that failed on its own: throttled, an internal error) is tried again with
full jitter while the invocation has time left before its deadline margin;
what still fails is reported (``failed``): the consumer re-sends a success
whose completion failed as a finish copy (``worker/_decision.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING

from sqsjobs._backoff import BackoffPolicy, RandomSource

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseStore, Operation, Written
    from sqsjobs.worker._delivery import Delivery

#: tries of one record write in all (botocore's own retries are inside each)
RECORD_WRITE_TRIES = 6
RECORD_WRITE_BACKOFF = BackoffPolicy(base=0.05, cap=1.0)
#: seconds a finished job's record may wait to be written with others (the crash window, in time)
FLUSH_AFTER = 1.0


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
    answer = store.write(op)
    for attempt in range(1, RECORD_WRITE_TRIES):
        if answer.error is None:
            break
        pause = RECORD_WRITE_BACKOFF.next_delay(attempt, random)
        left = time_left()
        if left is not None and pause >= left:
            break
        sleep(pause)
        answer = store.write(op)
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
    answers = store.write_batch(ops)
    for attempt in range(1, RECORD_WRITE_TRIES):
        failed = [i for i, answer in enumerate(answers) if answer.error is not None]
        if not failed:
            break
        pause = RECORD_WRITE_BACKOFF.next_delay(attempt, random)
        left = time_left()
        if left is not None and pause >= left:
            break
        sleep(pause)
        for index, answer in zip(failed, store.write_batch([ops[i] for i in failed]), strict=True):
            answers[index] = answer
    return answers


class RecordWrites:
    """The record writes of one batch, by delivery.

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
                 flush_after: float = FLUSH_AFTER) -> None:
        self.store = store
        #: the batch's clock (None: records wait for ``wait``); ``flush_after`` seconds bound how long one waits
        self.clock = clock
        self.flush_after = flush_after
        self._since = clock() if clock is not None else 0.0
        self._started: list[tuple[list[tuple[Delivery, Operation]], Future[list[Written]]]] = []
        self.sleep = sleep
        #: seconds this invocation may still spend before its deadline margin (None: unbounded)
        self.time_left = time_left
        self.random = random
        self._pending: list[tuple[Delivery, Operation]] = []
        #: each delivery's last record write, once answered
        self.answers: dict[int, Written] = {}
        #: writes whose fence was lost: the lease ran out and another invocation took the key over
        self.lost: list[Delivery] = []
        #: writes the store failed even after the retries, with the error
        self.failed: list[tuple[Delivery, str]] = []

    def submit(self, d: Delivery, op: Operation) -> None:
        """Add ``d``'s record to the batch's writes; start them now if the oldest has waited ``flush_after``."""
        self._pending.append((d, op))
        if self.clock is not None and self.clock() - self._since >= self.flush_after:
            self._since = self.clock()
            pending, self._pending = self._pending, []
            ops = [op for _, op in pending]
            self._started.append((pending, self.store.run(lambda: self._write(ops))))

    def _write(self, ops: Sequence[Operation]) -> list[Written]:
        return write_batch_with_retries(self.store, ops, sleep=self.sleep, time_left=self.time_left,
                                        random=self.random)

    def write_now(self, op: Operation) -> Written:
        """Write ``op``, trying again after a store failure while there is time; the last answer."""
        return write_with_retries(self.store, op, sleep=self.sleep, time_left=self.time_left, random=self.random)

    def wait(self) -> None:
        """Write every record not started yet, together; wait for those started; read the answers."""
        pending, self._pending = self._pending, []
        started, self._started = self._started, []
        written = [(part, future.result()) for part, future in started]
        if pending:
            written.append((pending, self._write([op for _, op in pending])))
        if self.clock is not None:
            self._since = self.clock()
        for part, answers in written:
            self._read(part, answers)

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
