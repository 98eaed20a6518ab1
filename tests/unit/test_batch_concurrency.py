"""A batch's jobs run together and every guarantee holds with several in flight (issue 32, items 2 and 3).

No test here depends on how fast anything runs: jobs that must be running at once wait for each other (an
``asyncio`` event, a ``threading.Barrier``) with a long timeout that only a sequential run would reach, and
times are read from a ``ManualClock`` or a counter the jobs move themselves.
"""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import threading
from collections import Counter
from typing import Any

import pytest
from aws_lambda_powertools import Logger

from sqsjobs import ConfigurationError, JobApp, Outcome, Settings
from sqsjobs.testing.tester import ManualClock
from sqsjobs.worker import _job_call

FIFO_QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo"
#: how long a job waits for the others it must run beside: reached only if they run one after another
TOGETHER = 30.0


class Gate:
    """Async jobs that wait until ``size`` of them are running at once, counting how many ever were."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.active = 0
        self.most = 0
        self.order: list[str] = []
        self._all_in: asyncio.Event | None = None

    async def enter(self, name: str) -> None:
        self._all_in = self._all_in or asyncio.Event()
        self.active += 1
        self.most = max(self.most, self.active)
        self.order.append(f"start {name}")
        if self.active >= self.size:
            self._all_in.set()
        await asyncio.wait_for(self._all_in.wait(), TOGETHER)

    async def leave(self, name: str) -> None:
        await asyncio.sleep(0)
        self.order.append(f"end {name}")
        self.active -= 1


def test_ten_async_jobs_run_at_once_and_the_batch_costs_two_dynamodb_calls() -> None:
    app = JobApp()
    gate = Gate(10)

    @app.job("receipt", key="receipt:{n}")
    async def receipt(n: int) -> None:
        await gate.enter(str(n))
        await gate.leave(str(n))

    with app.testing() as t:
        t.run(*[receipt.message(n=n) for n in range(10)])
        assert t.count(Outcome.SUCCEEDED) == 10 and gate.most == 10
        assert t.store.calls == 2  # one BatchExecuteStatement of claims, one of completions


def test_no_more_jobs_run_at_once_than_the_app_s_concurrency() -> None:
    app = JobApp(concurrency=3)
    gate = Gate(3)

    @app.job("receipt", key="receipt:{n}")
    async def receipt(n: int) -> None:
        await gate.enter(str(n))
        for _ in range(5):
            await asyncio.sleep(0)
        await gate.leave(str(n))

    with app.testing() as t:
        t.run(*[receipt.message(n=n) for n in range(9)])
        assert t.count(Outcome.SUCCEEDED) == 9 and gate.most == 3


def test_the_concurrency_setting_is_read_and_checked() -> None:
    assert Settings.from_env({"SQSJOBS_CONCURRENCY": "4", "SQSJOBS_FLUSH_AFTER": "0"}).concurrency == 4
    assert Settings().concurrency == 10 and Settings().flush_after == 1.0
    for bad in ({"concurrency": 0}, {"concurrency": 2.5}, {"flush_after": -1}, {"flush_after": float("nan")}):
        with pytest.raises(ConfigurationError):
            Settings(**bad)


def test_threaded_jobs_run_at_once_and_plain_ones_one_at_a_time_on_the_invocation_s_thread() -> None:
    app = JobApp()
    barrier = threading.Barrier(5, timeout=TOGETHER)
    threads: Counter[str] = Counter()
    running: list[int] = []
    most = [0]

    @app.job("thumbnail", key="thumbnail:{n}", threads=True)
    def thumbnail(n: int) -> None:
        threads[threading.current_thread().name] += 1
        barrier.wait()  # all five at once, or a BrokenBarrierError

    @app.job("ledger", key="ledger:{n}")
    def ledger(n: int) -> None:
        running.append(n)
        most[0] = max(most[0], len(running))
        assert threading.current_thread() is threading.main_thread()
        running.remove(n)

    with app.testing() as t:
        t.run(*[thumbnail.message(n=n) for n in range(5)], *[ledger.message(n=n) for n in range(5)])
        assert t.count(Outcome.SUCCEEDED) == 10
        assert len(threads) == 5 and "MainThread" not in threads and most == [1]


def test_a_plain_job_beside_async_ones_runs_with_no_event_loop_running() -> None:
    app = JobApp()
    got: list[str] = []

    @app.job("receipt", key="receipt:{n}")
    async def receipt(n: int) -> None:
        await asyncio.sleep(0)

    @app.job("legacy", key="legacy:{n}")
    def legacy(n: int) -> None:
        async def fetch() -> str:
            return "fetched"
        got.append(asyncio.run(fetch()))  # what sync code calling an async library does

    with app.testing() as t:
        t.run(receipt.message(n=1), legacy.message(n=1), receipt.message(n=2))
        assert t.count(Outcome.SUCCEEDED) == 3 and got == ["fetched"]


def test_a_fifo_group_runs_in_order_one_at_a_time_and_groups_run_beside_each_other() -> None:
    app = JobApp(queue_url=FIFO_QUEUE)
    gate = Gate(2)  # a1 and b1 must run at once: the groups are independent

    @app.job("ship", key="ship:{lane}:{n}", group="{lane}")
    async def ship(lane: str, n: int) -> None:
        await gate.enter(f"{lane}{n}")
        await gate.leave(f"{lane}{n}")

    with app.testing() as t:
        t.run(ship.message(lane="a", n=1), ship.message(lane="a", n=2), ship.message(lane="b", n=1),
              ship.message(lane="a", n=3))
        assert t.count(Outcome.SUCCEEDED) == 4
        a = [step for step in gate.order if step.split()[1].startswith("a")]
        assert a == ["start a1", "end a1", "start a2", "end a2", "start a3", "end a3"]
        assert gate.order.index("start b1") < gate.order.index("end a1")


def test_a_fifo_group_behind_an_async_failure_goes_back_unstarted() -> None:
    app = JobApp(queue_url=FIFO_QUEUE)
    ran: list[str] = []

    @app.job("ship", key="ship:{lane}:{n}", group="{lane}")
    async def ship(lane: str, n: int) -> None:
        await asyncio.sleep(0)
        ran.append(f"{lane}{n}")
        if (lane, n) == ("a", 1):
            raise ConnectionError("carrier down")

    with app.testing() as t:
        result = t.run(ship.message(lane="a", n=1), ship.message(lane="a", n=2), ship.message(lane="b", n=1))
        assert [d.outcome for d in result.deliveries] == [Outcome.RETRY, Outcome.GROUP_BLOCKED, Outcome.SUCCEEDED]
        assert sorted(ran) == ["a1", "b1"]


def test_a_concurrency_limiter_counts_every_job_running_at_once_and_its_slots_go_back() -> None:
    app = JobApp()
    app.concurrency_limit("pdf", 2)
    gate = Gate(2)

    @app.job("render", key="render:{n}", limits=["pdf"])
    async def render(n: int) -> None:
        await gate.enter(str(n))
        for _ in range(5):
            await asyncio.sleep(0)
        await gate.leave(str(n))

    with app.testing() as t:
        t.run(*[render.message(n=n) for n in range(6)])
        assert t.count(Outcome.SUCCEEDED) == 6 and gate.most == 2  # two slots taken, never more at once
        slots = [item for item in t.store.items() if item.key.startswith("limit#pdf#slot#")]
        assert len(slots) == 2 and all(item.state.value == "RELEASED" for item in slots)


def test_sequential_jobs_under_a_concurrency_limiter_take_one_slot() -> None:
    app = JobApp()
    app.concurrency_limit("pdf", 5)

    @app.job("render", key="render:{n}", limits=["pdf"])
    def render(n: int) -> None: ...

    with app.testing() as t:
        t.run(*[render.message(n=n) for n in range(4)])
        held = [item for item in t.store.items() if item.key.startswith("limit#pdf#slot#")
                and item.get("owner") is not None]
        assert t.count(Outcome.SUCCEEDED) == 4 and len(held) <= 3  # probes: one kept, the extras given back


def test_a_rate_limit_gives_each_start_its_own_slot() -> None:
    from sqsjobs.flow import _schedule as schedule

    app = JobApp()
    app.rate_limit("partner", rate=10)
    starts: list[float] = []

    @app.job("call-partner", key="call-partner:{n}", limits=["partner"])
    async def call_partner(n: int) -> None:
        starts.append(app.runtime.clock())
        await asyncio.sleep(0)

    with app.testing() as t:
        t.run(*[call_partner.message(n=n) for n in range(6)])
        # Async jobs run together, but each starts at its own slot: never two closer than the interval.
        assert len(starts) == 6 and t.count(Outcome.SUCCEEDED) == 6
        interval = schedule.interval(app.runtime.registry.limiters["partner"])  # type: ignore[arg-type]
        assert all(b - a >= interval - 1e-9 for a, b in itertools.pairwise(sorted(starts))), starts

    slow = JobApp()
    slow.rate_limit("partner", rate=3, per=60)

    @slow.job("call-partner", key="call-partner:{n}", limits=["partner"])
    async def call_slowly(n: int) -> None:
        await asyncio.sleep(0)

    with slow.testing() as t:
        result = t.run(*[call_slowly.message(n=n) for n in range(6)])
        # Slots 20 s apart: the first starts, the others are deferred once, to their slots, no attempt used.
        assert t.count(Outcome.SUCCEEDED) == 1 and t.count(Outcome.DEFERRED) == 5 and result.failures == ()
        assert all(d.attempt == 0 for d in result.deliveries if d.outcome is Outcome.DEFERRED)


def test_nothing_starts_after_the_deadline_margin_and_the_unstarted_give_their_attempts_back() -> None:
    clock = ManualClock()
    app = JobApp(concurrency=1)
    started: list[int] = []

    @app.job("slow", key="slow:{n}")
    async def slow(n: int) -> None:
        started.append(n)
        clock.advance(30)  # a long job: the invocation has 30 s left, the margin is 5 s

    with app.testing(clock=clock) as t:
        result = t.run(*[slow.message(n=n) for n in range(3)], remaining_ms=30_000)
        assert started == [0]
        assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED, Outcome.UNSTARTED, Outcome.UNSTARTED]
        assert [app.status(f"slow:{n}").attempts for n in (1, 2)] == [0, 0]


def test_at_the_deadline_margin_the_unstarted_are_released_while_a_plain_job_still_runs() -> None:
    clock = ManualClock()
    app = JobApp()
    seen: dict[str, Any] = {}

    @app.job("long", key="long:{n}")
    def long(n: int) -> None:
        clock.advance(26)  # past the margin (30 s left, 5 s margin), still running
        seen["others"] = [app.runtime.store.get(f"long:{m}") for m in (1, 2)]

    with app.testing(clock=clock) as t:
        t.run(*[long.message(n=n) for n in range(3)], remaining_ms=30_000)
    # Their not-started records were written at the margin, while job 0 ran: a kill there leaves them free.
    assert [item.state.value for item in seen["others"]] == ["RELEASED", "RELEASED"]
    assert [item.attempts for item in seen["others"]] == [0, 0]


def test_each_job_s_log_lines_carry_its_own_fields_when_they_interleave() -> None:
    stream = io.StringIO()
    app = JobApp(logger=Logger(service="shop", logger_handler=__import__("logging").StreamHandler(stream)))

    @app.job("receipt", key="receipt:{n}")
    async def receipt(n: int) -> None:
        app.logger.info("rendering")
        await asyncio.sleep(0)  # the other job logs in between
        app.logger.info("sending")

    with app.testing() as t:
        t.run(receipt.message(n=1, trace_id="t-1"), receipt.message(n=2, trace_id="t-2"))
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    jobs = [(line["message"], line["key"], line["trace_id"]) for line in lines if line["message"] != "job outcome"]
    assert jobs == [("rendering", "receipt:1", "t-1"), ("rendering", "receipt:2", "t-2"),
                    ("sending", "receipt:1", "t-1"), ("sending", "receipt:2", "t-2")]
    assert app.logger.thread_safe_get_current_keys() == {}  # nothing left behind for the next batch


def test_job_duration_is_each_job_s_own(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [0.0]
    monkeypatch.setattr(_job_call.time, "perf_counter", lambda: now[0])
    app = JobApp()
    first_done = asyncio.Event()

    @app.job("quick", key="quick:{n}")
    async def quick(n: int) -> None:
        now[0] += 1.0
        first_done.set()

    @app.job("slow", key="slow:{n}")
    async def slow(n: int) -> None:
        await first_done.wait()
        now[0] += 10.0

    with app.testing() as t:
        result = t.run(slow.message(n=1), quick.message(n=1))
    assert [round(d.duration_ms or 0) for d in result.deliveries] == [11_000, 1_000]
    durations = [doc["JobDuration"] for doc in map(json.loads, t.metrics) if "JobDuration" in doc]
    assert sorted(round(v) for value in durations for v in (value if isinstance(value, list) else [value])) == [
        1_000, 11_000]


def test_the_loop_is_kept_between_invocations_so_a_job_s_module_level_async_state_stays_usable() -> None:
    app = JobApp()
    shared: dict[str, Any] = {}

    @app.job("receipt", key="receipt:{n}")
    async def receipt(n: int) -> None:
        lock = shared.setdefault("lock", asyncio.Lock())  # bound to the loop it is first used on
        async with lock:
            await asyncio.sleep(0)

    with app.testing() as t:
        for batch in range(3):  # three invocations of one warm worker
            t.run(receipt.message(n=2 * batch), receipt.message(n=2 * batch + 1))
        assert t.count(Outcome.SUCCEEDED) == 6


def test_a_batch_handled_from_inside_a_running_loop_still_runs_its_async_jobs() -> None:
    app = JobApp()
    ran: list[int] = []

    @app.job("receipt", key="receipt:{n}")
    async def receipt(n: int) -> None:
        await asyncio.sleep(0)
        ran.append(n)

    async def an_async_test() -> None:
        with app.testing() as t:
            t.run(receipt.message(n=1), receipt.message(n=2))
            assert t.count(Outcome.SUCCEEDED) == 2

    asyncio.run(an_async_test())
    assert sorted(ran) == [1, 2]


def test_a_batch_of_plain_jobs_never_imports_asyncio() -> None:
    """Cold start: the loop, and ``asyncio`` itself, come with the first batch that has a job to run on one."""
    import subprocess
    import sys

    script = """
import sys
from sqsjobs import JobApp
app = JobApp()
@app.job("plain", key="plain:{n}")
def plain(n: int) -> None: ...
@app.job("thumbnail", key="thumbnail:{n}", threads=True)
def thumbnail(n: int) -> None: ...
with app.testing() as t:
    t.run(plain.message(n=1), plain.message(n=2))
    before = "asyncio" in sys.modules
    t.run(thumbnail.message(n=1))
print(before, "asyncio" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.split() == ["False", "True"]
