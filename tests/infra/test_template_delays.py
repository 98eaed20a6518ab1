"""The template's delayed-jobs wiring: a schedule group, a delivery role Scheduler alone assumes, narrow grants."""

from __future__ import annotations

from typing import Any

import pytest
from template_support import load_template, policy_statements

SCHEDULING_FUNCTIONS = ("WorkerFunction", "SchedulerFunction")


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def statements(template: dict[str, Any], function: str) -> dict[str, dict[str, Any]]:
    policies = template["Resources"][function]["Properties"]["Policies"]
    return {s["Sid"]: s for policy in policies for s in policy_statements(policy)}


def test_there_is_a_schedule_group_named_by_cloudformation(template: dict[str, Any]) -> None:
    group = template["Resources"]["DelayedJobsScheduleGroup"]
    assert group["Type"] == "AWS::Scheduler::ScheduleGroup"
    assert "Name" not in group.get("Properties", {})  # stack names may be longer than a group name


def test_only_this_accounts_scheduler_group_may_assume_the_delivery_role(template: dict[str, Any]) -> None:
    role = template["Resources"]["SchedulerDeliveryRole"]["Properties"]
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    assert trust["Principal"] == {"Service": "scheduler.amazonaws.com"} and trust["Action"] == "sts:AssumeRole"
    assert trust["Condition"]["StringEquals"] == {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}
    assert "schedule-group/${DelayedJobsScheduleGroup}" in trust["Condition"]["ArnEquals"]["aws:SourceArn"]["Fn::Sub"]


def test_the_delivery_role_may_only_send_to_the_jobs_queues_and_their_dlq(template: dict[str, Any]) -> None:
    (policy,) = template["Resources"]["SchedulerDeliveryRole"]["Properties"]["Policies"]
    (statement,) = policy["PolicyDocument"]["Statement"]
    assert statement["Action"] == "sqs:SendMessage"
    # A delayed job's schedule targets its job's own queue: the jobs queue or the critical queue.
    assert statement["Resource"] == [{"Fn::GetAtt": ["JobsQueue", "Arn"]}, {"Fn::GetAtt": ["CriticalQueue", "Arn"]},
                                     {"Fn::GetAtt": ["DeadLetterQueue", "Arn"]}]


@pytest.mark.parametrize("function", SCHEDULING_FUNCTIONS)
def test_functions_that_schedule_get_the_group_the_role_and_nothing_wider(template: dict[str, Any],
                                                                         function: str) -> None:
    env = template["Resources"][function]["Properties"]["Environment"]["Variables"]
    assert env["SQSJOBS_SCHEDULE_GROUP"] == {"Ref": "DelayedJobsScheduleGroup"}
    assert env["SQSJOBS_SCHEDULER_ROLE_ARN"] == {"Fn::GetAtt": ["SchedulerDeliveryRole", "Arn"]}
    assert env["SQSJOBS_DLQ_URL"] == {"Ref": "DeadLetterQueue"}  # a schedule's failed sends go there
    granted = statements(template, function)
    schedules = granted["DelayedJobSchedules"]
    assert sorted(schedules["Action"]) == ["scheduler:CreateSchedule", "scheduler:DeleteSchedule",
                                           "scheduler:GetSchedule", "scheduler:UpdateSchedule"]
    assert schedules["Resource"]["Fn::Sub"].endswith(":schedule/${DelayedJobsScheduleGroup}/*")
    pass_role = granted["PassSchedulerDeliveryRole"]
    assert pass_role["Action"] == "iam:PassRole"
    assert pass_role["Resource"] == {"Fn::GetAtt": ["SchedulerDeliveryRole", "Arn"]}
    assert pass_role["Condition"] == {"StringEquals": {"iam:PassedToService": "scheduler.amazonaws.com"}}


def test_functions_that_never_schedule_get_no_scheduler_rights(template: dict[str, Any]) -> None:
    for name, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function" or name in SCHEDULING_FUNCTIONS:
            continue
        assert "SQSJOBS_SCHEDULE_GROUP" not in resource["Properties"].get("Environment", {}).get("Variables", {})
        assert not any(a.startswith(("scheduler:", "iam:")) for s in statements(template, name).values()
                       for a in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])), name
