"""A batch's permits: the rate tokens and concurrency slots its limited jobs need, taken in one round trip.

The consumer (``sqsjobs.consumer``) uses one ``Permits`` per batch::

    take()      before the claims: every limited job's tokens and slots, all
                probes concurrent (one round trip; a batch without limited
                jobs makes no call at all). A job that did not get every
                limiter it names is *deferred*: it goes back to the queue
                until the limiter's next window, plus jitter, and its record
                is never touched, so no attempt is used;
    start(d)    just before a limited job runs: a rate token covers a start
                within its grace; a later start moves the token's lease to
                ``start + per`` (an asynchronous ``Renew``), and a start more
                than half a window late is deferred instead;
    finished(d) after it ran: the invocation's slot is released once the last
                job of the batch that needed it is done;
    close()     at the end of the batch: whatever was taken and not used is
                released (fenced on this invocation), and the writes waited for.

Why a rate never overshoots: a token admits one start and stays HELD until
``per`` seconds after that start (its lease is ``taken + per + grace`` and a
start is allowed only within ``grace`` of the take, or it renews the lease to
``start + per``). A token is acquirable only once its lease ran out, so two
starts on one token are always more than ``per`` apart, and ``rate`` tokens
admit at most ``rate`` starts in any window of ``per`` seconds.

``LimiterMemory`` is what a process (a Lambda container) remembers between
batches: which tokens were seen busy until when (they are not probed again
before then: a batch facing a full limiter defers without a call), and how
long after the take a batch's first limited job starts (the grace).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqsjobs.backoff import MAX_VISIBILITY_SECONDS, RandomSource
from sqsjobs.delivery import State
from sqsjobs.lease import Acquire, LeaseState, Operation, Release, Renew, Written, expiry
from sqsjobs.limits import ConcurrencyLimit, Limiter, RateLimit

if TYPE_CHECKING:
    from sqsjobs.delivery import Delivery
    from sqsjobs.lease import LeaseStore

#: limiter items outlive their last lease by a day, then DynamoDB's TTL removes unused ones
LIMIT_TTL_SECONDS = 24 * 3600.0
#: slots a batch tries per concurrency limiter (it keeps one; extra successes are released at once)
SLOT_PROBES = 3
#: a batch refused a slot comes back after 1..2 s (slots free when a batch ends, which nobody announces)
SLOT_RETRY_SECONDS = 1.0
#: the grace a token is held beyond its window, around the lag observed from take to first start
MIN_GRACE_SECONDS = 0.02
MAX_GRACE_SECONDS = 0.25
#: the lag assumed before a process has seen one (a take and a claim: two round trips)
INITIAL_LAG_SECONDS = 0.05


@dataclass(frozen=True, kw_only=True)
class Refusal:
    """A limited job that may not start now: which limiter refused, and how long it waits (whole seconds).

    Example:
        >>> Refusal(limiter="ses", delay=2).delay
        2
    """

    limiter: str
    delay: int


@dataclass(frozen=True, kw_only=True)
class _Token:
    key: str
    limit: RateLimit
    taken_at: float
    grace: float


@dataclass(kw_only=True)
class _Slot:
    key: str
    limit: ConcurrencyLimit
    #: the index of the last delivery of the batch that relies on the slot
    last_user: int
    released: bool = False


class LimiterMemory:
    """What one process learned about its limiters (kept for the life of the Lambda container).

    Example:
        >>> memory = LimiterMemory()
        >>> memory.saw_busy("ses", 3, until=10.0)
        >>> memory.busy("ses", now=5.0), memory.busy("ses", now=11.0)
        ({3}, set())
        >>> round(memory.grace(), 3)
        0.1
    """

    def __init__(self) -> None:
        self._busy: dict[str, dict[int, float]] = {}
        self._lag = INITIAL_LAG_SECONDS
        self._lock = threading.Lock()

    def saw_busy(self, limiter: str, index: int, *, until: float) -> None:
        """Token ``index`` of ``limiter`` is held until ``until``."""
        with self._lock:
            self._busy.setdefault(limiter, {})[index] = until

    def saw_free(self, limiter: str, index: int) -> None:
        """Token ``index`` of ``limiter`` was released."""
        with self._lock:
            self._busy.get(limiter, {}).pop(index, None)

    def busy(self, limiter: str, *, now: float) -> set[int]:
        """The tokens of ``limiter`` known to be held at ``now`` (forgetting those whose lease ended)."""
        with self._lock:
            known = self._busy.get(limiter, {})
            for index in [i for i, until in known.items() if until < now]:
                del known[index]
            return set(known)

    def free_at(self, limiter: RateLimit, *, now: float) -> float:
        """When a token of ``limiter`` frees at the earliest, as far as this process knows (now: maybe free)."""
        with self._lock:
            known = [until for until in self._busy.get(limiter.name, {}).values() if until >= now]
        return min(known) if len(known) >= limiter.capacity else now

    def observe_lag(self, lag: float) -> None:
        """A batch's first limited job started ``lag`` seconds after its tokens were taken."""
        with self._lock:
            self._lag = 0.7 * self._lag + 0.3 * max(lag, 0.0)

    def grace(self) -> float:
        """How long after the take a start is covered by its token's lease (twice the usual lag, bounded)."""
        with self._lock:
            return min(MAX_GRACE_SECONDS, max(MIN_GRACE_SECONDS, 2 * self._lag))


@dataclass(kw_only=True)
class PermitCalls:
    """The limiter writes one batch made (tests and benchmarks read them)."""

    probes: int = 0
    renewals: int = 0
    releases: int = 0
    errors: list[str] = field(default_factory=list)


class Permits:
    """The tokens and slots of one batch (see the module docstring for the order of calls)."""

    def __init__(self, *, store: LeaseStore, limiters: Mapping[str, Limiter], owner: str, memory: LimiterMemory,
                 random: RandomSource, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        self.limiters = limiters
        self.owner = owner
        self.memory = memory
        self.random = random
        self.calls = PermitCalls()
        self._tokens: dict[int, list[_Token]] = {}
        self._slots: dict[str, _Slot] = {}
        self._pending: list[Future[Written]] = []
        self._lag_seen = False

    # ------------------------------------------------------------------ take
    def take(self, deliveries: Sequence[Delivery], *, now: float, lease_until: float | None
             ) -> list[tuple[Delivery, Refusal]]:
        """Take what the batch's limited jobs need; returns the deliveries that must wait, and why.

        ``lease_until`` is the invocation's lease (a slot's end if the
        invocation dies); ``None`` when the batch is too close to its deadline
        to start anything (nothing is taken then).
        """
        firsts: dict[str, Delivery] = {}
        followers: list[tuple[Delivery, Delivery]] = []
        limited: list[Delivery] = []
        for d in deliveries:
            if d.state is not State.DECODED or d.job is None or not d.job.options.limits:
                continue
            if d.key in firsts:
                followers.append((d, firsts[d.key]))  # a second copy of a key in the batch never runs itself
                continue
            firsts[d.key] = d
            limited.append(d)
        if not limited or lease_until is None:
            return []
        needs: dict[str, int] = {}
        for d in limited:
            assert d.job is not None
            for name in d.job.options.limits:
                needs[name] = needs.get(name, 0) + 1
        grace = self.memory.grace()
        probes: list[tuple[Limiter, int, Acquire]] = []
        for name, count in needs.items():
            limiter = self.limiters[name]
            if isinstance(limiter, RateLimit):
                until = now + limiter.per + grace
                indexes = self._token_probes(limiter, count, now)
            else:
                until = lease_until
                indexes = self._slot_probes(limiter)
            probes += [(limiter, i, Acquire(key=limiter.key(i), owner=self.owner, now=now, lease_until=until,
                                            expires_at=expiry(now, LIMIT_TTL_SECONDS, until))) for i in indexes]
        answers = self.store.write_many([op for _, _, op in probes]) if probes else []
        self.calls.probes += len(probes)
        granted = self._granted(probes, answers, now=now, grace=grace)
        refusals: dict[int, Refusal] = {}
        outcome: list[tuple[Delivery, Refusal]] = []
        for d in limited:
            assert d.job is not None
            missing = next((name for name in d.job.options.limits if not granted.get(name)), None)
            if missing is not None:
                refusal = Refusal(limiter=missing, delay=self._delay(self.limiters[missing], now))
                refusals[d.index] = refusal
                outcome.append((d, refusal))
                continue
            for name in d.job.options.limits:
                limiter = self.limiters[name]
                if isinstance(limiter, RateLimit):
                    key = granted[name].pop()
                    self._tokens.setdefault(d.index, []).append(_Token(key=key, limit=limiter, taken_at=now,
                                                                       grace=grace))
                else:
                    slot = self._slots.get(name)
                    if slot is None:
                        slot = self._slots[name] = _Slot(key=granted[name][0], limit=limiter, last_user=d.index)
                    slot.last_user = d.index
        for d, first in followers:
            if first.index in refusals:
                outcome.append((d, refusals[first.index]))
        for name, keys in granted.items():
            if isinstance(self.limiters[name], RateLimit):
                for key in keys:  # tokens nobody in the batch got: free them at once
                    self._release(key)
        outcome.sort(key=lambda pair: pair[0].index)
        return outcome

    def _granted(self, probes: list[tuple[Limiter, int, Acquire]], answers: list[Written], *, now: float,
                 grace: float) -> dict[str, list[str]]:
        granted: dict[str, list[str]] = {}
        for (limiter, index, op), answer in zip(probes, answers, strict=True):
            if answer.error is not None:
                self.calls.errors.append(f"{op.key}: {answer.error}")
                continue
            if isinstance(limiter, RateLimit):
                if answer.ok:
                    self.memory.saw_busy(limiter.name, index, until=now + limiter.per + grace)
                    granted.setdefault(limiter.name, []).append(op.key)
                elif answer.item is not None and answer.item.state is LeaseState.HELD \
                        and answer.item.lease_until is not None:
                    self.memory.saw_busy(limiter.name, index, until=answer.item.lease_until)
            elif answer.ok:
                if granted.get(limiter.name):
                    self._release(op.key)  # one slot is enough: the invocation runs one job at a time
                else:
                    granted[limiter.name] = [op.key]
        return granted

    def _token_probes(self, limiter: RateLimit, count: int, now: float) -> list[int]:
        """``count`` tokens to try (fewer if this process knows they are busy), from a random place."""
        busy = self.memory.busy(limiter.name, now=now)
        wanted = min(count, limiter.capacity - len(busy))
        if wanted <= 0:
            return []
        start = int(self.random.uniform(0, limiter.capacity)) % limiter.capacity
        picks: list[int] = []
        for step in range(limiter.capacity):
            index = (start + step) % limiter.capacity
            if index not in busy:
                picks.append(index)
                if len(picks) == wanted:
                    break
        return picks

    def _slot_probes(self, limiter: ConcurrencyLimit) -> list[int]:
        start = int(self.random.uniform(0, limiter.capacity)) % limiter.capacity
        return [(start + step) % limiter.capacity for step in range(min(SLOT_PROBES, limiter.capacity))]

    def _delay(self, limiter: Limiter, now: float) -> int:
        """Whole seconds until the limiter's next window, plus jitter (SQS visibility has no fractions)."""
        if isinstance(limiter, RateLimit):
            wait = self.memory.free_at(limiter, now=now) - now + self.random.uniform(0, limiter.per)
        else:
            wait = SLOT_RETRY_SECONDS + self.random.uniform(0, SLOT_RETRY_SECONDS)
        return min(MAX_VISIBILITY_SECONDS, max(1, math.ceil(wait)))

    # ------------------------------------------------------------------ run
    def start(self, d: Delivery, *, now: float) -> Refusal | None:
        """``d`` is about to start at ``now``: None when its tokens cover the start, else why it must wait."""
        tokens = self._tokens.pop(d.index, [])
        if tokens and not self._lag_seen:
            self._lag_seen = True
            self.memory.observe_lag(now - tokens[0].taken_at)
        late = next((t for t in tokens if now - t.taken_at >= t.limit.per / 2), None)
        if late is not None:
            for token in tokens:  # no start happened: every token it held is free again
                self._release(token.key)
            return Refusal(limiter=late.limit.name, delay=self._delay(late.limit, now))
        for token in tokens:
            if now - token.taken_at > token.grace:
                # Started after its grace: the token stays held until a full window after this start.
                until = now + token.limit.per
                self._write(Renew(key=token.key, owner=self.owner, lease_until=until,
                                  expires_at=expiry(now, LIMIT_TTL_SECONDS, until)))
                self.calls.renewals += 1
                self.memory.saw_busy(token.limit.name, _index(token.key), until=until)
        return None

    def finished(self, d: Delivery) -> None:
        """``d`` ran: release the slots no later job of the batch needs."""
        for slot in self._slots.values():
            if slot.last_user == d.index and not slot.released:
                slot.released = True
                self._release(slot.key, rate=False)

    def close(self) -> PermitCalls:
        """Release what is still held and wait for every limiter write of the batch."""
        for tokens in self._tokens.values():
            for token in tokens:
                self._release(token.key)
        self._tokens.clear()
        for slot in self._slots.values():
            if not slot.released:
                slot.released = True
                self._release(slot.key, rate=False)
        for future in self._pending:
            answer = future.result()
            if answer.error is not None:
                self.calls.errors.append(f"{answer.key}: {answer.error}")
        self._pending.clear()
        return self.calls

    # ------------------------------------------------------------------ writes
    def _release(self, key: str, *, rate: bool = True) -> None:
        self._write(Release(key=key, owner=self.owner, expires_at=expiry(self.clock(), LIMIT_TTL_SECONDS)))
        self.calls.releases += 1
        if rate:
            name = key.split("#")[1]
            self.memory.saw_free(name, _index(key))

    def _write(self, op: Operation) -> None:
        self._pending.append(self.store.submit(op))


def _index(key: str) -> int:
    return int(key.rsplit("#", 1)[1])
