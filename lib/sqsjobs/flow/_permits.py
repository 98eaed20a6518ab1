"""A batch's permits: the rate tokens and concurrency slots its limited jobs need, taken in one round trip.

The consumer (``sqsjobs.worker._consumer``) uses one ``Permits`` per batch::

    take()      before the claims: every limited job's tokens and slots, all
                probes concurrent (one round trip; a batch without limited
                jobs makes no call at all). A job that did not get every
                limiter it names is *deferred*: it goes back to the queue
                until the limiter's next window, plus jitter, and its record
                is never touched, so no attempt is used;
    start(d)    just before a limited job runs: it waits (at most 200 ms) for
                the window of its token's previous start to end, and its
                tokens must still cover a start now (else it is deferred and
                they are given back); a token that would outlast a window
                after the start is shortened to exactly that (an
                asynchronous ``Renew`` gives the rest back);
    must_wait(d) before a limited job starts: True while every slot the batch
                holds runs one of its jobs (it starts when one ends);
    finished(d) after it ran: its slot is free for the batch's next job of
                the limiter; settled(d), once it is decided (run or not), gives
                back the slots no remaining job of the batch can use;
    close()     at the end of the batch: whatever was taken and not used is
                released (fenced on this invocation), and the writes waited for.

Why a rate never overshoots: a token admits one start and is held until a
window after it. The jobs of a batch start one after another, so the batch
cannot know when; it takes the token of its k-th limited job with a lease of
``take + per + cover``, ``cover = lag + k x step + 3 deviations + 20 ms``
(``lag``: how long after the take a batch's first limited job starts,
``step``: how long apart its limited jobs start, each with its mean absolute
deviation, as this process has seen them), so the lease covers a start up to
``lease - per``. A job that starts later than its token covers is deferred
instead (its token is given back); one whose token would outlast
``start + per`` by more than a tenth of a window (50 ms at least) shortens it
to exactly that. So a token is never held longer than 1.1 windows after its
start (once the shortening write lands), and a batch whose jobs start as
steadily as before writes nothing more than its probes.

A token's lease end is therefore never before a window after the start it
admitted: it is the earliest moment its next start may happen. A batch may
take a token that much before that moment (``early = lag - a deviation``,
less than its cover), so it does its claims while the previous window ends
instead of after; the previous lease end comes back with the take (the item
as it was) and the job waits for it if it is still ahead (at most 200 ms,
else it is deferred: never a real sleep in Lambda). So two starts on one
token are always at least ``per`` apart, and ``rate`` tokens admit at most
``rate`` starts in any window of ``per`` seconds. A token taken and not used
is given back with the lease end it had, so the previous start's window still
holds. A batch takes only the tokens of the
jobs it starts within half a window (``k x step <= per / 2``): a slow batch
does not sit on tokens another invocation could use now.

Why a crowd waiting for a few slots does not overrun their items: every probe
is a conditional write, billed and counted against its item's partition
(1,000 write units a second) even when refused. A batch probes up to
``SLOT_PROBES`` slots more than the ``slots_wanted`` of it less one (one
slot for plain jobs: three probes); once a concurrency limiter has refused this process a
slot, for ``CONTENDED_SECONDS`` its batches first read the slots (one
consistent ``BatchGetItem`` of at most ``CONTENDED_READS`` of them, in the
round trip the probes would have taken) and write only to those that look
free; none free: the jobs are deferred without a write. So the writes on a
slot are its turnover plus the few racers that saw it free, and the refused
blind probes of a crowd of P invocations are at most P per
``CONTENDED_SECONDS``; the reads (at most one per batch and slot) have three
times a write's budget per partition. The read is only a hint: the
conditional write still decides, so the limit holds whatever a read saw
(tests/unit/test_slot_contention.py checks it across many invocations).
bench/capacity.py has the figures.

``LimiterMemory`` (``sqsjobs.flow._limiter_memory``) is what a process remembers
between batches: busy tokens, the lag and the step, recent deferrals.

Where a deferred job waits: until the limiter's next window (its earliest
token's end, as far as this process knows), plus jitter over as many windows
as the backlog it has seen needs (``deferred in the last window / rate``,
at least one). A backlog of 190 jobs at 10 a second comes back spread over
the next 19 seconds, about as fast as the limiter can start them, instead of
all at once every second.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS, RandomSource
from sqsjobs._errors import StoreError
from sqsjobs.flow._limiter_memory import LimiterMemory
from sqsjobs.flow._limits import LIMITS, ConcurrencyLimit, Limiter, RateLimit
from sqsjobs.store import _lease as lease
from sqsjobs.store._lease import LeaseState, Operation, Written, expiry
from sqsjobs.store._lease_ops import Acquire, Release, Renew
from sqsjobs.worker._delivery import State

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._delivery import Delivery

#: limiter items outlive their last lease by a day, then DynamoDB's TTL removes unused ones
LIMIT_TTL_SECONDS = 24 * 3600.0
#: slots a batch tries per concurrency limiter (it keeps one; extra successes are released at once)
SLOT_PROBES = 3
#: a batch refused a slot comes back after 1..2 s (slots free when a batch ends, which nobody announces)
SLOT_RETRY_SECONDS = 1.0
#: after a refused slot, this process reads a concurrency limiter's slots before writing them for this long
CONTENDED_SECONDS = 60.0
#: the most slots a contended batch reads (a random run of them, as the probes)
CONTENDED_READS = 25
#: a token held longer than this (or a tenth of its window) past a window after its start is shortened
SHORTEN_SECONDS = 0.05
#: the longest a job waits for its token's previous window to end (longer: it is deferred)
MAX_WAIT_SECONDS = 0.2


def slots_wanted(jobs: int, together: int, concurrency: int) -> int:
    """The slots of one concurrency limiter a batch takes: as many of its ``jobs`` as may run at once.

    ``together`` of them may run beside other jobs (async, or ``threads=True``), the rest one at a time, and
    the batch runs at most ``concurrency`` jobs at once.

    Example:
        >>> slots_wanted(10, 0, 10), slots_wanted(10, 10, 10), slots_wanted(4, 2, 10), slots_wanted(30, 30, 10)
        (1, 10, 3, 10)
    """
    return max(1, min(concurrency, together + (1 if jobs > together else 0)))


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
    index: int
    limit: RateLimit
    lease_until: float
    #: the end of the previous holder's lease: the earliest moment this token admits a start
    not_before: float | None


@dataclass(kw_only=True)
class _Slots:
    """The slots one concurrency limiter granted the batch, and who uses them."""

    keys: list[str]
    #: the deliveries of the batch that rely on them and are not decided yet
    users: set[int] = field(default_factory=set)
    #: those running now: one slot each
    running: set[int] = field(default_factory=set)


@dataclass(kw_only=True)
class PermitCalls:
    """The limiter writes one batch made (tests and benchmarks read them)."""

    probes: int = 0
    #: slots read before probing (a contended concurrency limiter)
    reads: int = 0
    renewals: int = 0
    releases: int = 0
    errors: list[str] = field(default_factory=list)


class Permits:
    """The tokens and slots of one batch (see the module docstring for the order of calls)."""

    def __init__(self, *, store: LeaseStore, limiters: Mapping[str, Limiter], owner: str, memory: LimiterMemory,
                 random: RandomSource, clock: Callable[[], float], sleep: Callable[[float], None]) -> None:
        self.store = store
        self.clock = clock
        self.sleep = sleep
        self.limiters = limiters
        self.owner = owner
        self.memory = memory
        self.random = random
        self.calls = PermitCalls()
        self._tokens: dict[int, list[_Token]] = {}
        self._slots: dict[str, _Slots] = {}
        self._pending: list[Future[Written]] = []
        self._taken_at = 0.0
        self._started = 0
        self._last_start: float | None = None

    # ------------------------------------------------------------------ take
    def take(self, deliveries: Sequence[Delivery], *, now: float, lease_until: float | None,
             concurrency: int = 1) -> list[tuple[Delivery, Refusal]]:
        """Take what the batch's limited jobs need; returns the deliveries that must wait, and why.

        ``lease_until`` is the invocation's lease (a slot's end if the
        invocation dies); ``None`` when the batch is too close to its deadline
        to start anything (nothing is taken then). ``concurrency`` is how many
        of the batch's jobs may run at once: a concurrency limiter's slots are
        taken for as many of its jobs as may run together (``slots_wanted``).
        """
        firsts: dict[str, Delivery] = {}
        followers: list[tuple[Delivery, Delivery]] = []
        limited: list[Delivery] = []
        for d in deliveries:
            if d.state is not State.DECODED or d.job is None or not LIMITS.of(d.job.options):
                continue
            if d.key in firsts:
                followers.append((d, firsts[d.key]))  # a second copy of a key in the batch never runs itself
                continue
            firsts[d.key] = d
            limited.append(d)
        if not limited or lease_until is None:
            return []
        self._taken_at = now
        needs: dict[str, int] = {}
        together: dict[str, int] = {}  # jobs of the limiter that may run beside each other
        for d in limited:
            assert d.job is not None
            for name in LIMITS.of(d.job.options):
                needs[name] = needs.get(name, 0) + 1
                together[name] = together.get(name, 0) + (d.job.is_async or d.job.options.threads)
        probes: list[tuple[Limiter, int, Acquire]] = []
        slots_needed: dict[str, int] = {}
        looks_free = self._read_contended([self.limiters[name] for name in needs], now)
        for name, count in needs.items():
            limiter = self.limiters[name]
            if isinstance(limiter, RateLimit):
                # Taken up to `early` before its lease ends (a lease that ends then counts as run out); the
                # job starts by the later of its cover and that end, and holds the token a window after.
                wanted = min(count, self._startable(limiter))
                indexes = (looks_free[name][:wanted] if name in looks_free
                           else self._token_probes(limiter, wanted, now))
                leases = [now + limiter.per + self.memory.cover(position) for position in range(len(indexes))]
                taken_as_of = now + self.memory.early(limiter)
            else:
                slots_needed[name] = slots_wanted(count, together[name], concurrency)
                indexes = looks_free.get(name, self._slot_order(limiter))[:SLOT_PROBES - 1 + slots_needed[name]]
                leases = [lease_until] * len(indexes)
                taken_as_of = now
            probes += [(limiter, i, Acquire(key=limiter.key(i), owner=self.owner, now=taken_as_of,
                                            lease_until=until, expires_at=expiry(now, LIMIT_TTL_SECONDS, until)))
                       for i, until in zip(indexes, leases, strict=True)]
        answers = self.store.write_many([op for *_, op in probes]) if probes else []
        self.calls.probes += len(probes)
        tokens, slots = self._granted(probes, answers, slots_needed)
        refused: dict[int, str] = {}
        for d in limited:
            assert d.job is not None
            missing = next((name for name in LIMITS.of(d.job.options) if not tokens.get(name) and name not in slots),
                           None)
            if missing is not None:
                refused[d.index] = missing
                continue
            for name in LIMITS.of(d.job.options):
                if name in slots:
                    self._slots.setdefault(name, _Slots(keys=slots[name])).users.add(d.index)
                else:
                    self._tokens.setdefault(d.index, []).append(tokens[name].pop(0))
        backlog = {name: self._backlog(self.limiters[name], now, sum(1 for n in refused.values() if n == name))
                   for name in set(refused.values())}
        refusals = {index: Refusal(limiter=name, delay=self._delay(self.limiters[name], now, backlog[name]))
                    for index, name in refused.items()}
        outcome = [(d, refusals[d.index]) for d in limited if d.index in refusals]
        outcome += [(d, refusals[first.index]) for d, first in followers if first.index in refusals]
        for unused in tokens.values():
            for token in unused:  # tokens nobody in the batch got: give them back at once
                self._give_back(token)
        outcome.sort(key=lambda pair: pair[0].index)
        return outcome

    def _startable(self, limiter: RateLimit) -> int:
        """How many limited jobs this batch starts within half a window, at the pace this process has seen."""
        step = self.memory.step
        if step <= 0:
            return limiter.capacity
        return max(1, math.floor(limiter.per / 2 / step) + 1)

    def _granted(self, probes: list[tuple[Limiter, int, Acquire]], answers: list[Written], wanted: dict[str, int]
                 ) -> tuple[dict[str, list[_Token]], dict[str, list[str]]]:
        """What the probes won: tokens per rate limiter, by lease (first to start, first to end); slots per
        concurrency limiter, as many as ``wanted`` (the others are given back at once)."""
        tokens: dict[str, list[_Token]] = {}
        slots: dict[str, list[str]] = {}
        for (limiter, index, op), answer in zip(probes, answers, strict=True):
            if answer.error is not None:
                self.calls.errors.append(f"{op.key}: {answer.error}")
            elif isinstance(limiter, ConcurrencyLimit):
                if not answer.ok:
                    self.memory.saw_contention(limiter.name, until=op.now + CONTENDED_SECONDS)
                elif len(slots.get(limiter.name, ())) >= wanted[limiter.name]:
                    self._release(op.key)  # enough: no more of the batch's jobs may run at once
                else:
                    slots.setdefault(limiter.name, []).append(op.key)
            elif answer.ok:
                until = op.lease_until or 0.0
                self.memory.saw_busy(limiter.name, index, until=until)
                before = answer.item  # None: absent (or past its TTL): no start to keep apart from
                tokens.setdefault(limiter.name, []).append(_Token(
                    key=op.key, index=index, limit=limiter, lease_until=until,
                    not_before=before.lease_until if before is not None else None))
            elif answer.item is not None and answer.item.state is LeaseState.HELD \
                    and answer.item.lease_until is not None:
                self.memory.saw_contention(limiter.name, until=op.now + CONTENDED_SECONDS)
                # Its holder may shorten it once its job starts, which is a window before its end at the latest.
                self.memory.saw_busy(limiter.name, index, until=min(answer.item.lease_until, op.now + limiter.per))
        for granted in tokens.values():
            granted.sort(key=lambda token: token.lease_until)
        return tokens, slots

    def _token_probes(self, limiter: RateLimit, count: int, now: float) -> list[int]:
        """``count`` tokens to try (fewer if this process knows they are busy), from a random place."""
        busy = self.memory.busy(limiter.name, now=now + self.memory.early(limiter))
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

    def _slot_order(self, limiter: ConcurrencyLimit) -> list[int]:
        """The slots to try, from a random place: ``SLOT_PROBES`` of them (or ``CONTENDED_READS``, to be read)."""
        start = int(self.random.uniform(0, limiter.capacity)) % limiter.capacity
        return [(start + step) % limiter.capacity
                for step in range(min(max(SLOT_PROBES, CONTENDED_READS), limiter.capacity))]

    def _read_contended(self, limiters: list[Limiter], now: float) -> dict[str, list[int]]:
        """For each contended limiter, the tokens or slots a read shows free, in probing order (one read for all).

        A limiter missing from the answer is probed blind (not contended, or the read failed). What looks
        free is what the acquire's rule (``store/_lease_ops.py``) would let this batch take; a token seen held is
        remembered busy as a refusal would be.
        """
        contended = [limiter for limiter in limiters if self.memory.contended(limiter.name, now=now)]
        if not contended:
            return {}
        orders: dict[str, list[int]] = {}
        for limiter in contended:
            if isinstance(limiter, RateLimit):
                orders[limiter.name] = self._token_probes(limiter, CONTENDED_READS, now)
            else:
                orders[limiter.name] = self._slot_order(limiter)
        keys = [limiter.key(i) for limiter in contended for i in orders[limiter.name]]
        if not keys:  # every token is known busy: nothing to read, nothing to probe
            return {limiter.name: [] for limiter in contended}
        try:
            seen = self.store.get_many(keys)
        except StoreError as error:  # the probes still decide; they only cost more writes
            self.calls.errors.append(f"read of {len(keys)} limiter items: {error}")
            return {}
        self.calls.reads += len(keys)
        free: dict[str, list[int]] = {}
        for limiter in contended:
            as_of = now + self.memory.early(limiter) if isinstance(limiter, RateLimit) else now
            free[limiter.name] = []
            for i in orders[limiter.name]:
                item = seen.get(limiter.key(i))
                probe = Acquire(key=limiter.key(i), owner=self.owner, now=as_of, lease_until=None, expires_at=as_of)
                if lease.answer(probe, item)[0].ok:
                    free[limiter.name].append(i)
                elif isinstance(limiter, RateLimit) and item is not None and item.lease_until is not None:
                    self.memory.saw_busy(limiter.name, i, until=min(item.lease_until, now + limiter.per))
        return free

    def _backlog(self, limiter: Limiter, now: float, count: int) -> float:
        """How many windows the jobs this process deferred lately need (at least one)."""
        if not isinstance(limiter, RateLimit):
            return 1.0
        return max(1.0, self.memory.deferred(limiter, now=now, count=count) / limiter.capacity)

    def _delay(self, limiter: Limiter, now: float, windows: float = 1.0) -> int:
        """Whole seconds until the limiter's next window, plus jitter over ``windows`` windows (whole: SQS)."""
        if isinstance(limiter, RateLimit):
            wait = self.memory.free_at(limiter, now=now) - now + self.random.uniform(0, limiter.per * windows)
        else:
            wait = SLOT_RETRY_SECONDS + self.random.uniform(0, SLOT_RETRY_SECONDS)
        return min(MAX_VISIBILITY_SECONDS, max(1, math.ceil(wait)))

    # ------------------------------------------------------------------ run
    def start(self, d: Delivery, *, now: float) -> Refusal | None:
        """``d`` is about to start at ``now``: None when its tokens cover the start (it then holds one of the
        batch's slots of each concurrency limiter it names), else why it must wait."""
        refusal = self._spend_tokens(d, now=now)
        if refusal is None:
            for slot in self._slots_of(d):
                slot.running.add(d.index)
        return refusal

    def _spend_tokens(self, d: Delivery, *, now: float) -> Refusal | None:
        tokens = self._tokens.pop(d.index, [])
        if not tokens:
            return None
        position = self._started
        if position == 0:
            self.memory.observe(lag=now - self._taken_at)
        elif self._last_start is not None:
            self.memory.observe(step=now - self._last_start)
        self._started += 1
        self._last_start = now
        wait = max((t.not_before - now for t in tokens if t.not_before is not None), default=0.0)
        if 0 < wait <= MAX_WAIT_SECONDS:
            self.sleep(wait)  # the previous start's window ends in a moment
            now = self.clock()
        late = next((t for t in tokens if now + t.limit.per > t.lease_until
                     or (t.not_before is not None and now < t.not_before)), None)
        if late is not None:
            for token in tokens:  # no start happened: every token it held goes back as it was
                self._give_back(token)
            return Refusal(limiter=late.limit.name, delay=self._delay(late.limit, now, self._backlog(late.limit,
                                                                                                    now, 1)))
        for token in tokens:
            until = now + token.limit.per
            if token.lease_until - until > max(SHORTEN_SECONDS, token.limit.per / 10):
                # Held well past a window after this start: give the rest of the lease back.
                self._write(Renew(key=token.key, owner=self.owner, lease_until=until,
                                  expires_at=expiry(now, LIMIT_TTL_SECONDS, until)))
                self.calls.renewals += 1
                self.memory.saw_busy(token.limit.name, token.index, until=until)
        return None

    def must_wait(self, d: Delivery) -> bool:
        """True while every slot the batch holds for one of ``d``'s concurrency limiters runs another job."""
        return any(d.index in slot.users and len(slot.running) >= len(slot.keys)
                   for slot in self._slots_of(d))

    def finished(self, d: Delivery) -> None:
        """``d`` ran: its slots are free for the batch's next job of their limiters."""
        for slot in self._slots_of(d):
            slot.running.discard(d.index)

    def settled(self, d: Delivery) -> None:
        """``d`` is decided (it ran or it did not start): give back the slots no remaining job can use."""
        for slot in self._slots_of(d):
            slot.users.discard(d.index)
            slot.running.discard(d.index)
            while len(slot.keys) > max(len(slot.users), len(slot.running)):
                self._release(slot.keys.pop())

    def _slots_of(self, d: Delivery) -> list[_Slots]:
        limits = LIMITS.of(d.job.options) if d.job is not None else ()
        return [self._slots[name] for name in limits if name in self._slots]

    def close(self) -> PermitCalls:
        """Give back what is still held and wait for every limiter write of the batch."""
        for tokens in self._tokens.values():
            for token in tokens:
                self._give_back(token)
        self._tokens.clear()
        for slot in self._slots.values():
            while slot.keys:
                self._release(slot.keys.pop())
        for future in self._pending:
            answer = future.result()
            if answer.error is not None:
                self.calls.errors.append(f"{answer.key}: {answer.error}")
        self._pending.clear()
        return self.calls

    # ------------------------------------------------------------------ writes
    def _give_back(self, token: _Token) -> None:
        """An unused token: its lease ends where the previous one did (that start's window still holds)."""
        now = self.clock()
        until = token.not_before if token.not_before is not None and token.not_before > now else now
        self._write(Renew(key=token.key, owner=self.owner, lease_until=until,
                          expires_at=expiry(now, LIMIT_TTL_SECONDS, until)))
        self.calls.releases += 1
        self.memory.saw_busy(token.limit.name, token.index, until=until)

    def _release(self, key: str) -> None:
        """A slot: free at once."""
        self._write(Release(key=key, owner=self.owner, expires_at=expiry(self.clock(), LIMIT_TTL_SECONDS)))
        self.calls.releases += 1

    def _write(self, op: Operation) -> None:
        self._pending.append(self.store.submit(op))


