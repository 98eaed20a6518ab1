"""The job records a batch writes as its jobs end: started at once, retried within the deadline, waited for together.

A record's write after a run is what keeps the job from running again (the
completion) or from burning attempts it did not use. Each is started as its
job returns, on the store's thread pool, overlapped with the next job, so a
crash exposes at most the job that was running. A write that fails (after
botocore's own retries) is tried again with full jitter while the invocation
has time left before its deadline margin; what still fails is reported
(``failed``): the consumer re-sends a success whose completion failed as a
finish copy (``worker/_decision.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING

from sqsjobs._backoff import BackoffPolicy, RandomSource

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseStore, Operation, Written
    from sqsjobs.worker._delivery import Delivery

#: tries of one record write in all (botocore's own retries are inside each)
RECORD_WRITE_TRIES = 6
RECORD_WRITE_BACKOFF = BackoffPolicy(base=0.05, cap=1.0)


def write_with_retries(store: LeaseStore, op: Operation, *, sleep: Callable[[float], None],
                       time_left: Callable[[], float | None], random: RandomSource | None = None) -> Written:
    """Write ``op``; after a store failure try again with full jitter while ``time_left()`` allows; the last answer.

    Example:
        >>> from sqsjobs.store._lease import Close
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


class RecordWrites:
    """The record writes of one batch, by delivery.

    Example:
        >>> from sqsjobs.store._lease import Close
        >>> from sqsjobs.testing.flaky_store import FlakyStore
        >>> store = FlakyStore()
        >>> store.fail(lambda op: True, times=2)
        >>> waited = []
        >>> writes = RecordWrites(store, sleep=waited.append, time_left=lambda: 60.0)
        >>> writes.write_now(Close(key="k", now=0.0, expires_at=9.0)).ok, len(waited)
        (True, 2)
    """

    def __init__(self, store: LeaseStore, *, sleep: Callable[[float], None], time_left: Callable[[], float | None],
                 random: RandomSource | None = None) -> None:
        self.store = store
        self.sleep = sleep
        #: seconds this invocation may still spend before its deadline margin (None: unbounded)
        self.time_left = time_left
        self.random = random
        self._pending: list[tuple[Delivery, Future[Written]]] = []
        #: each delivery's last record write, once answered
        self.answers: dict[int, Written] = {}
        #: writes whose fence was lost: the lease ran out and another invocation took the key over
        self.lost: list[Delivery] = []
        #: writes the store failed even after the retries, with the error
        self.failed: list[tuple[Delivery, str]] = []

    def submit(self, d: Delivery, op: Operation) -> None:
        """Start writing ``d``'s record (the next job runs meanwhile)."""
        self._pending.append((d, self.store.run(lambda: self.write_now(op))))

    def write_now(self, op: Operation) -> Written:
        """Write ``op``, trying again after a store failure while there is time; the last answer."""
        return write_with_retries(self.store, op, sleep=self.sleep, time_left=self.time_left, random=self.random)

    def wait(self) -> None:
        """Wait for every write started so far."""
        for d, future in self._pending:
            answer = future.result()
            self.answers[d.index] = answer
            if answer.error is not None:
                self.failed.append((d, answer.error))
            elif not answer.ok:
                self.lost.append(d)
        self._pending.clear()

    def failure(self, d: Delivery) -> str | None:
        """Why ``d``'s record could not be written (None: it was, or there was nothing to write)."""
        answer = self.answers.get(d.index)
        return answer.error if answer is not None else None
