"""A batch's permits: the rate slots and concurrency slots its limited jobs need, each limiter in one round trip.

The consumer (``sqsjobs.worker._consumer``) uses one ``Permits`` per batch::

    take()      before the claims: one conditional write per rate limiter
                reserves a start slot for each of the batch's jobs that names
                it (``sqsjobs.flow._schedule``; a job whose copy carries its
                slot needs none), and the concurrency slots are probed, all
                in one round trip (a batch without limited jobs makes no call
                at all). A job whose slot is too far off to wait for here is
                *deferred to its slot*: a copy goes back with the slot in it
                and comes back just before it, so it is deferred once. A job
                that got no slot (the limiter's horizon is full, a slot of a
                concurrency limiter is busy) goes back to the queue, its
                record never touched, so no attempt is used;
    start(d)    just before a limited job runs: it waits in the batch for its
                slot (it is close: ``WAIT_AHEAD_SECONDS``), and a start later
                than its slot's grace is not made (the job is deferred and
                takes a new slot when it comes back);
    must_wait(d) before a limited job starts: True while every concurrency
                slot the batch holds runs one of its jobs (it starts when one
                ends);
    finished(d) after it ran: its concurrency slot is free for the batch's
                next job of the limiter; settled(d), once it is decided (run
                or not), gives back the slots no remaining job can use;
    close()     at the end of the batch: the concurrency slots still held are
                released (fenced on this invocation), and the writes waited for.

Why a rate never overshoots: ``sqsjobs.flow._schedule`` (slots ``interval``
apart, each start within its slot's grace). A reserved slot nobody uses is
simply a start that did not happen: nothing is given back, nothing leaks.

Why one item per rate limiter is enough: a batch writes it once (twice when
its process guessed the schedule's form wrong, ``sqsjobs.store._rate_ops``),
whatever its size, and the write is under 1 KB (one write unit). One item's
partition takes 1,000 write units a second, so one limiter item sustains
1,000 batches a second, up to 10,000 starts a second in batches of 10: far
above any rate a dependency sets per key. Beyond it, declare N limiters of
``rate / N`` and give each job one of them (docs/how-to/limits.md).

Why a crowd waiting for a few concurrency slots does not overrun their items:
every probe is a conditional write, billed and counted against its item's
partition (1,000 write units a second) even when refused. A batch probes up to
``SLOT_PROBES`` slots more than the ``slots_wanted`` of it less one (one slot
for plain jobs: three probes); once a concurrency limiter has refused this process a
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
between batches: contended slots, and where each rate limiter's schedule was.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqsjobs._backoff import MAX_VISIBILITY_SECONDS, RandomSource
from sqsjobs._errors import StoreError
from sqsjobs.flow import _schedule as schedule
from sqsjobs.flow._limiter_memory import LimiterMemory
from sqsjobs.flow._limits import LIMITS, ConcurrencyLimit, Limiter, RateLimit
from sqsjobs.store import _lease as lease
from sqsjobs.store._lease import Operation, Written, expiry
from sqsjobs.store._lease_ops import Acquire, Release
from sqsjobs.store._rate_ops import TAT, TakeSlots
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
#: writes a batch makes on one rate limiter at most (a wrong guess of the schedule's form, then the horizon)
RESERVE_ATTEMPTS = 3


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
    """A limited job that may not start now: which limiter refused, how long it waits (whole seconds), and the
    slots it reserved (``sqsjobs.flow._schedule.encode``: its copy carries them; None: it takes new ones).

    Example:
        >>> Refusal(limiter="ses", delay=2).delay
        2
    """

    limiter: str
    delay: int
    reservation: str | None = None


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
    #: conditional writes on rate limiters' schedules (one per limiter and batch, unless a guess was wrong)
    reservations: int = 0
    releases: int = 0
    errors: list[str] = field(default_factory=list)


class Permits:
    """The slots of one batch (see the module docstring for the order of calls)."""

    def __init__(self, *, store: LeaseStore, limiters: Mapping[str, Limiter], owner: str, memory: LimiterMemory,
                 random: RandomSource, clock: Callable[[], float], sleep: Callable[[float], None],
                 fifo: Callable[[Delivery], bool] = lambda d: False) -> None:
        self.store = store
        self.clock = clock
        self.sleep = sleep
        self.limiters = limiters
        self.owner = owner
        self.memory = memory
        self.random = random
        #: whether a delivery came from a FIFO queue (its copy cannot wait with DelaySeconds, nor carry a slot)
        self.fifo = fifo
        self.calls = PermitCalls()
        #: the start slot of each rate limiter each of the batch's jobs that runs here holds
        self._starts: dict[int, dict[str, float]] = {}
        self._slots: dict[str, _Slots] = {}
        self._pending: list[Future[Written]] = []
        #: when the batch reserved its slots (None: it reserved none, so there is no lag to learn)
        self._reserved_at: float | None = None

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
        starts, fresh = self._carried_and_fresh(limited, now)
        needs: dict[str, int] = {}
        for name, (count, together) in self._concurrency_needs(limited).items():
            needs[name] = slots_wanted(count, together, concurrency)
        lead = self.memory.lead()
        for name, wanting in fresh.items():
            limiter = self.limiters[name]
            assert isinstance(limiter, RateLimit)
            self._reserved_at = now
            for d, slot in zip(wanting, self._reserve(limiter, len(wanting), now, lead), strict=False):
                starts.setdefault(d.index, {})[name] = slot
        carrying = self._in_order(limited, starts)
        slots = self._take_slots(needs, now, lease_until)
        refusals: dict[int, Refusal] = {}
        for d in limited:
            assert d.job is not None
            refusal = self._refusal(d, starts.get(d.index, {}), slots, now, carrying)
            if refusal is not None:
                refusals[d.index] = refusal
                continue
            self._starts[d.index] = starts.get(d.index, {})
            for name in LIMITS.of(d.job.options):
                if name in slots:
                    self._slots.setdefault(name, _Slots(keys=slots[name])).users.add(d.index)
        outcome = [(d, refusals[d.index]) for d in limited if d.index in refusals]
        # A later copy of a key waits as its first does, its slots with it: only one of them can hold the key, so
        # the slots are never used twice, and neither copy is deferred again.
        outcome += [(d, refusals[first.index]) for d, first in followers if first.index in refusals]
        outcome.sort(key=lambda pair: pair[0].index)
        return outcome

    def _concurrency_needs(self, limited: list[Delivery]) -> dict[str, tuple[int, int]]:
        """Per concurrency limiter: how many of the jobs name it, and how many of those may run beside others."""
        needs: dict[str, tuple[int, int]] = {}
        for d in limited:
            assert d.job is not None
            for name in LIMITS.of(d.job.options):
                if isinstance(self.limiters[name], ConcurrencyLimit):
                    count, together = needs.get(name, (0, 0))
                    needs[name] = (count + 1, together + (d.job.is_async or d.job.options.threads))
        return needs

    def _carried_and_fresh(self, limited: list[Delivery], now: float
                           ) -> tuple[dict[int, dict[str, float]], dict[str, list[Delivery]]]:
        """The slots the deliveries' copies carry (still usable), and who needs a new one of which rate limiter."""
        starts: dict[int, dict[str, float]] = {}
        fresh: dict[str, list[Delivery]] = {}
        for d in limited:
            assert d.job is not None
            kept = schedule.carried(d.message_attributes)
            for name in LIMITS.of(d.job.options):
                limiter = self.limiters[name]
                if not isinstance(limiter, RateLimit):
                    continue
                slot = kept.get(name)
                if slot is not None and now <= slot + schedule.grace(limiter):
                    starts.setdefault(d.index, {})[name] = slot
                else:  # none, or it came back too late for it: a new one
                    fresh.setdefault(name, []).append(d)
        return starts, fresh

    def _in_order(self, limited: list[Delivery], starts: dict[int, dict[str, float]]) -> set[str]:
        """Give the batch's slots of each rate limiter to its jobs in the order they run, earliest first.

        The batch holds them all (reserved now, or carried by copies), and its jobs start one after another: a
        job given a slot earlier than the one before it would start late for it. Returns the rate limiters
        some of whose slots came with copies (their jobs wait longer in the batch: ``MAX_SLOT_WAIT_SECONDS``).
        """
        carrying: set[str] = set()
        for d in limited:
            carrying.update(schedule.carried(d.message_attributes))
        for name in {name for held in starts.values() for name in held}:
            holders = [d.index for d in limited if name in starts.get(d.index, {})]
            for index, slot in zip(holders, sorted(starts[i][name] for i in holders), strict=True):
                starts[index][name] = slot
        return carrying

    def _refusal(self, d: Delivery, starts: dict[str, float], slots: Mapping[str, list[str]], now: float,
                 carrying: set[str]) -> Refusal | None:
        """Why ``d`` may not start in this batch (None: it may, at its latest slot)."""
        assert d.job is not None
        for name in LIMITS.of(d.job.options):
            limiter = self.limiters[name]
            if isinstance(limiter, ConcurrencyLimit) and name not in slots:
                return Refusal(limiter=name, delay=self._retry_delay(SLOT_RETRY_SECONDS))
            if isinstance(limiter, RateLimit) and name not in starts:
                # No slot within the horizon (or the write failed): back once the horizon has room, spread.
                room = schedule.HORIZON_SECONDS - schedule.FULL_RETRY_SECONDS
                ahead = max(self.memory.tat(name, now=now) - now - room, 1.0)
                spread = self.random.uniform(0, schedule.FULL_RETRY_SECONDS)
                return Refusal(limiter=name, delay=self._retry_delay(ahead + spread))
        if not starts:
            return None
        latest = max(starts.values())
        name = max(starts, key=lambda n: starts[n])
        if latest - now <= (schedule.MAX_SLOT_WAIT_SECONDS if name in carrying else schedule.WAIT_AHEAD_SECONDS):
            return None
        if self.fifo(d):  # a FIFO copy cannot carry its slot back: it comes back then, and takes a new one
            return Refusal(limiter=name, delay=max(1, math.ceil(latest - now)))
        return Refusal(limiter=name, delay=schedule.return_delay(latest, now), reservation=schedule.encode(starts))

    def _retry_delay(self, wait: float) -> int:
        """Whole seconds (SQS) for a job that holds no slot: ``wait`` plus a second of jitter."""
        return min(MAX_VISIBILITY_SECONDS, max(1, math.ceil(wait + self.random.uniform(0, 1.0))))

    def _reserve(self, limiter: RateLimit, count: int, now: float, lead: float) -> list[float]:
        """Reserve up to ``count`` slots of ``limiter`` (one conditional write, ``sqsjobs.store._rate_ops``), the
        first ``lead`` seconds from now at the earliest (when the batch's first job will be ready for it)."""
        step = schedule.interval(limiter)
        key = limiter.schedule_key()
        seen = self.memory.tat(limiter.name, now=now)
        if seen > now + schedule.HORIZON_SECONDS - max(step, schedule.FULL_RETRY_SECONDS):
            return []  # this process saw the schedule full to its horizon: it waits for room before writing
        begin = now + lead
        idle = seen < begin
        expires_at = expiry(now, LIMIT_TTL_SECONDS, now + schedule.HORIZON_SECONDS)
        for _ in range(RESERVE_ATTEMPTS):
            span = count * step
            answer = self.store.write(TakeSlots(key=key, now=begin, span=span, expires_at=expires_at, idle=idle,
                                                latest=now + schedule.HORIZON_SECONDS - span))
            self.calls.reservations += 1
            if answer.error is not None:
                self.calls.errors.append(f"{key}: {answer.error}")
                return []
            tat = _tat(answer.item)
            if answer.ok and tat is not None:
                self.memory.saw_tat(limiter.name, tat)
                return schedule.slots_before(tat, count, limiter)
            if tat is None or tat < begin:
                idle = True
                continue
            self.memory.saw_tat(limiter.name, tat)
            idle = False
            count = min(count, math.floor((now + schedule.HORIZON_SECONDS - tat) / step))
            if count < 1:
                return []
        return []

    def _take_slots(self, needs: Mapping[str, int], now: float, lease_until: float) -> dict[str, list[str]]:
        """The slots of each concurrency limiter the batch wants (``needs``; probed concurrently): the keys won."""
        probes: list[tuple[Limiter, int, Acquire]] = []
        looks_free = self._read_contended([self.limiters[name] for name in needs], now)
        for name in needs:
            limiter = self.limiters[name]
            assert isinstance(limiter, ConcurrencyLimit)
            indexes = looks_free.get(name, self._slot_order(limiter))[:SLOT_PROBES - 1 + needs[name]]
            probes += [(limiter, i, Acquire(key=limiter.key(i), owner=self.owner, now=now, lease_until=lease_until,
                                            expires_at=expiry(now, LIMIT_TTL_SECONDS, lease_until)))
                       for i in indexes]
        answers = self.store.write_many([op for *_, op in probes]) if probes else []
        self.calls.probes += len(probes)
        return self._granted(probes, answers, needs)

    def _granted(self, probes: list[tuple[Limiter, int, Acquire]], answers: list[Written],
                 wanted: Mapping[str, int]) -> dict[str, list[str]]:
        """What the probes won: slots per concurrency limiter, as many as ``wanted`` (the others are given back at
        once)."""
        slots: dict[str, list[str]] = {}
        for (limiter, _, op), answer in zip(probes, answers, strict=True):
            if answer.error is not None:
                self.calls.errors.append(f"{op.key}: {answer.error}")
            elif not answer.ok:
                self.memory.saw_contention(limiter.name, until=op.now + CONTENDED_SECONDS)
            elif len(slots.get(limiter.name, ())) >= wanted[limiter.name]:
                self._release(op.key)  # enough: no more of the batch's jobs may run at once
            else:
                slots.setdefault(limiter.name, []).append(op.key)
        return slots

    def _slot_order(self, limiter: ConcurrencyLimit) -> list[int]:
        """The slots to try, from a random place: ``SLOT_PROBES`` of them (or ``CONTENDED_READS``, to be read)."""
        start = int(self.random.uniform(0, limiter.capacity)) % limiter.capacity
        return [(start + step) % limiter.capacity
                for step in range(min(max(SLOT_PROBES, CONTENDED_READS), limiter.capacity))]

    def _read_contended(self, limiters: list[Limiter], now: float) -> dict[str, list[int]]:
        """For each contended limiter, the slots a read shows free, in probing order (one read for all).

        A limiter missing from the answer is probed blind (not contended, or the read failed). What looks
        free is what the acquire's rule (``store/_lease_ops.py``) would let this batch take.
        """
        contended = [limiter for limiter in limiters if isinstance(limiter, ConcurrencyLimit)
                     and self.memory.contended(limiter.name, now=now)]
        if not contended:
            return {}
        orders = {limiter.name: self._slot_order(limiter) for limiter in contended}
        keys = [limiter.key(i) for limiter in contended for i in orders[limiter.name]]
        try:
            seen = self.store.get_many(keys)
        except StoreError as error:  # the probes still decide; they only cost more writes
            self.calls.errors.append(f"read of {len(keys)} limiter items: {error}")
            return {}
        self.calls.reads += len(keys)
        free: dict[str, list[int]] = {}
        for limiter in contended:
            free[limiter.name] = []
            for i in orders[limiter.name]:
                item = seen.get(limiter.key(i))
                probe = Acquire(key=limiter.key(i), owner=self.owner, now=now, lease_until=None, expires_at=now)
                if lease.answer(probe, item)[0].ok:
                    free[limiter.name].append(i)
        return free

    # ------------------------------------------------------------------ run
    def start(self, d: Delivery, *, now: float) -> Refusal | None:
        """``d`` is about to start at ``now``: None once its rate slots have come (it waits for them here; it then
        holds one of the batch's slots of each concurrency limiter it names), else why it may not start (it came
        too late for a rate slot: it takes a new one when it comes back)."""
        refusal = self._wait_for_slots(d, now=now)
        if refusal is None:
            for slots in self._slots_of(d):
                slots.running.add(d.index)
        return refusal

    def _wait_for_slots(self, d: Delivery, *, now: float) -> Refusal | None:
        starts = self._starts.pop(d.index, {})
        if not starts:
            return None
        if self._reserved_at is not None:  # the batch's first limited job: how long its claims took
            self.memory.observe_lag(now - self._reserved_at)
            self._reserved_at = None
        wait = max(starts.values()) - now
        if 0 < wait <= schedule.MAX_SLOT_WAIT_SECONDS:
            self.sleep(wait)  # its slot comes in a moment
            now = max(self.clock(), now + wait)  # a sleep lasts at least what it was asked (an injected one too)
        for name, slot in starts.items():
            limiter = self.limiters[name]
            assert isinstance(limiter, RateLimit)
            if now < slot or now > slot + schedule.grace(limiter):
                return Refusal(limiter=name, delay=self._retry_delay(max(slot - now, 0.0)))
        return None

    def has_slots(self, d: Delivery) -> bool:
        """Whether ``d`` holds rate slots of this batch it has not started at yet."""
        return d.index in self._starts

    def must_wait(self, d: Delivery) -> bool:
        """True while every slot the batch holds for one of ``d``'s concurrency limiters runs another job."""
        return any(d.index in slots.users and len(slots.running) >= len(slots.keys)
                   for slots in self._slots_of(d))

    def finished(self, d: Delivery) -> None:
        """``d`` ran: its concurrency slots are free for the batch's next job of their limiters."""
        for slots in self._slots_of(d):
            slots.running.discard(d.index)

    def settled(self, d: Delivery) -> None:
        """``d`` is decided (it ran or it did not start): give back the slots no remaining job can use."""
        for slots in self._slots_of(d):
            slots.users.discard(d.index)
            slots.running.discard(d.index)
            while len(slots.keys) > max(len(slots.users), len(slots.running)):
                self._release(slots.keys.pop())

    def _slots_of(self, d: Delivery) -> list[_Slots]:
        limits = LIMITS.of(d.job.options) if d.job is not None else ()
        return [self._slots[name] for name in limits if name in self._slots]

    def close(self) -> PermitCalls:
        """Give back the concurrency slots still held and wait for every limiter write of the batch."""
        self._starts.clear()
        for slots in self._slots.values():
            while slots.keys:
                self._release(slots.keys.pop())
        for future in self._pending:
            answer = future.result()
            if answer.error is not None:
                self.calls.errors.append(f"{answer.key}: {answer.error}")
        self._pending.clear()
        return self.calls

    # ------------------------------------------------------------------ writes
    def _release(self, key: str) -> None:
        """A slot: free at once."""
        self._write(Release(key=key, owner=self.owner, expires_at=expiry(self.clock(), LIMIT_TTL_SECONDS)))
        self.calls.releases += 1

    def _write(self, op: Operation) -> None:
        self._pending.append(self.store.submit(op))


def _tat(item: lease.LeaseItem | None) -> float | None:
    """The schedule's ``tat`` in an answer's item (a number as the store decoded it), or None."""
    value = item.get(TAT) if item is not None else None
    if value is None or isinstance(value, bool | str):
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
