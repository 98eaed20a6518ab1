"""Delays beyond 15 minutes on moto: one-time schedules for enqueues and long retries, end to end in-process.

moto's EventBridge Scheduler stores schedules (and answers ``ConflictException``
for a name taken) but never fires them; ``OneTimeScheduleRunner.tick(now)`` —
the local cloud's emulator — fires them at a time the test chooses.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from aws_support import MAX_ATTEMPTS
from botocore.exceptions import ClientError
from typer.testing import CliRunner

from sqsjobs import JobApp, Outcome, RetryableError
from sqsjobs.cli import build_app
from sqsjobs.enqueue._delays import schedule_name
from sqsjobs.local.one_time import OneTimeScheduleRunner
from sqsjobs.ops._status import collect_status
from sqsjobs.schedules._one_time import OneTimeSchedules, ScheduledJob, ScheduleOutcome
from sqsjobs.testing import messages_in, queue_arn, receive_event, sqs_event
from sqsjobs.worker._delivery import State

GROUP = "jobs-delayed"
ROLE = "arn:aws:iam::123456789012:role/sqsjobs-SchedulerDeliveryRole"


class Clients:
    """What the local cloud's emulator asks for: a client per service (here moto's, in-process)."""

    def __init__(self, **clients: Any) -> None:
        self.clients = clients

    def get(self, service: str) -> Any:
        return self.clients[service]


class Refusing:
    """A Scheduler client that refuses to create schedules (AccessDenied), as a role without the grant would."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.meta = real.meta
        self.exceptions = real.exceptions

    def create_schedule(self, **_: Any) -> Any:
        raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "not authorized"}}, "CreateSchedule")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@pytest.fixture
def scheduler(aws: Any) -> Iterator[Any]:
    client = boto3.client("scheduler", region_name="us-east-1")
    client.create_schedule_group(Name=GROUP)
    yield client


@pytest.fixture
def delayed_app(make_app: Any, scheduler: Any) -> Any:
    def make(**overrides: Any) -> JobApp:
        options: dict[str, Any] = {"schedule_group": GROUP, "scheduler_role_arn": ROLE, "scheduler_client": scheduler}
        options.update(overrides)
        app: JobApp = make_app(**options)
        return app

    return make


def declare(app: JobApp) -> Any:
    @app.job("reminder", key="reminder:{user_id}")
    def reminder(user_id: int) -> None: ...

    return reminder


def schedules(scheduler: Any) -> list[str]:
    return sorted(s["Name"] for s in scheduler.list_schedules(GroupName=GROUP)["Schedules"])


def runner(aws: Any, scheduler: Any) -> OneTimeScheduleRunner:
    return OneTimeScheduleRunner(Clients(sqs=aws.sqs, scheduler=scheduler), groups=[GROUP],
                                 report=lambda level, text: None)


# ------------------------------------------------------------------ enqueue
def test_a_two_hour_delay_waits_in_a_schedule_not_on_the_queue(delayed_app: Any, aws: Any, scheduler: Any,
                                                                 clock: Any) -> None:
    reminder = declare(delayed_app())
    message = reminder.message(user_id=7, delay=timedelta(hours=2))

    result = reminder.runtime.send(message)

    assert isinstance(result, ScheduledJob) and result.outcome is ScheduleOutcome.SCHEDULED
    schedule = scheduler.get_schedule(Name=schedule_name("reminder:7"), GroupName=GROUP)
    assert result == schedule["Arn"]
    assert schedule["ScheduleExpression"] == "at(2026-01-01T02:00:00)"
    assert schedule["ScheduleExpressionTimezone"] == "UTC"
    assert schedule["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert schedule["ActionAfterCompletion"] == "DELETE"
    target = schedule["Target"]
    assert target["Arn"] == queue_arn(aws.sqs, aws.queue_url)
    assert target["RoleArn"] == ROLE
    assert target["Input"] == message.body  # the full envelope
    assert target["DeadLetterConfig"]["Arn"] == queue_arn(aws.sqs, aws.dlq_url)
    assert target["RetryPolicy"] == {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}
    assert messages_in(aws.sqs, aws.queue_url) == []


def test_the_same_key_again_is_already_scheduled_and_replace_moves_it(delayed_app: Any, scheduler: Any) -> None:
    reminder = declare(delayed_app())
    first = reminder.enqueue(user_id=7, delay=timedelta(hours=2))

    again = reminder.enqueue(user_id=7, delay=timedelta(hours=5))  # moto: ConflictException
    moved = reminder.enqueue(user_id=7, delay=timedelta(hours=3), replace=True)

    assert again.already_scheduled and again == first and again.due == first.due
    assert moved.outcome is ScheduleOutcome.MOVED and moved.due == datetime(2026, 1, 1, 3, tzinfo=UTC)
    assert schedules(scheduler) == [schedule_name("reminder:7")]
    schedule = scheduler.get_schedule(Name=schedule_name("reminder:7"), GroupName=GROUP)
    assert schedule["ScheduleExpression"] == "at(2026-01-01T03:00:00)"


def test_replace_with_a_short_delay_sends_now_and_drops_the_pending_schedule(delayed_app: Any, aws: Any,
                                                                             scheduler: Any) -> None:
    reminder = declare(delayed_app())
    reminder.enqueue(user_id=7, delay=timedelta(days=3))

    message_id = reminder.enqueue(user_id=7, replace=True)

    assert not isinstance(message_id, ScheduledJob)
    assert [m["MessageId"] for m in messages_in(aws.sqs, aws.queue_url)] == [message_id]
    assert schedules(scheduler) == []


def test_unschedule_and_cancel_delete_the_pending_schedule(delayed_app: Any, scheduler: Any) -> None:
    app = delayed_app()
    reminder = declare(app)
    reminder.enqueue(user_id=7, delay=timedelta(hours=2))
    assert app.unschedule("reminder:7") is True
    assert app.unschedule("reminder:7") is False

    reminder.enqueue(user_id=8, delay=timedelta(hours=2))
    assert app.cancel("reminder:8", reason="account closed") == "not_found_but_cancelled"
    assert schedules(scheduler) == []
    assert app.status("reminder:8").state == "cancelled"


def test_an_eta_in_the_past_is_sent_now_and_a_near_one_with_delay_seconds(delayed_app: Any, aws: Any,
                                                                           scheduler: Any, clock: Any) -> None:
    reminder = declare(delayed_app())
    reminder.enqueue(user_id=1, eta=datetime(2025, 6, 1, tzinfo=UTC))
    reminder.enqueue(user_id=2, eta=datetime.fromtimestamp(clock() + 600, UTC))

    visible = [json.loads(m["Body"])["key"] for m in messages_in(aws.sqs, aws.queue_url)]
    assert visible == ["reminder:1"]  # the other is held back by SQS (DelaySeconds 600)
    assert schedules(scheduler) == []


def test_a_message_built_early_and_sent_late_is_held_back_only_what_is_left(delayed_app: Any, aws: Any,
                                                                            scheduler: Any, clock: Any) -> None:
    reminder = declare(delayed_app())
    message = reminder.message(user_id=7, delay=timedelta(hours=2))
    clock.advance(2 * 3600 - 300)

    reminder.runtime.send(message)

    assert schedules(scheduler) == []
    assert messages_in(aws.sqs, aws.queue_url) == []  # on the queue, delayed by the 300 s left


def test_enqueue_many_mixes_sqs_batches_and_schedules_in_one_report(delayed_app: Any, aws: Any,
                                                                    scheduler: Any) -> None:
    lines: list[str] = []
    reminder = declare(delayed_app(emit_metrics=lines.append))
    messages = [reminder.message(user_id=n) for n in range(12)]
    messages[3:3] = [reminder.message(user_id=100, delay=timedelta(hours=2))]
    messages += [reminder.message(user_id=101, eta=datetime(2026, 1, 5, tzinfo=UTC)),
                 reminder.message(user_id=102, delay=timedelta(days=30)),
                 reminder.message(user_id=100, delay=timedelta(hours=9))]  # the same key: already scheduled

    report = reminder.runtime.send_many(messages)

    assert report.ok and report.sent == 12 and len(report.scheduled) == 4 and report.accepted == 16
    assert sorted(report.scheduled) == [3, 13, 14, 15]
    assert [s.key for s in report.scheduled.values()] == ["reminder:100", "reminder:101", "reminder:102",
                                                          "reminder:100"]
    assert sum(s.already_scheduled for s in report.scheduled.values()) == 1
    assert sorted(report.message_ids) == [i for i in range(16) if i not in (3, 13, 14, 15)]
    # 2 SendMessageBatch + 4 CreateSchedule + 1 GetSchedule (the conflict's answer).
    assert report.calls == 7
    assert len(schedules(scheduler)) == 3
    assert len(messages_in(aws.sqs, aws.queue_url)) == 12
    emitted = [json.loads(line) for line in lines]
    assert sum(e["JobScheduled"][0] for e in emitted) == 3


def test_enqueue_many_reports_a_schedule_that_failed_and_sends_the_rest(delayed_app: Any, aws: Any,
                                                                        scheduler: Any) -> None:
    reminder = declare(delayed_app(scheduler_client=Refusing(scheduler)))
    report = reminder.runtime.send_many([reminder.message(user_id=1),
                                        reminder.message(user_id=2, delay=timedelta(hours=2))])

    assert not report.ok and report.sent == 1 and report.scheduled == {}
    (failure,) = report.failed
    assert (failure.index, failure.key, failure.code) == (1, "reminder:2", "ScheduleError")
    assert "AccessDeniedException" in failure.message


# ------------------------------------------------------------------ long retries in the worker
def test_a_retry_beyond_12_hours_is_scheduled_acknowledged_and_runs_as_the_next_attempt(
        delayed_app: Any, aws: Any, scheduler: Any, clock: Any) -> None:
    lines: list[str] = []
    app = delayed_app(emit_metrics=lines.append)
    runs: list[int] = []

    @app.job("quota", key="quota:{n}")
    def quota(n: int) -> str:
        runs.append(n)
        if len(runs) == 1:
            raise RetryableError("daily quota used up", delay=timedelta(days=2))
        return "done"

    quota.enqueue(n=1)
    first = app.process_batch(receive_event(aws.sqs, aws.queue_url))

    (d,) = first.deliveries
    assert first.failures == ()  # acknowledged: the schedule holds it now
    assert (d.state, d.outcome, d.delay) == (State.ACKED, Outcome.RETRY, 172_800)
    (name,) = schedules(scheduler)
    assert name == d.schedule_name and name.startswith("retry-")
    schedule = scheduler.get_schedule(Name=name, GroupName=GROUP)
    assert schedule["ScheduleExpression"] == "at(2026-01-03T00:00:00)"
    assert schedule["Target"]["Input"] == d.body
    assert schedule["Target"]["Arn"] == queue_arn(aws.sqs, aws.queue_url)
    status = app.status("quota:1")
    assert (status.state, status.attempts) == ("retrying", 1)
    counted = {k for line in lines for k in json.loads(line) if k.startswith("Job")}
    assert {"JobRetried", "JobScheduled", "JobFailed"} <= counted

    # Nothing fires before its time; at its time the envelope comes back as a fresh message.
    emulator = runner(aws, scheduler)
    assert emulator.tick(clock() + 172_799) == []
    clock.advance(172_800)
    (fired,) = emulator.tick(clock())
    assert fired.ok and schedules(scheduler) == []
    second = app.process_batch(receive_event(aws.sqs, aws.queue_url))

    assert [x.outcome for x in second.deliveries] == [Outcome.SUCCEEDED]
    assert runs == [1, 1]
    status = app.status("quota:1")
    assert (status.state, status.attempts) == ("succeeded", 2)  # no attempt lost, none counted twice


def test_a_redelivered_retry_finds_its_own_schedule(delayed_app: Any, aws: Any, scheduler: Any) -> None:
    # The acknowledgement was lost after the schedule was created: the same message comes back.
    app = delayed_app()

    @app.job("quota", key="quota:{n}")
    def quota(n: int) -> None:
        raise RetryableError("quota", delay=timedelta(days=2))

    body = json.loads(quota.message(n=1).body)
    arn = queue_arn(aws.sqs, aws.queue_url)
    app.process_batch(sqs_event([body], message_id="m-1", event_source_arn=arn))
    again = app.process_batch(sqs_event([body], message_id="m-1", event_source_arn=arn, attempt=2))

    assert again.failures == () and len(schedules(scheduler)) == 1


def test_a_retry_that_cannot_be_scheduled_comes_back_within_12_hours(delayed_app: Any, aws: Any,
                                                                     scheduler: Any) -> None:
    app = delayed_app(scheduler_client=Refusing(scheduler))

    @app.job("quota", key="quota:{n}")
    def quota(n: int) -> None:
        raise RetryableError("quota", delay=timedelta(days=2))

    quota.enqueue(n=1)
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))

    (d,) = result.deliveries
    assert result.failures == (d.message_id,) and d.state is State.RETURNED
    assert any("schedule failed" in note and "AccessDeniedException" in note for note in d.notes)
    assert app.status("quota:1").attempts == 1
    assert schedules(scheduler) == []


def test_without_a_schedule_group_a_long_retry_waits_the_longest_sqs_allows(make_app: Any, aws: Any) -> None:
    app = make_app()
    visibility: list[int] = []
    real = aws.sqs.change_message_visibility_batch

    def spy(**kwargs: Any) -> Any:
        visibility.extend(e["VisibilityTimeout"] for e in kwargs["Entries"])
        return real(**kwargs)

    aws.sqs.change_message_visibility_batch = spy

    @app.job("quota", key="quota:{n}")
    def quota(n: int) -> None:
        raise RetryableError("quota", delay=timedelta(days=2))

    quota.enqueue(n=1)
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))

    assert len(result.failures) == 1 and visibility == [43_200]


def test_at_the_backstop_a_retry_beyond_900_s_is_scheduled_not_resent_with_900(delayed_app: Any, aws: Any,
                                                                              scheduler: Any) -> None:
    app = delayed_app()

    @app.job("slow-upstream", key="slow:{n}")
    def slow(n: int) -> None:
        raise RetryableError("upstream asks for an hour", delay=3600)

    body = json.loads(slow.message(n=1).body)
    arn = queue_arn(aws.sqs, aws.queue_url)
    result = app.process_batch(sqs_event([body], event_source_arn=arn, attempt=MAX_ATTEMPTS + 1))

    (d,) = result.deliveries
    assert result.failures == () and d.state is State.ACKED and d.schedule_name is not None
    schedule = scheduler.get_schedule(Name=d.schedule_name, GroupName=GROUP)
    assert schedule["ScheduleExpression"] == "at(2026-01-01T01:00:00)"
    assert messages_in(aws.sqs, aws.queue_url) == []  # not re-sent with SQS's 900 s


# ------------------------------------------------------------------ operators
def test_status_counts_the_delayed_jobs_and_names_the_next_due(delayed_app: Any, aws: Any, scheduler: Any) -> None:
    reminder = declare(delayed_app())
    reminder.enqueue(user_id=1, delay=timedelta(days=2))
    reminder.enqueue(user_id=2, delay=timedelta(hours=3))
    reminder.enqueue(user_id=3, delay=timedelta(days=9))

    report = collect_status(sqs_client=aws.sqs, queue=aws.queue_url, scheduler_client=scheduler,
                            schedule_group=GROUP)
    sampled = collect_status(sqs_client=aws.sqs, queue=aws.queue_url, scheduler_client=scheduler,
                             schedule_group=GROUP, schedule_sample=1)

    assert report.delayed is not None and report.delayed.count == 3 and report.delayed.complete
    assert report.delayed.next_due == datetime(2026, 1, 1, 3, tzinfo=UTC)
    assert report.delayed.sampled[0].key == "reminder:2"
    assert report.to_dict()["delayed"]["next_due"] == "2026-01-01T03:00:00+00:00"
    assert sampled.delayed is not None and not sampled.delayed.complete
    assert any("from 1 of 3 schedules" in note for note in sampled.notes)


def test_the_unschedule_command_deletes_and_exits_3_when_nothing_is_pending(delayed_app: Any,
                                                                             scheduler: Any) -> None:
    declare(delayed_app()).enqueue(user_id=7, delay=timedelta(hours=2))
    cli = CliRunner()

    done = cli.invoke(build_app(), ["unschedule", "reminder:7", "--schedule-group", GROUP])
    again = cli.invoke(build_app(), ["unschedule", "reminder:7", "--schedule-group", GROUP])
    nowhere = cli.invoke(build_app(), ["unschedule", "reminder:7"])

    assert done.exit_code == 0 and "unscheduled" in done.stdout
    assert again.exit_code == 3 and "no delayed job pending" in again.stdout
    assert nowhere.exit_code == 2 and "--schedule-group" in nowhere.stdout


def test_the_job_command_shows_a_delayed_job_with_no_record_as_scheduled_with_its_due_time(
        delayed_app: Any, aws: Any, scheduler: Any) -> None:
    declare(delayed_app()).enqueue(user_id=9, delay=timedelta(hours=2))
    cli = CliRunner()

    shown = cli.invoke(build_app(), ["job", "reminder:9", "--table", aws.table, "--schedule-group", GROUP],
                       env={"COLUMNS": "200"})
    as_json = cli.invoke(build_app(), ["job", "reminder:9", "--json", "--table", aws.table,
                                       "--schedule-group", GROUP])
    without_group = cli.invoke(build_app(), ["job", "reminder:9", "--table", aws.table],
                               env={"SQSJOBS_SCHEDULE_GROUP": ""})
    other_key = cli.invoke(build_app(), ["job", "reminder:10", "--table", aws.table, "--schedule-group", GROUP])

    assert shown.exit_code == 0, shown.output
    assert "scheduled" in shown.stdout and "2026-01-01T02:00:00+00:00" in shown.stdout and "reminder" in shown.stdout
    assert json.loads(as_json.stdout) == {
        "key": "reminder:9", "job": "reminder", "state": "scheduled", "due_at": "2026-01-01T02:00:00+00:00",
        "schedule": schedule_name("reminder:9"), "schedule_group": GROUP,
        "schedule_arn": scheduler.get_schedule(Name=schedule_name("reminder:9"), GroupName=GROUP)["Arn"]}
    assert without_group.exit_code == 3 and "--schedule-group" in without_group.stdout
    assert other_key.exit_code == 3 and "no record for 'reminder:10'" in other_key.stdout


def test_the_cancel_command_given_the_group_deletes_the_pending_schedule(delayed_app: Any, aws: Any,
                                                                         scheduler: Any) -> None:
    declare(delayed_app()).enqueue(user_id=8, delay=timedelta(hours=2))

    cancelled = CliRunner().invoke(build_app(), ["cancel", "reminder:8", "--table", aws.table,
                                                 "--schedule-group", GROUP])

    assert cancelled.exit_code == 0, cancelled.output
    assert "not_found_but_cancelled" in cancelled.stdout
    assert schedules(scheduler) == []


# ------------------------------------------------------------------ the local cloud's emulator
def test_the_emulator_fires_at_its_time_and_dead_letters_what_the_queue_refuses(aws: Any, scheduler: Any,
                                                                                clock: Any) -> None:
    schedules_api = OneTimeSchedules(group=GROUP, clock=clock, client=scheduler, role_arn=ROLE,
                                     dead_letter_url=aws.dlq_url)
    emulator = runner(aws, scheduler)
    gone = aws.sqs.create_queue(QueueName="gone")["QueueUrl"]
    from sqsjobs.schedules._one_time import DelayedMessage

    for name, url in (("job-a", aws.queue_url), ("job-b", gone)):
        schedules_api.create(DelayedMessage(name=name, job="j", key=name, body=f'{{"to": "{name}"}}',
                                            due_at=clock() + 3600, queue_arn=queue_arn(aws.sqs, url)))
    aws.sqs.delete_queue(QueueUrl=gone)

    assert emulator.tick(clock() + 3599) == []
    fired = {f.name: f for f in emulator.tick(clock() + 3600)}

    assert fired["job-a"].ok and not fired["job-b"].ok
    assert [m["Body"] for m in messages_in(aws.sqs, aws.queue_url)] == ['{"to": "job-a"}']
    (letter,) = messages_in(aws.sqs, aws.dlq_url)
    assert letter["Body"] == '{"to": "job-b"}'
    assert letter["MessageAttributes"]["SCHEDULE_ARN"]["StringValue"].endswith("/job-b")
    assert schedules(scheduler) == []  # ActionAfterCompletion DELETE, fired or failed
