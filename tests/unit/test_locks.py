"""Scheduled-job units: periods from expressions and ticks, declarations, leases, and the template agreeing."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Any

import pytest
from template_support import load_template

from sqsjobs import ConfigurationError, InMemoryStore, InvalidEventError, JobApp, PeriodBusyError, UnknownJobError
from sqsjobs.schedules._period_locks import Taken
from sqsjobs.schedules._periodic import DAILY, HOURLY, MINUTELY, period_format, scheduled_time
from sqsjobs.store._lease import LeaseItem, LeaseState
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.testing import FakeContext


@pytest.mark.parametrize(("expression", "period"), [
    ("cron(0 2 * * ? *)", DAILY),
    ("cron(30 4 ? * MON-FRI *)", DAILY),
    ("cron(15 * * * ? *)", HOURLY),
    ("cron(0 2,14 * * ? *)", HOURLY),
    ("cron(0/5 * * * ? *)", MINUTELY),
    ("rate(1 day)", DAILY),
    ("rate(6 hours)", HOURLY),
    ("rate(5 minutes)", MINUTELY),
    ("at(2026-08-05T02:00:00)", MINUTELY),
])
def test_the_period_is_the_coarsest_bucket_the_expression_fires_in_at_most_once(expression: str, period: str) -> None:
    assert period_format(expression) == period


@pytest.mark.parametrize("expression", ["cron(0 2 * * ?)", "every day", "rate(1 week)"])
def test_expressions_that_are_not_eventbridge_are_refused(expression: str) -> None:
    with pytest.raises(ConfigurationError):
        period_format(expression)


def test_the_tick_is_named_by_its_scheduled_time_then_the_rule_time_then_now() -> None:
    assert scheduled_time({"scheduled_time": "2026-08-05T02:00:00Z", "time": "2026-08-06T00:00:00Z"},
                          0) == datetime(2026, 8, 5, 2, tzinfo=UTC)
    assert scheduled_time({"time": "2026-08-06T00:00:00Z"}, 0) == datetime(2026, 8, 6, tzinfo=UTC)
    assert scheduled_time({"scheduled_time": "2026-08-05T02:00:00"}, 0).tzinfo is UTC  # naive means UTC
    assert scheduled_time({}, 86_400.0) == datetime(1970, 1, 2, tzinfo=UTC)


def make_app(**options: Any) -> JobApp:
    return JobApp(queue_url="https://sqs.example/q", table_name="idempotency", **options)


def test_a_scheduled_job_needs_a_period_parameter_and_is_not_left_registered_without_one() -> None:
    app = make_app()
    with pytest.raises(ConfigurationError, match="'period: str' parameter"):
        @app.scheduled("nightly-report", schedule="cron(0 2 * * ? *)")
        def report(day: str) -> None: ...
    assert "nightly-report" not in app.jobs and app.runtime.registry.schedules == {}


def test_scheduled_declarations_are_validated() -> None:
    app = make_app()
    with pytest.raises(ConfigurationError, match="strftime"):
        app.scheduled("a", schedule="cron(0 2 * * ? *)", period="daily")
    with pytest.raises(ConfigurationError, match="lease_seconds"):
        app.scheduled("b", schedule="cron(0 2 * * ? *)", lease_seconds=0)

    @app.scheduled("weekly", schedule="cron(0 2 ? * MON *)", period="%G-W%V", max_attempts=2)
    def weekly(period: str) -> None: ...

    assert app.runtime.registry.schedules["weekly"].period_of(datetime(2026, 8, 5, tzinfo=UTC)) == "2026-W32"
    assert weekly.options.max_attempts == 2 and weekly.message(period="2026-W32").key == "weekly:2026-W32"


class Clock:
    def __init__(self) -> None:
        self.now = 1_000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def scheduler_with_store(**options: Any) -> tuple[JobApp, Clock, list[str]]:
    clock = Clock()
    app = make_app(store=InMemoryStore(), clock=clock, sleep=clock.sleep, logger=_Quiet(), **options)
    ran: list[str] = []

    @app.scheduled("r", schedule="rate(1 day)")
    def r(period: str) -> None:
        ran.append(period)

    return app, clock, ran


def test_the_lease_is_the_invocation_time_left_plus_the_margin() -> None:
    app, clock, _ran = scheduler_with_store(lease_margin=5, function_timeout=120)
    app.runtime.scheduler.fire("r", context=FakeContext(remaining_ms=30_000, clock=clock))
    (lock,) = app.runtime.store.items()
    assert lock.lease_until == clock.now + 35.0
    app2, clock2, _ = scheduler_with_store(lease_margin=5, function_timeout=120)
    app2.runtime.scheduler.fire("r")  # no Lambda context: the function's timeout bounds the run
    assert app2.runtime.store.items()[0].lease_until == clock2.now + 125.0


def test_a_shorter_lease_seconds_wins_over_the_invocation_time() -> None:
    app, clock, _ = scheduler_with_store(lease_margin=5)
    app.scheduled("short", schedule="rate(1 hour)", lease_seconds=10)(lambda period: None)
    app.runtime.scheduler.fire("short", context=FakeContext(remaining_ms=300_000, clock=clock))
    (lock,) = app.runtime.store.items()
    assert lock.lease_until == clock.now + 10.0


def held_by_a_dead_run(app: JobApp, clock: Clock, lease: float) -> str:
    key = f"r:{app.runtime.registry.schedules['r'].period_of(scheduled_time({}, clock.now))}"  # its own record
    app.runtime.store.write(Acquire(key=key, owner="dead", now=clock.now, lease_until=clock.now + lease,
                            expires_at=clock.now + 86_400))
    return key


def test_a_tick_waits_out_a_dead_holders_lease_that_ends_within_its_invocation_then_runs() -> None:
    app, clock, ran = scheduler_with_store()
    held_by_a_dead_run(app, clock, lease=40)
    result = app.runtime.scheduler.fire("r", context=FakeContext(remaining_ms=120_000, clock=clock))
    assert result.fired and len(ran) == 1
    assert sum(clock.slept) == pytest.approx(41.0)  # polled until the lease was over, never past it


def test_a_tick_fails_when_the_holders_lease_outlasts_it_so_lambda_retries_later() -> None:
    # Finding 7: the period of a run killed while holding its lease used to be lost to a "fired: False".
    app, clock, ran = scheduler_with_store()
    key = held_by_a_dead_run(app, clock, lease=300)
    with pytest.raises(PeriodBusyError, match="Lambda retries"):
        app.runtime.scheduler.fire("r", context=FakeContext(remaining_ms=60_000, clock=clock))
    assert ran == [] and clock.slept == []
    clock.now += 301  # Lambda's retry, after the dead run's lease
    assert app.runtime.scheduler.fire("r", context=FakeContext(remaining_ms=60_000, clock=clock)).fired
    assert app.runtime.store.get(key).state is LeaseState.DONE and len(ran) == 1


def test_a_tick_that_finds_the_period_done_does_nothing_and_succeeds() -> None:
    app, _clock, ran = scheduler_with_store()
    assert app.runtime.scheduler.fire("r").fired
    again = app.runtime.scheduler.fire("r")
    assert not again.fired and again.reason.startswith("already done by") and len(ran) == 1


def test_events_must_name_a_scheduled_job_when_there_are_several() -> None:
    app = make_app()
    for name in ("a", "b"):
        app.scheduled(name, schedule="rate(1 day)")(lambda period: None)
    with pytest.raises(InvalidEventError, match="scheduled_time"):
        app.fire_schedule({"scheduled_time": "2026-08-05T02:00:00Z"})
    with pytest.raises(UnknownJobError, match="scheduled: a, b"):
        app.runtime.scheduler.fire("c")


def test_taken_explains_itself() -> None:
    held = LeaseItem(key="r:1", state=LeaseState.HELD, owner="a", lease_until=10.0)
    assert Taken(key=held.key, ok=False, current=held).reason == "held by a until 10.0"
    assert Taken(key=held.key, ok=True).reason == "acquired"
    assert Taken(key=held.key, ok=False).reason == "held by another owner"
    assert Taken(key=held.key, ok=False, error="throttled").reason == "the store failed: throttled"


def test_every_template_schedule_matches_the_apps_declaration(handlers_on_path: Any) -> None:
    import app as reference  # handlers/app.py, as Lambda imports it

    template = load_template()
    seen = {}
    for logical_id, resource in template["Resources"].items():
        for event in (resource.get("Properties", {}).get("Events") or {}).values():
            if event.get("Type") == "ScheduleV2":
                payload = json.loads(event["Properties"]["Input"])
                seen[payload["job"]] = (logical_id, event["Properties"]["ScheduleExpression"])
                assert payload["scheduled_time"] == "<aws.scheduler.scheduled-time>"
                assert resource["Properties"]["Handler"] == "scheduler.handler"
    assert {job: expression for job, (_, expression) in seen.items()} == {
        name: spec.expression for name, spec in reference.app.runtime.registry.schedules.items()}
    sys.modules.pop("app", None)


class _Quiet:
    def info(self, *args: Any, **kwargs: Any) -> None: ...

    def warning(self, *args: Any, **kwargs: Any) -> None: ...
