"""Delays and ETAs without AWS: the arithmetic, the names, the enqueue API, and Scheduler's requests (Stubber)."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import boto3
import pytest
from botocore.stub import ANY, Stubber

from sqsjobs import ConfigurationError, InvalidArgumentsError, JobApp, RetryableError
from sqsjobs._errors import MAX_RETRY_DELAY_SECONDS, InvalidDelayError, ScheduleError
from sqsjobs.enqueue._delays import (
    MAX_DELAY_SECONDS,
    DelayPlan,
    at_expression,
    due_of,
    plan_delay,
    remaining_delay,
    retry_schedule_name,
    schedule_name,
)
from sqsjobs.schedules._one_time import DelayedMessage, OneTimeSchedules, ScheduleOutcome
from sqsjobs.worker._delivery import Delivery, IllegalTransition, Outcome, State

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z
QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"
DLQ = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq"
ROLE = "arn:aws:iam::123456789012:role/delivery"
GROUP = "jobs-delayed"
SCHEDULE_NAME = re.compile(r"^[0-9a-zA-Z\-_.]{1,64}$")


# ------------------------------------------------------------------ the arithmetic
def test_a_delay_up_to_900_s_is_sqs_delay_seconds_floored() -> None:
    assert plan_delay("j", delay=900, eta=None, now=NOW) == DelayPlan(delay_seconds=900, due_at=None)
    assert plan_delay("j", delay=2.9, eta=None, now=NOW) == DelayPlan(delay_seconds=2, due_at=None)
    assert plan_delay("j", delay=timedelta(minutes=15), eta=None, now=NOW).due_at is None


def test_a_longer_delay_is_due_at_an_absolute_time() -> None:
    assert plan_delay("j", delay=900.5, eta=None, now=NOW) == DelayPlan(delay_seconds=0, due_at=NOW + 900.5)
    assert plan_delay("j", delay=timedelta(days=365), eta=None, now=NOW).due_at == NOW + MAX_DELAY_SECONDS


def test_an_eta_is_never_early_and_a_past_eta_means_now() -> None:
    soon = datetime.fromtimestamp(NOW + 299.2, UTC)
    assert plan_delay("j", delay=0, eta=soon, now=NOW) == DelayPlan(delay_seconds=300, due_at=None)
    assert plan_delay("j", delay=0, eta=datetime(2020, 1, 1, tzinfo=UTC), now=NOW) == DelayPlan(0, None)
    # Any time zone: the instant counts.
    paris = datetime(2026, 1, 1, 3, 0, tzinfo=timezone(timedelta(hours=1)))
    assert plan_delay("j", delay=0, eta=paris, now=NOW).due_at == NOW + 2 * 3600


@pytest.mark.parametrize(("delay", "eta", "says"), [
    (-1, None, "is negative"),
    (timedelta(seconds=-5), None, "is negative"),
    (MAX_DELAY_SECONDS + 1, None, "more than 365 days"),
    (True, None, "not a number of seconds"),
    ("60", None, "not a number of seconds"),
    (float("nan"), None, "not a number of seconds"),
    (0, datetime(2026, 1, 2), "has no time zone"),
    (0, "2026-01-02T00:00:00Z", "is not a datetime"),
    (0, datetime(2027, 1, 2, tzinfo=UTC), "more than 365 days ahead"),
    (60, datetime(2026, 1, 2, tzinfo=UTC), "not both"),
])
def test_an_impossible_wait_is_refused_with_what_to_do(delay: Any, eta: Any, says: str) -> None:
    with pytest.raises(InvalidDelayError, match=says) as caught:
        plan_delay("reminder", delay=delay, eta=eta, now=NOW)
    assert "job 'reminder'" in str(caught.value)
    assert isinstance(caught.value, InvalidArgumentsError) and isinstance(caught.value, ConfigurationError)


def test_a_message_built_earlier_takes_the_delay_it_has_left() -> None:
    assert remaining_delay(NOW + 7200, NOW) is None
    assert remaining_delay(NOW + 7200, NOW + 6600.4) == 600
    assert remaining_delay(NOW + 7200, NOW + 9000) == 0


def test_the_at_expression_is_utc_and_rounded_up() -> None:
    assert at_expression(NOW + 7200) == "at(2026-01-01T02:00:00)"
    assert at_expression(NOW + 7200.001) == "at(2026-01-01T02:00:01)"
    assert due_of(at_expression(NOW + 7200)) == datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert due_of("at(2026-01-01T03:00:00)", "Europe/Paris") == datetime(2026, 1, 1, 2, tzinfo=UTC)
    assert due_of("cron(0 2 * * ? *)") is None


@pytest.mark.parametrize("key", ["invoice-email:42", "k" * 2048, "clé:é€🙂", "a b/c#d", "x"])
def test_schedule_names_are_valid_for_scheduler_whatever_the_key(key: str) -> None:
    for name in (schedule_name(key), retry_schedule_name(key, "5fea7756-0ea4-451a-a703-a558b933e274")):
        assert SCHEDULE_NAME.fullmatch(name), name
    assert schedule_name(key) == schedule_name(key)
    assert key not in schedule_name(key) or len(key) == 1


def test_names_differ_by_key_and_a_retry_by_delivery() -> None:
    assert schedule_name("invoice-email:42") != schedule_name("invoice-email:43")
    assert retry_schedule_name("k:1", "m-1") != retry_schedule_name("k:1", "m-2")
    assert retry_schedule_name("k:1", "m-1").startswith("retry-" + schedule_name("k:1").removeprefix("job-"))


def test_retryable_error_takes_up_to_365_days_as_seconds_or_timedelta() -> None:
    assert MAX_RETRY_DELAY_SECONDS == MAX_DELAY_SECONDS
    assert RetryableError("quota", delay=timedelta(days=2)).delay == 172_800.0
    assert RetryableError("quota", delay=50_000).delay == 50_000.0
    for bad in (-1, MAX_DELAY_SECONDS + 1, True, float("nan")):
        with pytest.raises(ConfigurationError, match=r"0\.\.31536000 s"):
            RetryableError("x", delay=bad)


# ------------------------------------------------------------------ the enqueue API
def app(**settings: Any) -> JobApp:
    options: dict[str, Any] = {"queue_url": QUEUE, "clock": lambda: NOW}
    options.update(settings)
    return JobApp(**options)


def declare(job_app: JobApp, **options: Any) -> Any:
    @job_app.job("reminder", key="reminder:{user_id}", **options)
    def reminder(user_id: int) -> None: ...

    return reminder


def test_message_carries_when_it_is_due_and_whether_it_replaces() -> None:
    reminder = declare(app())
    later = reminder.message(user_id=7, delay=timedelta(hours=2), replace=True)
    assert (later.delay, later.due_at, later.replace) == (0, NOW + 7200, True)
    at = reminder.message(user_id=7, eta=datetime(2026, 1, 3, tzinfo=UTC))
    assert (at.delay, at.due_at, at.replace) == (0, NOW + 2 * 86400, False)
    assert json.loads(at.body)["enqueued_at"] == NOW


def test_a_job_that_would_expire_before_it_is_due_is_refused() -> None:
    reminder = declare(app())
    with pytest.raises(InvalidDelayError, match="would never run"):
        reminder.message(user_id=7, delay=timedelta(hours=2), expires_in=3600)
    expiring = declare(app(), expires_in=600)
    with pytest.raises(InvalidDelayError, match="due in 900 s but expires 600 s"):
        expiring.message(user_id=7, delay=900)
    assert reminder.message(user_id=7, delay=timedelta(hours=2), expires_in=7201).due_at == NOW + 7200


def test_replace_must_be_a_bool() -> None:
    with pytest.raises(InvalidArgumentsError, match="replace must be True or False"):
        declare(app()).message(user_id=7, replace="yes")


@pytest.mark.parametrize("parameter", ["eta", "replace"])
def test_a_job_parameter_may_not_shadow_the_new_enqueue_options(parameter: str) -> None:
    job_app = app()
    source = f"def fn({parameter}: int) -> None: ..."
    namespace: dict[str, Any] = {}
    exec(source, namespace)  # a function with that parameter name
    with pytest.raises(ConfigurationError, match="clash with enqueue options"):
        job_app.job("clash")(namespace["fn"])


def test_a_long_delay_without_a_schedule_group_names_every_missing_setting_and_sends_nothing() -> None:
    sqs = boto3.client("sqs", region_name="eu-west-1")
    with Stubber(sqs) as stub:  # no response queued: any SQS call would fail the test
        reminder = declare(app(sqs_client=sqs))
        with pytest.raises(ConfigurationError) as caught:
            reminder.enqueue(user_id=7, delay=timedelta(hours=2))
        stub.assert_no_pending_responses()
    message = str(caught.value)
    for name in ("SQSJOBS_SCHEDULE_GROUP", "SQSJOBS_SCHEDULER_ROLE_ARN", "SQSJOBS_DLQ_URL", "schedule_group="):
        assert name in message
    assert "nothing was sent" in message and "'reminder:7'" in message


def test_a_long_delay_with_only_the_group_names_the_rest() -> None:
    reminder = declare(app(schedule_group=GROUP, dlq_url=DLQ))
    with pytest.raises(ConfigurationError, match="missing: scheduler_role_arn") as caught:
        reminder.enqueue(user_id=7, delay=timedelta(hours=2))
    assert "SQSJOBS_SCHEDULE_GROUP" not in str(caught.value)


# ------------------------------------------------------------------ Scheduler's requests (Stubber)
def scheduler() -> Any:
    return boto3.client("scheduler", region_name="eu-west-1")


def expected_request(name: str, *, fifo_group: str | None = None, dead_letter: bool = True,
                     queue: str = "arn:aws:sqs:eu-west-1:123456789012:jobs") -> dict[str, Any]:
    target: dict[str, Any] = {"Arn": queue, "RoleArn": ROLE, "Input": ANY,
                              "RetryPolicy": {"MaximumEventAgeInSeconds": 86400, "MaximumRetryAttempts": 185}}
    if dead_letter:
        target["DeadLetterConfig"] = {"Arn": "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq"}
    if fifo_group is not None:
        target["SqsParameters"] = {"MessageGroupId": fifo_group}
    return {"Name": name, "GroupName": GROUP, "ScheduleExpression": "at(2026-01-01T02:00:00)",
            "ScheduleExpressionTimezone": "UTC", "FlexibleTimeWindow": {"Mode": "OFF"},
            "ActionAfterCompletion": "DELETE", "State": "ENABLED", "Description": ANY, "Target": target}


def arn_of(name: str) -> str:
    return f"arn:aws:scheduler:eu-west-1:123456789012:schedule/{GROUP}/{name}"


def configured(client: Any, **settings: Any) -> JobApp:
    options: dict[str, Any] = {"schedule_group": GROUP, "scheduler_role_arn": ROLE, "dlq_url": DLQ,
                               "scheduler_client": client, "emit_metrics": lambda line: None}
    return app(**{**options, **settings})


def test_enqueue_creates_the_one_time_schedule_the_issue_describes() -> None:
    client, lines = scheduler(), []
    reminder = declare(configured(client, emit_metrics=lines.append))
    name = schedule_name("reminder:7")
    with Stubber(client) as stub:
        stub.add_response("create_schedule", {"ScheduleArn": arn_of(name)}, expected_request(name))
        result = reminder.enqueue(user_id=7, delay=timedelta(hours=2))
        stub.assert_no_pending_responses()
    assert result == arn_of(name) and isinstance(result, str)
    assert (result.outcome, result.key, result.due) == (ScheduleOutcome.SCHEDULED, "reminder:7",
                                                        datetime(2026, 1, 1, 2, tzinfo=UTC))
    assert result.describe() == "reminder:7 scheduled for 2026-01-01T02:00:00Z"
    (line,) = lines
    emf = json.loads(line)
    assert emf["JobScheduled"] == [1.0] and emf["Job"] == "reminder"


def test_the_schedule_input_is_the_full_envelope() -> None:
    client = scheduler()
    reminder = declare(configured(client))
    message = reminder.message(user_id=7, delay=timedelta(hours=2))
    request = expected_request(schedule_name("reminder:7"))
    request["Target"]["Input"] = message.body
    with Stubber(client) as stub:
        stub.add_response("create_schedule", {"ScheduleArn": "a" * 20}, request)
        reminder.runtime.send(message)
    assert json.loads(message.body)["key"] == "reminder:7"


def test_a_pending_key_is_already_scheduled_and_nothing_changes() -> None:
    client, lines = scheduler(), []
    reminder = declare(configured(client, emit_metrics=lines.append))
    name = schedule_name("reminder:7")
    with Stubber(client) as stub:
        stub.add_client_error("create_schedule", "ConflictException", "Schedule already exists.", 409)
        stub.add_response("get_schedule", {
            "Arn": arn_of(name), "Name": name, "ScheduleExpression": "at(2026-01-01T05:00:00)",
            "ScheduleExpressionTimezone": "UTC", "Target": {"Arn": "q", "RoleArn": ROLE, "Input": "{}"}},
            {"Name": name, "GroupName": GROUP})
        result = reminder.enqueue(user_id=7, delay=timedelta(hours=2))
        stub.assert_no_pending_responses()
    assert result.already_scheduled and result.due == datetime(2026, 1, 1, 5, tzinfo=UTC)
    assert result.describe() == "reminder:7 already scheduled for 2026-01-01T05:00:00Z"
    assert lines == []  # nothing was scheduled: no JobScheduled


def test_replace_moves_a_pending_schedule_in_one_update() -> None:
    client = scheduler()
    reminder = declare(configured(client))
    name = schedule_name("reminder:7")
    with Stubber(client) as stub:
        stub.add_client_error("create_schedule", "ConflictException", "exists", 409)
        # UpdateSchedule replaces every field: the same request as the create, at the new time.
        stub.add_response("update_schedule", {"ScheduleArn": arn_of(name)}, expected_request(name))
        result = reminder.enqueue(user_id=7, delay=timedelta(hours=2), replace=True)
        stub.assert_no_pending_responses()
    assert result.outcome is ScheduleOutcome.MOVED


def test_a_conflict_with_a_schedule_that_already_fired_creates_it_again() -> None:
    client = scheduler()
    reminder = declare(configured(client))
    name = schedule_name("reminder:7")
    with Stubber(client) as stub:
        stub.add_client_error("create_schedule", "ConflictException", "exists", 409)
        stub.add_response("get_schedule", {"Arn": arn_of(name), "Name": name,
                                           "ScheduleExpression": "at(2025-12-31T23:59:00)"})
        stub.add_response("delete_schedule", {}, {"Name": name, "GroupName": GROUP})
        stub.add_response("create_schedule", {"ScheduleArn": arn_of(name)}, expected_request(name))
        result = reminder.enqueue(user_id=7, delay=timedelta(hours=2))
        stub.assert_no_pending_responses()
    assert result.outcome is ScheduleOutcome.SCHEDULED


def test_a_refusal_is_a_schedule_error_that_says_which_permission() -> None:
    client = scheduler()
    reminder = declare(configured(client))
    with Stubber(client) as stub:
        stub.add_client_error("create_schedule", "AccessDeniedException", "not authorized", 400)
        with pytest.raises(ScheduleError, match=r"AccessDeniedException.*iam:PassRole.*E9108"):
            reminder.enqueue(user_id=7, delay=timedelta(hours=2))


def test_fifo_schedules_carry_the_message_group_and_no_fifo_dlq() -> None:
    client = scheduler()
    fifo = configured(client, queue_url=QUEUE + ".fifo", dlq_url=DLQ + ".fifo")

    @fifo.job("sync", key="sync:{account_id}", group="{account_id}")
    def sync(account_id: int) -> None: ...

    name = schedule_name("sync:9")
    with Stubber(client) as stub:
        stub.add_response("create_schedule", {"ScheduleArn": arn_of(name)}, expected_request(
            name, fifo_group="9", dead_letter=False, queue="arn:aws:sqs:eu-west-1:123456789012:jobs.fifo"))
        sync.enqueue(account_id=9, delay=timedelta(hours=2))
        stub.assert_no_pending_responses()


def test_unschedule_deletes_the_keys_schedule_and_says_whether_one_was_pending() -> None:
    client = scheduler()
    job_app = configured(client)
    name = schedule_name("reminder:7")
    with Stubber(client) as stub:
        stub.add_response("delete_schedule", {}, {"Name": name, "GroupName": GROUP})
        stub.add_client_error("delete_schedule", "ResourceNotFoundException", "gone", 404)
        assert job_app.unschedule("reminder:7") is True
        assert job_app.unschedule("reminder:7") is False
    with pytest.raises(InvalidArgumentsError, match="reserved prefix"):
        job_app.unschedule("lock#nightly:2026-01-01")


def test_a_scheduler_client_error_is_never_raised_raw() -> None:
    schedules = OneTimeSchedules(group=GROUP, clock=lambda: NOW, client=scheduler())
    with Stubber(schedules.client) as stub:
        stub.add_client_error("get_schedule", "ThrottlingException", "slow down", 400)
        with pytest.raises(ScheduleError, match="ThrottlingException: slow down"):
            schedules.get("job-1")
    with pytest.raises(ConfigurationError, match="missing: scheduler_role_arn"):
        schedules.create(DelayedMessage(name="job-1", job="j", key="k", body="{}", due_at=NOW + 7200,
                                        queue_arn="arn:aws:sqs:eu-west-1:1:q"))


# ------------------------------------------------------------------ the delivery state
def delivery() -> Delivery:
    return Delivery.parse({"messageId": "m-1", "receiptHandle": "r", "body": "{}"}, 0)


def test_a_retry_too_long_for_sqs_moves_to_schedule_then_leaves_or_returns() -> None:
    from sqsjobs.worker._decision import Action, Decision

    scheduled, failed = delivery(), delivery()
    for d in (scheduled, failed):
        d._move(State.DECODED)
        d._move(State.CLAIMED)
        d.decided(Decision(action=Action.SCHEDULE, outcome=Outcome.RETRY, delay=172_800, ran=True))
        d.to_schedule("retry-abc")
    scheduled.finished()
    failed.finished(sent=False, why="AccessDenied")
    assert (scheduled.state, scheduled.schedule_name, scheduled.acknowledged) == (State.ACKED, "retry-abc", True)
    assert failed.state is State.RETURNED and failed.notes == ["schedule failed: AccessDenied"]


def test_only_a_record_going_back_may_be_scheduled() -> None:
    d = delivery()
    with pytest.raises(IllegalTransition, match="received is not a delivery to schedule"):
        d.to_schedule("retry-abc")


@pytest.mark.parametrize(("settings", "says"), [
    ({"schedule_group": "my group"}, "must be an EventBridge Scheduler group name"),
    ({"schedule_group": "g" * 65}, "must be an EventBridge Scheduler group name"),
    ({"scheduler_role_arn": "SchedulerDeliveryRole"}, "must be an IAM role ARN"),
])
def test_scheduler_settings_are_checked_when_the_app_is_built(settings: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigurationError, match=says):
        JobApp(queue_url=QUEUE, **settings)  # type: ignore[arg-type]
    env = {"SQSJOBS_SCHEDULE_GROUP": settings.get("schedule_group", GROUP),
           "SQSJOBS_SCHEDULER_ROLE_ARN": settings.get("scheduler_role_arn", ROLE)}
    with pytest.raises(ConfigurationError, match=says):
        JobApp(environ=env)
