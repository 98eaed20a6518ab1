"""Long delays under `app.testing()` (issue 25, finding 4): an in-memory one-time schedule on the test's clock.

`app.testing()` raised ConfigurationError on `delay=2 * 86_400`. Now the job waits in a FakeScheduler
schedule that `t.advance(...)` sends to its queue when due and `t.drain()` runs; `app.cancel(key)`,
`replace=True` and retries beyond 12 hours go through it as in EventBridge Scheduler.
"""

from __future__ import annotations

from typing import Any

import pytest

from sqsjobs import JobApp, Outcome, RetryableError
from sqsjobs.schedules._receipt import ScheduleOutcome

DAY = 86_400


@pytest.fixture
def app() -> JobApp:
    return JobApp()


def declare(app: JobApp, runs: list[Any]) -> Any:
    @app.job("digest", key="digest:{user_id}")
    def digest(user_id: int) -> None:
        runs.append(user_id)

    return digest


def test_a_two_day_delay_waits_in_a_schedule_until_the_clock_reaches_it(app: JobApp) -> None:
    runs: list[int] = []
    digest = declare(app, runs)
    with app.testing() as t:
        scheduled = digest.enqueue(user_id=7, delay=2 * DAY)
        assert scheduled.outcome is ScheduleOutcome.SCHEDULED and t.enqueued() == []
        assert [(s.job, s.key, s.kind, s.due.timestamp() - t.clock()) for s in t.scheduled()] == [
            ("digest", "digest:7", "enqueue", 2 * DAY)]
        assert t.drain() == [] and runs == []  # drain never jumps ahead to a schedule
        assert t.advance(2 * DAY - 1) == [] and t.drain() == []
        (fired,) = t.advance(1)
        assert fired.key == "digest:7" and t.scheduled() == []
        t.drain()
        assert runs == [7] and t.count(Outcome.SUCCEEDED, "digest") == 1


def test_cancel_deletes_the_pending_schedule_and_the_job_never_runs(app: JobApp) -> None:
    runs: list[int] = []
    digest = declare(app, runs)
    with app.testing() as t:
        digest.enqueue(user_id=7, delay=2 * DAY)
        assert app.cancel("digest:7") == "not_found_but_cancelled"
        assert t.scheduled() == []
        t.advance(3 * DAY)
        assert t.drain() == [] and runs == []
        assert app.status("digest:7").state == "cancelled"  # type: ignore[union-attr]


def test_replace_moves_the_schedule_and_a_second_enqueue_without_it_changes_nothing(app: JobApp) -> None:
    runs: list[int] = []
    digest = declare(app, runs)
    with app.testing() as t:
        digest.enqueue(user_id=7, delay=2 * DAY)
        again = digest.enqueue(user_id=7, delay=5 * DAY)
        assert again.outcome is ScheduleOutcome.ALREADY_SCHEDULED
        moved = digest.enqueue(user_id=7, delay=3 * DAY, replace=True)
        assert moved.outcome is ScheduleOutcome.MOVED and len(t.scheduled()) == 1
        t.advance(2 * DAY)
        assert t.drain() == [] and runs == []
        t.advance(DAY)
        t.drain()
        assert runs == [7]


def test_a_retry_beyond_12_hours_waits_in_a_schedule_too(app: JobApp) -> None:
    attempts: list[int] = []

    @app.job("sync", key="sync:{account}")
    def sync(account: int) -> None:
        attempts.append(account)
        if len(attempts) == 1:
            raise RetryableError("partner closed until tomorrow", delay=13 * 3600)

    with app.testing() as t:
        sync.enqueue(account=3)
        t.drain()
        assert attempts == [3] and [(s.key, s.kind) for s in t.scheduled()] == [("sync:3", "retry")]
        t.advance(13 * 3600)
        t.drain()
        assert attempts == [3, 3]
        assert [o.outcome for o in t.outcomes] == [Outcome.RETRY, Outcome.SUCCEEDED]


def test_enqueue_many_schedules_the_far_ones_and_sends_the_near_ones(app: JobApp) -> None:
    runs: list[int] = []
    digest = declare(app, runs)
    with app.testing() as t:
        report = app.enqueue_many([digest.message(user_id=1), digest.message(user_id=2, delay=DAY)])
        assert report.sent == 1 and len(report.scheduled) == 1
        t.drain()
        assert runs == [1]
        t.advance(DAY)
        t.drain()
        assert runs == [1, 2]


def test_a_fifo_queue_gets_the_delayed_job_in_its_group() -> None:
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs.fifo")

    @app.job("digest", key="digest:{user_id}", group="{user_id}")
    def digest(user_id: int) -> None: ...

    with app.testing() as t:
        digest.enqueue(user_id=7, delay=2 * DAY)
        t.advance(2 * DAY)
        (message,) = t.sqs.messages(t.queue_url)
        assert message.group_id == "7"
        t.drain()
        assert t.count(Outcome.SUCCEEDED) == 1


def test_the_app_is_put_back_afterwards(app: JobApp) -> None:
    declare(app, [])
    with app.testing():
        assert app.settings.schedule_group == "sqsjobs-test-delayed"
    assert app.settings.schedule_group is None and app.runtime.parts.scheduler_client is None
