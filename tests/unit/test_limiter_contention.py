"""Limiters shared by many invocations: never more than ``limit`` jobs at once, never more than ``rate`` starts a
window, and a crowd waiting for a limiter reads its items instead of writing refused probes on them
(sqsjobs.flow._permits, "Why a crowd ...").

Every invocation is a ``Permits`` of its own process (its own ``LimiterMemory``, its own random source) on one
shared ``InMemoryStore``, under one manual clock. Hypothesis draws what each does and when: take a batch's
slot, run its jobs one by one, end the batch, or die mid-batch (its slot stays held until its lease runs out).
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sqsjobs._job_options import JobOptions
from sqsjobs.flow._limiter_memory import LimiterMemory
from sqsjobs.flow._limits import ConcurrencyLimit, RateLimit
from sqsjobs.flow._permits import CONTENDED_SECONDS, SLOT_PROBES, Permits
from sqsjobs.store._lease import Operation, Written
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.store._memory import InMemoryStore
from sqsjobs.testing import sqs_record
from sqsjobs.worker._delivery import Delivery

LEASE_SECONDS = 30.0


class CountingStore(InMemoryStore):
    """The in-memory store, counting each owner's refused probes and every read."""

    def __init__(self) -> None:
        super().__init__()
        self.refused: dict[str, int] = {}
        self.writes: dict[str, int] = {}
        self.reads = 0

    def _apply(self, op: Operation) -> Written:
        answer = super()._apply(op)
        self.writes[op.key] = self.writes.get(op.key, 0) + 1
        if isinstance(op, Acquire) and not answer.ok:
            process = op.owner.split("/")[0]
            self.refused[process] = self.refused.get(process, 0) + 1
        return answer

    def get_many(self, keys: Any) -> Any:
        self.reads += len(keys)
        return super().get_many(keys)


@dataclass
class Invocation:
    """One process's current batch: its permits, its limited deliveries not yet run, whether it holds the slot."""

    permits: Permits
    waiting: list[Delivery]
    lease_until: float
    holding: bool


@dataclass
class Process:
    name: str
    memory: LimiterMemory = field(default_factory=LimiterMemory)
    batches: int = 0
    current: Invocation | None = None


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def limited_batch(size: int, first: int, limiter: str = "pdf") -> list[Delivery]:
    job = SimpleNamespace(is_async=False, options=JobOptions(features={"limits": (limiter,)}))
    batch = []
    for i in range(size):
        d = Delivery.parse(sqs_record({"v": 1}, message_id=f"m-{first + i}"), i)
        d.decoded(envelope=None, job=job, args={}, key=f"render:{first + i}", fingerprint="f")  # type: ignore[arg-type]
        batch.append(d)
    return batch


ACTIONS = st.lists(st.tuples(st.sampled_from(["batch", "run", "end", "crash"]), st.integers(0, 7),
                             st.floats(0.0, 3.0), st.integers(1, 4)), min_size=1, max_size=120)


@settings(max_examples=300, deadline=None)
@given(limit=st.integers(1, 3), actions=ACTIONS, seed=st.integers(0, 2**16))
def test_no_more_than_limit_jobs_run_at_once_and_a_refused_process_stops_writing_blind(
        limit: int, actions: list[tuple[str, int, float, int]], seed: int) -> None:
    store, clock = CountingStore(), Clock()
    pdf = ConcurrencyLimit(name="pdf", limit=limit)
    processes = [Process(name=f"p{i}") for i in range(8)]
    restarts = {p.name: 0 for p in processes}
    crashed: list[float] = []  # the lease ends of slots whose invocation died holding them
    started_at = clock.now
    numbering = 0

    def restart(process: Process) -> None:
        process.current = None  # its process is gone, and what it remembered with it
        process.memory = LimiterMemory()
        restarts[process.name] += 1

    for kind, who, wait, size in actions:
        clock.now += wait
        for process in processes:  # Lambda stops an invocation at its deadline, which its lease does not pass
            if process.current is not None and process.current.lease_until < clock.now:
                restart(process)
        process = processes[who]
        current = process.current
        if kind == "batch" and current is None:
            process.batches += 1
            permits = Permits(store=store, limiters={"pdf": pdf}, owner=f"{process.name}/{process.batches}",
                              memory=process.memory, random=random.Random(seed + who * 1000 + process.batches),
                              clock=clock, sleep=lambda seconds: None)
            batch = limited_batch(size, numbering)
            numbering += size
            lease_until = clock.now + LEASE_SECONDS
            refused = {d.index for d, _ in permits.take(batch, now=clock.now, lease_until=lease_until)}
            granted = [d for d in batch if d.index not in refused]
            assert len(refused) in (0, size)  # one slot serves the whole batch, or none does
            if granted:
                process.current = Invocation(permits=permits, waiting=granted, lease_until=lease_until,
                                             holding=True)
            else:  # every job deferred: the batch ends at once
                permits.close()
        elif kind == "run" and current is not None and current.waiting:
            d = current.waiting.pop(0)
            assert current.permits.start(d, now=clock.now) is None  # a slot needs no wait at the start
            current.permits.finished(d)
            if not current.waiting:
                current.holding = False  # its last job is done: the slot was released
        elif kind == "end" and current is not None:
            current.permits.close()
            process.current = None
        elif kind == "crash" and current is not None:
            if current.holding:
                crashed.append(current.lease_until)
            restart(process)
        live = sum(1 for p in processes if p.current is not None and p.current.holding)
        live += sum(1 for until in crashed if until >= clock.now)
        assert live <= limit
    # A process refused a slot reads before it writes for CONTENDED_SECONDS; its reads here are exact (nothing
    # runs between a read and its probes), so it writes refused probes (at most SLOT_PROBES) in one batch per
    # such period, and once more per restart (a new process remembers nothing).
    periods = 1 + int((clock.now - started_at) // CONTENDED_SECONDS)
    for process in processes:
        bound = periods * min(SLOT_PROBES, limit) * (1 + restarts[process.name])
        assert store.refused.get(process.name, 0) <= bound


def test_a_crowd_waiting_for_two_slots_writes_them_a_few_times_and_reads_them_instead() -> None:
    """200 invocations asking for one of 2 held slots, over a minute: refused blind probes once per process."""
    store, clock = CountingStore(), Clock()
    pdf = ConcurrencyLimit(name="pdf", limit=2)
    holders = []
    for n in range(2):
        permits = Permits(store=store, limiters={"pdf": pdf}, owner=f"holder{n}/1", memory=LimiterMemory(),
                          random=random.Random(n), clock=clock, sleep=lambda s: None)
        assert permits.take(limited_batch(1, n), now=clock.now, lease_until=clock.now + 300) == []
        holders.append(permits)
    memories = [LimiterMemory() for _ in range(200)]
    for second in range(60):
        for i, memory in enumerate(memories):
            permits = Permits(store=store, limiters={"pdf": pdf}, owner=f"p{i}/{second}", memory=memory,
                              random=random.Random(i * 100 + second), clock=clock, sleep=lambda s: None)
            refused = permits.take(limited_batch(1, 10_000 + i), now=clock.now, lease_until=clock.now + 30)
            assert len(refused) == 1
            permits.close()
        clock.now += 1.0
    slot_writes = {key: n for key, n in store.writes.items() if key.startswith("limit#pdf#slot#")}
    # Without the reads: 200 x 60 x 2 refused probes (24,000 write units on two items in a minute).
    # The holders: 2 probes each, the first keeps one slot and gives the other back (5); then each process's
    # first (blind) probes of both slots, refused; after that only reads.
    assert sum(slot_writes.values()) == 5 + 200 * 2
    assert store.reads == 200 * 59 * 2


RATE_ACTIONS = st.lists(st.tuples(st.sampled_from(["batch", "run", "run", "end", "crash"]), st.integers(0, 7),
                                  st.floats(0.0, 0.6), st.integers(1, 5)), min_size=1, max_size=150)


@settings(max_examples=200, deadline=None)
@given(rate=st.integers(1, 4), per=st.sampled_from([0.5, 1.0, 2.0]), actions=RATE_ACTIONS, seed=st.integers(0, 2**16))
def test_no_window_sees_more_than_rate_starts_and_a_refused_process_reads_before_it_writes(
        rate: int, per: float, actions: list[tuple[str, int, float, int]], seed: int) -> None:
    store, clock = CountingStore(), Clock()
    sms = RateLimit(name="sms", rate=rate, per=per)
    processes = [Process(name=f"p{i}") for i in range(8)]
    starts: list[float] = []
    started_at, numbering = clock.now, 0

    def sleep(seconds: float) -> None:
        clock.now += seconds

    for kind, who, wait, size in actions:
        clock.now += wait
        process = processes[who]
        current = process.current
        if kind == "batch" and current is None:
            process.batches += 1
            permits = Permits(store=store, limiters={"sms": sms}, owner=f"{process.name}/{process.batches}",
                              memory=process.memory, random=random.Random(seed + who * 1000 + process.batches),
                              clock=clock, sleep=sleep)
            batch = limited_batch(size, numbering, "sms")
            numbering += size
            refused = {d.index for d, _ in permits.take(batch, now=clock.now, lease_until=clock.now + 30)}
            granted = [d for d in batch if d.index not in refused]
            if granted:
                process.current = Invocation(permits=permits, waiting=granted, lease_until=clock.now + 30,
                                             holding=True)
            else:
                permits.close()
        elif kind == "run" and current is not None and current.waiting:
            d = current.waiting.pop(0)
            if current.permits.start(d, now=clock.now) is None:
                starts.append(clock.now)
            current.permits.finished(d)
        elif kind == "end" and current is not None:
            current.permits.close()
            process.current = None
        elif kind == "crash" and current is not None:
            process.current = None
            process.memory = LimiterMemory()
    starts.sort()
    for i, start in enumerate(starts):
        in_window = sum(1 for later in starts[i:] if later < start + per)
        assert in_window <= rate, (start, starts)
    periods = 1 + int((clock.now - started_at) // CONTENDED_SECONDS)
    for process in processes:
        restarts = sum(1 for kind, who, *_ in actions if kind == "crash" and f"p{who}" == process.name)
        # One batch's blind probes (at most its size) per contended period, and again after each restart.
        assert store.refused.get(process.name, 0) <= periods * 5 * (1 + restarts)


def test_a_crowd_asking_for_two_starts_a_second_writes_the_schedule_once_a_batch_and_never_shares_a_slot() -> None:
    """200 invocations each second asking for a start of a limiter of 2 a second, for a minute: every batch writes
    the one schedule item at most once (twice when its process guessed the schedule's form wrong), a process
    that saw the schedule full to its horizon writes nothing, and no two starts are closer than the interval."""
    from sqsjobs.flow import _schedule as schedule

    store, clock = CountingStore(), Clock()
    sms = RateLimit(name="sms", rate=2, per=1.0)
    memories = [LimiterMemory() for _ in range(200)]
    reserved: list[float] = []
    batches = 0
    for second in range(60):
        for i, memory in enumerate(memories):
            permits = Permits(store=store, limiters={"sms": sms}, owner=f"p{i}/{second}", memory=memory,
                              random=random.Random(i * 100 + second), clock=clock, sleep=lambda s: None)
            batch = limited_batch(1, 10_000 + second * 1000 + i, "sms")
            before = store.writes.get(sms.schedule_key(), 0)
            refusals = permits.take(batch, now=clock.now, lease_until=clock.now + 30)
            batches += 1
            assert store.writes.get(sms.schedule_key(), 0) - before <= 2
            if not refusals:
                reserved.append(permits._starts[0]["sms"])
            elif refusals[0][1].reservation is not None:
                reserved.append(schedule.carried({schedule.ATTR_SLOTS: {
                    "stringValue": refusals[0][1].reservation}})["sms"])
            permits.close()
        clock.now += 1.0
    reserved.sort()
    gaps = [b - a for a, b in itertools.pairwise(reserved)]
    assert min(gaps) >= schedule.interval(sms) - 1e-6  # never a slot shared, never two starts too close
    # The schedule filled to its horizon (900 s at 2 a second) and then took 2 a second, as the slots free.
    # (A container that saw it full writes again once 10 s of it are free: the last 10 s may be left unreserved.)
    assert len(reserved) >= (900 + 59 - schedule.FULL_RETRY_SECONDS) / schedule.interval(sms) - 2
    writes = store.writes[sms.schedule_key()]
    assert writes <= 2 * batches
    # Once full, the crowd refuses itself: at most a write per process every 10 s, not one a batch.
    full = (900 / 200 * schedule.interval(sms))  # about when 200 slots a second filled the horizon
    assert writes <= 200 * (full + 2) + 200 * (60 - full) / schedule.FULL_RETRY_SECONDS + len(reserved)
    print(f"\n{batches} batches, {len(reserved)} slots reserved, {writes} schedule writes")
