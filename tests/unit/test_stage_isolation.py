"""A stage that raises ends only the deliveries it concerns (worker/_stages.py; issue 31 item 2).

A deliberately broken stage is plugged in beside sqsjobs' own, raising at one
hook point for the deliveries of job ``fragile`` only (what it ``concerns``).
At every hook point the batch survives, ``steady`` deliveries beside it are
acknowledged, the failure is logged at CRITICAL with the stage's name, and
``fragile`` ends through the one decision: back unclaimed or unstarted
(``stage_failed``, no attempt used), or its acknowledgement withheld
(``followup_failed``) once it ran. After-hooks unwind in reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypedDict

import pytest

from sqsjobs import JobApp, Outcome
from sqsjobs.testing.tester import JobTester
from sqsjobs.worker._batch import Batch
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._delivery import BatchResult, Delivery, State
from sqsjobs.worker._stages import Stage


class Item(TypedDict):
    """One item of the batch handler ``fragile-batch``."""

    n: int


class Lines:
    """A logger that keeps its lines (level, message, fields)."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Callable[..., None]:
        def log(message: str = "", *args: Any, extra: Mapping[str, Any] | None = None, **fields: Any) -> None:
            self.lines.append((level, message, dict(extra or {})))

        return log

    def critical_from(self, stage: str) -> list[dict[str, Any]]:
        return [fields for level, message, fields in self.lines
                if level == "critical" and fields.get("stage") == stage and stage in message]


class Broken(Stage):
    """Raises at ``hook`` for ``fragile``'s deliveries (the batch-wide hooks: whenever the batch holds one)."""

    def __init__(self, hook: str) -> None:
        self.hook = hook

    def concerns(self, d: Delivery) -> bool:
        return d.job_name == "fragile"

    def _maybe(self, hook: str, d: Delivery | None = None, batch: Batch | None = None) -> None:
        if hook != self.hook:
            return
        if d is not None and not self.concerns(d):
            return
        if batch is not None and not any(self.concerns(x) for x in batch.deliveries):
            return
        raise KeyError(f"a bug in {hook}")

    def before_claim(self, batch: Batch) -> None:
        self._maybe("before_claim", batch=batch)

    def claim_data(self, d: Delivery) -> Mapping[str, Any]:
        self._maybe("claim_data", d)
        return {}

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        self._maybe("before_run", d)
        return None

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        self._maybe("wrap_run", d)
        if self.hook == "wrap_run_after" and self.concerns(d):
            def run() -> Any:
                call()
                raise KeyError("a bug in the wrap's teardown")

            return run
        return call

    def after_run(self, batch: Batch, d: Delivery) -> None:
        self._maybe("after_run", d)

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        self._maybe("after_decision", d)

    def after_runs(self, batch: Batch) -> None:
        self._maybe("after_runs", batch=batch)

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        self._maybe("after_records", batch=batch)
        return {}


def with_stage(app: JobApp, extra: Stage) -> None:
    """Plug ``extra`` in after sqsjobs' own stages (the consumer is built once, on first use)."""
    runtime = app.runtime
    own = runtime._stages
    runtime._stages = lambda: [*own(), extra]  # type: ignore[method-assign]


@pytest.fixture
def world() -> Iterator[tuple[JobApp, Lines, list[str]]]:
    lines = Lines()
    app = JobApp(logger=lines)
    ran: list[str] = []

    @app.job("steady", key="steady:{n}")
    def steady(n: int) -> None:
        ran.append(f"steady:{n}")

    @app.job("fragile", key="fragile:{n}")
    def fragile(n: int) -> None:
        ran.append(f"fragile:{n}")

    yield app, lines, ran


def one_batch(app: JobApp, t: JobTester) -> BatchResult:
    steady, fragile = app.runtime.job("steady"), app.runtime.job("fragile")
    return t.run(steady.message(n=1), fragile.message(n=2), steady.message(n=3))


def outcomes(result: BatchResult) -> dict[str, tuple[Outcome | None, State]]:
    return {d.key: (d.outcome, d.state) for d in result.deliveries}


#: hook → (whether fragile's job ran, what became of its delivery, what its record says)
NOT_CLAIMED = (False, Outcome.RETRY, None)
NOT_STARTED = (False, Outcome.RETRY, "retrying")
RAN_WITHHELD = (True, Outcome.SUCCEEDED, "succeeded")
CASES = {
    "before_claim": NOT_CLAIMED,
    "claim_data": NOT_CLAIMED,
    "before_run": NOT_STARTED,
    "wrap_run": NOT_STARTED,
    "after_run": RAN_WITHHELD,
    "after_decision": RAN_WITHHELD,
    "after_runs": RAN_WITHHELD,
    "after_records": RAN_WITHHELD,
}


@pytest.mark.parametrize("hook", list(CASES))
def test_a_stage_that_raises_at_any_hook_ends_only_what_it_concerns(
        hook: str, world: tuple[JobApp, Lines, list[str]]) -> None:
    app, lines, ran = world
    ran_fragile, outcome, record = CASES[hook]
    with_stage(app, Broken(hook))
    with app.testing() as t:
        result = one_batch(app, t)  # never raises
        got = outcomes(result)
        assert got["steady:1"] == got["steady:3"] == (Outcome.SUCCEEDED, State.ACKED)
        assert ("fragile:2" in ran) is ran_fragile
        assert got["fragile:2"] == (outcome, State.RETURNED), got
        assert [d.message_id for d in result.deliveries if d.key == "fragile:2"] == list(result.failures)
        item = t.store.get("fragile:2")
        assert (item.get("outcome") if item is not None else None) == record
        if item is not None:
            assert item.attempts == (1 if ran_fragile else 0)  # an unstarted claim gives its attempt back
        assert lines.critical_from("Broken"), lines.lines
        assert lines.critical_from("Broken")[0]["hook"] == hook


@pytest.mark.parametrize("hook", ["before_run", "after_run", "wrap_run_after"])
def test_the_delivery_ends_once_the_stage_works_again(hook: str, world: tuple[JobApp, Lines, list[str]]) -> None:
    app, _, ran = world
    broken = Broken(hook)
    with_stage(app, broken)
    with app.testing() as t:
        one_batch(app, t)
        broken.hook = "none"
        t.drain()
        assert sorted(ran) == ["fragile:2", "steady:1", "steady:3"]  # each ran once
        assert not t.sqs.messages(t.queue_url)


def test_a_wrap_that_fails_after_the_job_keeps_the_jobs_outcome(world: tuple[JobApp, Lines, list[str]]) -> None:
    app, lines, ran = world
    with_stage(app, Broken("wrap_run_after"))
    with app.testing() as t:
        got = outcomes(one_batch(app, t))
        assert "fragile:2" in ran and got["fragile:2"] == (Outcome.SUCCEEDED, State.ACKED)
        item = t.store.get("fragile:2")
        assert item is not None and item.get("outcome") == "succeeded" and item.attempts == 1
        assert lines.critical_from("Broken")[0]["hook"] == "wrap_run"


def test_once_a_stage_failed_no_delivery_it_concerns_starts_in_that_batch(
        world: tuple[JobApp, Lines, list[str]]) -> None:
    app, _, ran = world
    with_stage(app, Broken("after_decision"))
    fragile = app.runtime.job("fragile")
    with app.testing() as t:
        got = outcomes(t.run(fragile.message(n=1), fragile.message(n=2)))
        assert ran == ["fragile:1"]
        assert got["fragile:1"] == (Outcome.SUCCEEDED, State.RETURNED)  # withheld
        assert got["fragile:2"] == (Outcome.RETRY, State.RETURNED)  # not started: the stage is broken
        record = t.store.get("fragile:2")
        assert record is not None and record.attempts == 0


def test_a_batch_handler_whose_wrap_fails_starts_no_item(world: tuple[JobApp, Lines, list[str]]) -> None:
    app, _, _ = world
    called: list[int] = []

    @app.job("fragile-batch", key="fb:{n}", batch=3)
    def fragile_batch(items: list[Item]) -> None:
        called.extend(i["n"] for i in items)

    class BrokenWrap(Broken):
        def concerns(self, d: Delivery) -> bool:
            return d.job_name == "fragile-batch"

    with_stage(app, BrokenWrap("wrap_run"))
    with app.testing() as t:
        result = t.run(*(fragile_batch.message(n=n) for n in range(3)))
        assert called == []
        assert {d.outcome for d in result.deliveries} == {Outcome.RETRY}
        assert all(t.store.get(f"fb:{n}").attempts == 0 for n in range(3))  # type: ignore[union-attr]


class Recording(Stage):
    def __init__(self, name: str, calls: list[str]) -> None:
        self.label, self.calls = name, calls

    def before_claim(self, batch: Batch) -> None:
        self.calls.append(f"{self.label}.before_claim")

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        self.calls.append(f"{self.label}.before_run")
        return None

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        def run() -> Any:
            self.calls.append(f"{self.label}.enter")
            try:
                return call()
            finally:
                self.calls.append(f"{self.label}.exit")

        return run

    def after_run(self, batch: Batch, d: Delivery) -> None:
        self.calls.append(f"{self.label}.after_run")

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        self.calls.append(f"{self.label}.after_decision")

    def after_runs(self, batch: Batch) -> None:
        self.calls.append(f"{self.label}.after_runs")

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        self.calls.append(f"{self.label}.after_records")
        return {}


def test_after_hooks_unwind_in_reverse(world: tuple[JobApp, Lines, list[str]]) -> None:
    app, _, _ = world
    calls: list[str] = []
    runtime = app.runtime
    own = runtime._stages
    runtime._stages = lambda: [*own(), Recording("A", calls), Recording("B", calls)]  # type: ignore[method-assign]
    with app.testing() as t:
        t.run(app.runtime.job("steady").message(n=1))
    assert calls == ["A.before_claim", "B.before_claim", "A.before_run", "B.before_run", "A.enter", "B.enter",
                     "B.exit", "A.exit", "B.after_run", "A.after_run", "B.after_decision", "A.after_decision",
                     "B.after_runs", "A.after_runs", "B.after_records", "A.after_records"]


# ---------------------------------------------------------------- several jobs in flight (worker/_run_step.py)
class BrokenAround(Broken):
    """``Broken``, whose wraps also work around an ``async def`` job, and which may raise in ``must_wait``."""

    def must_wait(self, batch: Batch, d: Delivery) -> bool:
        self._maybe("must_wait", d)
        return False

    def wrap_run(self, d: Delivery, call: Callable[[], Any]) -> Callable[[], Any]:
        self._maybe("wrap_run", d)
        if self.hook != "wrap_run_after" or not self.concerns(d):
            return call
        assert d.job is not None
        if d.job.is_async:
            async def run_async() -> Any:
                await call()
                raise KeyError("a bug in the wrap's teardown")

            return run_async

        def run() -> Any:
            call()
            raise KeyError("a bug in the wrap's teardown")

        return run


def concurrent_world(mode: str) -> tuple[JobApp, Lines, list[str], list[int]]:
    """``steady`` and ``fragile`` as async jobs (``mode`` "async") or ``threads=True`` ones, several in flight."""
    import asyncio
    import threading

    lines = Lines()
    app = JobApp(logger=lines, concurrency=4)
    ran: list[str] = []
    running, most = [0], [0]
    lock = threading.Lock()

    def enter() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])

    def leave(key: str) -> None:
        with lock:
            running[0] -= 1
            ran.append(key)

    if mode == "async":
        @app.job("steady", key="steady:{n}")
        async def steady(n: int) -> None:
            enter()
            for _ in range(3):  # the others start meanwhile
                await asyncio.sleep(0)
            leave(f"steady:{n}")

        @app.job("fragile", key="fragile:{n}")
        async def fragile(n: int) -> None:
            enter()
            await asyncio.sleep(0)
            leave(f"fragile:{n}")
    else:
        gate = threading.Barrier(2, timeout=30)  # two threaded jobs are in flight at once, or it breaks

        @app.job("steady", key="steady:{n}", threads=True)
        def steady(n: int) -> None:
            enter()
            if n == 1:
                gate.wait()
            leave(f"steady:{n}")

        @app.job("fragile", key="fragile:{n}", threads=True)
        def fragile(n: int) -> None:
            enter()
            leave(f"fragile:{n}")

        @app.job("partner", key="partner:{n}", threads=True)
        def partner(n: int) -> None:
            enter()  # it and steady:1 are both in before either passes the gate: two at once, whatever the order
            gate.wait()
            leave(f"partner:{n}")

    return app, lines, ran, most


CONCURRENT_CASES = {
    "must_wait": NOT_STARTED,
    "before_run": NOT_STARTED,
    "wrap_run": NOT_STARTED,
    "wrap_run_after": (True, Outcome.SUCCEEDED, "succeeded"),
    "after_run": RAN_WITHHELD,
}


@pytest.mark.parametrize("mode", ["async", "threads"])
@pytest.mark.parametrize("hook", list(CONCURRENT_CASES))
def test_with_several_jobs_in_flight_a_stage_that_raises_ends_only_what_it_concerns(hook: str, mode: str) -> None:
    """The rule above holds when the batch's jobs run at once, on one event loop or on job threads: main's
    ``_execute`` semantics carried into the run step (a stage failing before the job is called: it did not start,
    no duration, no 'job failed' line)."""
    app, lines, ran, most = concurrent_world(mode)
    ran_fragile, outcome, record = CONCURRENT_CASES[hook]
    with_stage(app, BrokenAround(hook))
    steady, fragile = app.runtime.job("steady"), app.runtime.job("fragile")
    messages = [steady.message(n=1), fragile.message(n=2), steady.message(n=3)]
    if mode == "threads":
        messages.append(app.runtime.job("partner").message(n=1))
    with app.testing() as t:
        result = t.run(*messages)  # never raises
        got = outcomes(result)
        assert got["steady:1"] == got["steady:3"] == (Outcome.SUCCEEDED, State.ACKED), got
        assert ("fragile:2" in ran) is ran_fragile
        want_state = State.ACKED if hook == "wrap_run_after" else State.RETURNED
        assert got["fragile:2"] == (outcome, want_state), got
        item = t.store.get("fragile:2")
        assert (item.get("outcome") if item is not None else None) == record
        assert item is not None and item.attempts == (1 if ran_fragile else 0)
        [d] = [d for d in result.deliveries if d.key == "fragile:2"]
        assert (d.duration_ms is not None) is ran_fragile  # JobDuration only for a job that started
        failed_lines = [f for level, message, f in lines.lines if message == "job failed"]
        assert not failed_lines, failed_lines  # a stage's failure is no job failure
        critical = lines.critical_from("BrokenAround")
        assert critical and critical[0]["hook"] == ("wrap_run" if hook == "wrap_run_after" else hook)
        assert most[0] >= 2  # the jobs ran at once


class YieldsThenRaises(Stage):
    """Ends ``fragile:2`` before the claim (its facts yielded), checks it is decided at once, then raises."""

    def __init__(self) -> None:
        self.seen: list[State] = []

    def concerns(self, d: Delivery) -> bool:
        return d.job_name == "fragile"

    def before_claim(self, batch: Batch) -> Iterator[tuple[Delivery, Facts]]:
        first = next(d for d in batch.deliveries if d.key == "fragile:2")
        yield first, Facts(ending=Ending.EXPIRED)
        self.seen.append(first.state)  # Stages concluded it as it was yielded: the stage's next check sees it
        raise KeyError("a bug after the first delivery")


def test_what_a_stage_yields_before_the_claim_is_concluded_as_it_comes(
        world: tuple[JobApp, Lines, list[str]]) -> None:
    """worker/_stages.py ``Stages.before_claim``: a stage hands its deliveries' fates over one by one, so what it
    ended before it raised stays ended; what it concerns that is still undecided goes back (``stage_failed``)."""
    app, lines, ran = world
    stage = YieldsThenRaises()
    with_stage(app, stage)
    with app.testing() as t:
        steady, fragile = app.runtime.job("steady"), app.runtime.job("fragile")
        got = outcomes(t.run(fragile.message(n=2), steady.message(n=3), fragile.message(n=4)))
    assert stage.seen == [State.DECIDED]
    assert got["fragile:2"] == (Outcome.EXPIRED, State.ACKED)
    assert got["fragile:4"] == (Outcome.RETRY, State.RETURNED)
    assert got["steady:3"] == (Outcome.SUCCEEDED, State.ACKED)
    assert ran == ["steady:3"]
    assert lines.critical_from("YieldsThenRaises")[0]["hook"] == "before_claim"
