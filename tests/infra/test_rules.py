"""Each sqsjobs cfn-lint rule: a good template passes, at least two bad ones fail with a fix.

The rules run inside cfn-lint (its API, our rules appended), on a SAM template
(events, Globals) and on plain CloudFormation (event source mappings).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from cfnlint.api import lint as cfn_lint
from template_support import (
    DELETE,
    _rules,
    cfn_template,
    dlq_alarm,
    get_att,
    ids,
    lint,
    load_template,
    mutate,
    sam_template,
)


def test_good_templates_pass_every_rule() -> None:
    assert lint(sam_template()) == []
    assert lint(cfn_template()) == []


@pytest.mark.slow
def test_the_shipped_template_passes_cfn_lint_and_every_rule() -> None:
    assert lint(load_template(), ours_only=False) == []


# ------------------------------------------------------------------ E9101 / W9101
def test_visibility_equal_to_timeout_is_an_error_naming_queue_function_and_fix() -> None:
    found = lint(mutate(sam_template(), "Resources/Jobs/Properties/VisibilityTimeout", 60))
    assert ids(found) == ["E9101", "W9101"]
    message = dict(found)["E9101"]
    assert "Jobs" in message and "Worker" in message
    assert "60 s + batching window 1 s + margin 30 s = 91 s" in message
    assert "Fix: set Jobs.VisibilityTimeout to at least 91" in message


def test_visibility_below_timeout_plus_window_in_plain_cloudformation() -> None:
    # 90 s timeout + 5 s window + 30 s margin = 125 s > 120 s.
    found = lint(mutate(cfn_template(), "Resources/Jobs/Properties/VisibilityTimeout", 120))
    assert "E9101" in ids(found)
    assert "at least 125" in dict(found)["E9101"]


def test_default_visibility_is_thirty_seconds() -> None:
    found = lint(mutate(sam_template(), "Resources/Jobs/Properties/VisibilityTimeout", DELETE))
    assert "VisibilityTimeout 30 s" in dict(found)["E9101"]


def test_visibility_check_resolves_parameter_values_given_to_sqsjobs_check() -> None:
    # The timeout comes from Globals -> Ref WorkerTimeout; 340 s needs 371 s > 360 s.
    assert "E9101" in ids(lint(sam_template(), parameters={"WorkerTimeout": "340"}))
    assert lint(sam_template(), parameters={"WorkerTimeout": "30"}) == []


@pytest.mark.slow
def test_margin_comes_from_the_rule_option_or_the_templates_own_parameter() -> None:
    tight = mutate(sam_template(), "Resources/Jobs/Properties/VisibilityTimeout", 100)  # 60 + 1 + 30 = 91
    assert ids(lint(tight)) == ["W9101"]
    assert "E9101" in ids(lint(tight, configure={"E9101": {"margin": 60}}))
    declared = mutate(tight, "Parameters/VisibilityMarginSeconds", {"Type": "Number", "Default": 45})
    assert "margin 45 s" in dict(lint(declared))["E9101"]


def test_visibility_below_six_times_timeout_is_only_a_warning() -> None:
    found = lint(mutate(sam_template(), "Resources/Jobs/Properties/VisibilityTimeout", 200))
    assert ids(found) == ["W9101"]
    assert "recommended 6 x Worker's Timeout 60 s = 360 s" in found[0][1]


def test_unresolvable_values_are_skipped_not_guessed() -> None:
    template = mutate(sam_template(), "Resources/Jobs/Properties/VisibilityTimeout", {"Fn::If": ["Cond", 10, 600]})
    template["Conditions"] = {"Cond": {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}}
    assert "E9101" not in ids(lint(template))


# ------------------------------------------------------------------ E9102 / E9103 / W9103
def test_queue_without_redrive_policy_is_an_error_with_the_fix() -> None:
    found = lint(mutate(sam_template(), "Resources/Jobs/Properties/RedrivePolicy", DELETE))
    assert "E9102" in ids(found)
    message = dict(found)["E9102"]
    assert message.startswith("Jobs feeds Worker but has no RedrivePolicy")
    assert "Fix:" in message and "maxReceiveCount: <the function's SQSJOBS_MAX_ATTEMPTS + 1>" in message


def test_plain_event_source_mapping_queue_without_dlq_is_an_error() -> None:
    template = mutate(cfn_template(), "Resources/Jobs/Properties/RedrivePolicy", DELETE)
    assert "E9102" in ids(lint(template))


def test_redrive_policy_without_target_is_an_error() -> None:
    template = mutate(sam_template(), "Resources/Jobs/Properties/RedrivePolicy", {"maxReceiveCount": 5})
    assert "E9102" in ids(lint(template))


def test_max_receive_count_must_be_the_functions_max_attempts_plus_one() -> None:
    literal = mutate(sam_template(), "Resources/Jobs/Properties/RedrivePolicy/maxReceiveCount", 7)
    found = lint(literal)
    assert ids(found) == ["E9103"]
    message = found[0][1]
    assert "Jobs's maxReceiveCount (7) must be SQSJOBS_MAX_ATTEMPTS (5, given to Worker) + 1" in message
    # It says why: the worker dead-letters with `lost`, SQS's redrive is the backstop.
    assert "reason `lost`" in message and "only the backstop" in message
    assert "Fix:" in message and "!FindInMap [ReceivesPerMaxAttempts, !Ref MaxAttempts, MaxReceiveCount]" in message
    # Plain CloudFormation, literal on both sides: 7 is right for "6", wrong for "7".
    env = "Resources/Worker/Properties/Environment/Variables/SQSJOBS_MAX_ATTEMPTS"
    assert "E9103" in ids(lint(mutate(cfn_template(), env, "7")))
    # Equal numbers written differently are fine.
    assert lint(mutate(cfn_template(), env, 6)) == []


def test_the_old_wiring_one_parameter_for_both_is_now_an_error() -> None:
    # maxReceiveCount == SQSJOBS_MAX_ATTEMPTS: SQS would move the last attempt without a reason.
    same = mutate(sam_template(), "Resources/Jobs/Properties/RedrivePolicy/maxReceiveCount", {"Ref": "MaxAttempts"})
    assert ids(lint(same)) == ["E9103"]
    # Even when the value is unknown, one expression on both sides cannot be one apart.
    unknown = mutate(same, "Parameters/MaxAttempts", {"Type": "Number"})
    assert "E9103" in ids(lint(unknown))
    assert "must be SQSJOBS_MAX_ATTEMPTS (unknown" in dict(lint(unknown))["E9103"]


@pytest.mark.slow
def test_max_receive_count_from_the_mapping_follows_parameter_overrides() -> None:
    for attempts in ("5", "7", "10"):
        assert lint(sam_template(), parameters={"MaxAttempts": attempts}) == []
    # A row that says MaxAttempts + 2 is caught.
    off = mutate(sam_template(), "Mappings/Receives/7/Count", 9)
    assert ids(lint(off, parameters={"MaxAttempts": "7"})) == ["E9103"]


def test_max_attempts_from_globals_environment_counts() -> None:
    template = mutate(sam_template(), "Resources/Worker/Properties/Environment", DELETE)
    template["Globals"]["Function"]["Environment"] = {"Variables": {"SQSJOBS_MAX_ATTEMPTS": "3"}}
    assert "E9103" in ids(lint(template))


def test_few_attempts_is_a_warning() -> None:
    found = lint(sam_template(), parameters={"MaxAttempts": "3"})
    assert ids(found) == ["W9103"]
    assert "Worker runs 3 attempts (SQSJOBS_MAX_ATTEMPTS)" in found[0][1]
    # Without SQSJOBS_MAX_ATTEMPTS the queue's maxReceiveCount is the number of attempts.
    cfn = mutate(cfn_template(), "Resources/Jobs/Properties/RedrivePolicy/maxReceiveCount", 2)
    cfn = mutate(cfn, "Resources/Worker/Properties/Environment", DELETE)
    found = lint(cfn)
    assert ids(found) == ["W9103"]
    assert "Jobs's maxReceiveCount is 2" in found[0][1]


# ------------------------------------------------------------------ E9104
def test_sam_event_without_report_batch_item_failures_is_an_error() -> None:
    path = "Resources/Worker/Properties/Events/Jobs/Properties/FunctionResponseTypes"
    found = lint(mutate(sam_template(), path, DELETE))
    assert ids(found) == ["E9104"]
    assert "Worker's SQS event Jobs (queue Jobs)" in found[0][1]
    assert "Fix: add FunctionResponseTypes: [ReportBatchItemFailures]" in found[0][1]


def test_event_source_mapping_with_empty_response_types_is_an_error() -> None:
    found = lint(mutate(cfn_template(), "Resources/WorkerJobs/Properties/FunctionResponseTypes", []))
    assert ids(found) == ["E9104"]
    assert "event source mapping WorkerJobs" in found[0][1]


def test_mapping_from_an_external_queue_arn_is_still_checked() -> None:
    template = mutate(
        cfn_template(),
        "Resources/WorkerJobs/Properties/EventSourceArn",
        "arn:aws:sqs:us-east-1:123456789012:elsewhere",
    )
    template = mutate(template, "Resources/WorkerJobs/Properties/FunctionResponseTypes", DELETE)
    assert "E9104" in ids(lint(template))


# ------------------------------------------------------------------ E9105
def test_dlq_retention_not_longer_than_source_is_an_error() -> None:
    same = mutate(cfn_template(), "Resources/Dlq/Properties/MessageRetentionPeriod", 86400)
    found = lint(same)
    assert ids(found) == ["E9105"]
    assert "Dlq keeps messages 86400 s, not longer than its source Jobs (86400 s)" in found[0][1]
    # Both left at SQS's default (4 days): equal, so the DLQ loses aged messages.
    defaults = mutate(sam_template(), "Resources/Dlq/Properties/MessageRetentionPeriod", DELETE)
    assert "E9105" in ids(lint(defaults))


def test_fifo_source_needs_a_fifo_dlq() -> None:
    fifo = mutate(sam_template(), "Resources/Jobs/Properties/FifoQueue", True)
    found = lint(fifo)
    assert "E9105" in ids(found)
    assert "FIFO queue but its dead-letter queue Dlq is not" in dict(found)["E9105"]
    both = mutate(fifo, "Resources/Dlq/Properties/FifoQueue", True)
    # FIFO DLQs get a fresh enqueue time, so equal retention is fine there.
    assert lint(mutate(both, "Resources/Dlq/Properties/MessageRetentionPeriod", DELETE)) == []


def test_fifo_dlq_for_a_standard_queue_is_an_error() -> None:
    found = lint(mutate(sam_template(), "Resources/Dlq/Properties/FifoQueue", "true"))
    assert "E9105" in ids(found)


# ------------------------------------------------------------------ E9106
def test_dlq_without_alarm_is_an_error_with_the_fix() -> None:
    found = lint(mutate(sam_template(), "Resources/DlqAlarm", DELETE))
    assert ids(found) == ["E9106"]
    assert "Dlq is the dead-letter queue of Jobs but no alarm with actions watches it" in found[0][1]
    assert "Value: !GetAtt Dlq.QueueName" in found[0][1]


@pytest.mark.parametrize(
    "alarm",
    [
        pytest.param(dlq_alarm(AlarmActions=[]), id="no-actions"),
        pytest.param(dlq_alarm(ActionsEnabled=False), id="actions-disabled"),
        pytest.param(dlq_alarm(queue="Jobs"), id="wrong-queue"),
        pytest.param(dlq_alarm(Threshold=5), id="threshold-above-zero"),
        pytest.param(dlq_alarm(MetricName="ApproximateAgeOfOldestMessage"), id="wrong-metric"),
        pytest.param(dlq_alarm(ComparisonOperator="LessThanThreshold"), id="wrong-direction"),
        pytest.param(
            dlq_alarm(AlarmActions={"Fn::If": ["HasTopic", [{"Ref": "Topic"}], []]}), id="if-with-empty-branch"
        ),
    ],
)
def test_dlq_alarm_that_would_not_page_is_an_error(alarm: dict[str, object]) -> None:
    template = mutate(sam_template(), "Resources/DlqAlarm", alarm)
    template["Conditions"] = {"HasTopic": {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}}
    assert "E9106" in ids(lint(template))


def test_dlq_alarm_by_literal_queue_name_and_conditional_actions_pass() -> None:
    template = mutate(sam_template(), "Resources/Dlq/Properties/QueueName", "jobs-dlq")
    alarm = dlq_alarm(
        Dimensions=[{"Name": "QueueName", "Value": "jobs-dlq"}],
        AlarmActions={"Fn::If": ["HasTopic", [{"Ref": "Topic"}, "arn:aws:sns:us-east-1:1:x"], [{"Ref": "Topic"}]]},
    )
    template = mutate(template, "Resources/DlqAlarm", alarm)
    template["Conditions"] = {"HasTopic": {"Fn::Equals": [{"Ref": "AWS::Region"}, "us-east-1"]}}
    assert lint(template) == []


def test_metric_math_alarm_must_return_the_dlq_metric() -> None:
    path = "Resources/DlqAlarm/Properties/Metrics/0/ReturnData"
    assert "E9106" in ids(lint(mutate(cfn_template(), path, False)))


def test_error_location_points_at_the_property() -> None:
    bad = mutate(sam_template(), "Resources/Jobs/Properties/VisibilityTimeout", 60)
    matches = [m for m in cfn_lint(json.dumps(bad, indent=1), rules=_rules("{}")) if m.rule.id == "E9101"]
    assert matches and matches[0].path[:4] == ["Resources", "Jobs", "Properties", "VisibilityTimeout"]


# ------------------------------------------------------------------ E9107
def _with_record_ttl(template: dict[str, object], value: object) -> dict[str, object]:
    return mutate(template, "Resources/Worker/Properties/Environment/Variables/SQSJOBS_RECORD_TTL_SECONDS", value)


def test_record_ttl_shorter_than_the_dlqs_retention_is_an_error_with_the_fix() -> None:
    found = lint(_with_record_ttl(sam_template(), 604800))  # 7 days, the DLQ keeps 14
    assert ids(found) == ["E9107"]
    message = found[0][1]
    assert "Worker's SQSJOBS_RECORD_TTL_SECONDS (604800 s) is shorter than " in message
    assert "Dlq's MessageRetentionPeriod (1209600 s)" in message
    assert "a replay of a job that completed meanwhile runs it again" in message
    assert "Fix: set SQSJOBS_RECORD_TTL_SECONDS to at least 1209600; 1814400 adds a week to redrive" in message


def test_record_ttl_from_a_parameter_names_the_parameter_and_follows_overrides() -> None:
    template = _with_record_ttl(sam_template(), {"Ref": "RecordTtl"})
    template["Parameters"]["RecordTtl"] = {"Type": "Number", "Default": 1814400}  # type: ignore[index]
    assert lint(template) == []
    found = lint(template, parameters={"RecordTtl": "1209599"})
    assert ids(found) == ["E9107"]
    assert "Fix: set parameter RecordTtl (SQSJOBS_RECORD_TTL_SECONDS) to at least 1209600" in found[0][1]
    # Equal to the retention is enough: the record lives as long as any letter can.
    assert lint(template, parameters={"RecordTtl": "1209600"}) == []


def test_record_ttl_counts_for_a_function_that_only_names_the_dlq() -> None:
    # A redrive function consumes nothing; its environment names the DLQ.
    template = mutate(sam_template(), "Resources/Redrive", {
        "Type": "AWS::Serverless::Function",
        "Properties": {"CodeUri": "handlers/", "Handler": "redrive.handler", "Environment": {"Variables": {
            "SQSJOBS_DLQ_URL": {"Ref": "Dlq"}, "SQSJOBS_RECORD_TTL_SECONDS": "86400"}}},
    })
    found = lint(template)
    assert ids(found) == ["E9107"]
    assert found[0][1].startswith("Redrive's SQSJOBS_RECORD_TTL_SECONDS (86400 s)")


def test_record_ttl_in_globals_and_in_plain_cloudformation() -> None:
    template = sam_template()
    template["Globals"]["Function"]["Environment"] = {"Variables": {"SQSJOBS_RECORD_TTL_SECONDS": "3600"}}
    assert ids(lint(template)) == ["E9107"]
    cfn = mutate(cfn_template(), "Resources/Worker/Properties/Environment/Variables/SQSJOBS_RECORD_TTL_SECONDS",
                 "3600")
    assert ids(lint(cfn)) == ["E9107"]


def test_record_ttl_rule_knows_the_settings_variable() -> None:
    from sqsjobs._settings import DEFAULT_RECORD_TTL, ENV_RECORD_TTL
    from sqsjobs_rules.record_ttl import RECORD_TTL_VARIABLE

    assert RECORD_TTL_VARIABLE == ENV_RECORD_TTL
    # The default outlives the longest retention SQS allows (14 days), so a function without it is fine.
    assert DEFAULT_RECORD_TTL >= 1209600
    assert lint(sam_template()) == []


@pytest.mark.slow
def test_the_shipped_template_rejects_a_short_record_ttl_override() -> None:
    found = lint(load_template(), parameters={"RecordTtlSeconds": "604800"})
    assert "E9107" in ids(found)
    assert "Fix: set parameter RecordTtlSeconds" in dict(found)["E9107"]


# ------------------------------------------------------------------ E9108 / W9108
SCHEDULES = {"Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${Delayed}/*"}
SCHEDULE_ACTIONS = ["scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:GetSchedule",
                    "scheduler:DeleteSchedule"]


def _with_delays(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` (the SAM one) with a schedule group, a delivery role, and a worker allowed to use both."""
    result = mutate(template, "Resources/Delayed", {"Type": "AWS::Scheduler::ScheduleGroup"})
    result["Resources"]["Delivery"] = {"Type": "AWS::IAM::Role", "Properties": {
        "AssumeRolePolicyDocument": {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"Service": "scheduler.amazonaws.com"}, "Action": "sts:AssumeRole",
            "Condition": {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}}]},
        "Policies": [{"PolicyName": "Deliver", "PolicyDocument": {"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sqs:SendMessage",
            "Resource": [get_att("Jobs", "Arn"), get_att("Dlq", "Arn")]}]}}]}}
    worker = result["Resources"]["Worker"]["Properties"]
    worker["Environment"]["Variables"].update({
        "SQSJOBS_QUEUE_URL": {"Ref": "Jobs"}, "SQSJOBS_SCHEDULE_GROUP": {"Ref": "Delayed"},
        "SQSJOBS_SCHEDULER_ROLE_ARN": get_att("Delivery", "Arn")})
    worker["Policies"] = [{"Version": "2012-10-17", "Statement": [
        {"Effect": "Allow", "Action": SCHEDULE_ACTIONS, "Resource": SCHEDULES},
        {"Effect": "Allow", "Action": "iam:PassRole", "Resource": get_att("Delivery", "Arn")},
    ]}]
    return result


def _statement(index: int) -> str:
    return f"Resources/Worker/Properties/Policies/0/Statement/{index}"


def test_a_function_with_a_schedule_group_and_its_permissions_passes() -> None:
    assert lint(_with_delays(sam_template())) == []


def test_missing_scheduler_actions_are_an_error_naming_them_and_the_scope() -> None:
    template = mutate(_with_delays(sam_template()), _statement(0) + "/Action",
                      ["scheduler:CreateSchedule", "scheduler:GetSchedule"])
    found = lint(template)
    assert ids(found) == ["E9108"]
    message = found[0][1]
    assert "Worker has SQSJOBS_SCHEDULE_GROUP but may not scheduler:UpdateSchedule, scheduler:DeleteSchedule" in message
    assert "Fix: allow scheduler:CreateSchedule, scheduler:UpdateSchedule" in message
    assert "schedule/${Delayed}/*" in message


def test_the_groups_own_arn_does_not_cover_its_schedules() -> None:
    template = mutate(_with_delays(sam_template()), _statement(0) + "/Resource", {
        "Fn::Sub": "arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule-group/${Delayed}"})
    found = lint(template)
    assert ids(found) == ["E9108"]
    assert "a schedule-group ARN does not cover the schedules in it" in found[0][1]


def test_scheduler_actions_on_every_group_are_a_warning() -> None:
    template = _with_delays(sam_template())
    template["Resources"]["Worker"]["Properties"]["Policies"][0]["Statement"][0] = {
        "Effect": "Allow", "Action": "scheduler:*", "Resource": "*"}
    found = lint(template)
    assert ids(found) == ["W9108"]
    assert "on schedules of every group" in found[0][1] and "Fix: scope" in found[0][1]


def test_no_pass_role_is_an_error_and_pass_role_on_any_role_a_warning() -> None:
    without = _with_delays(sam_template())
    del without["Resources"]["Worker"]["Properties"]["Policies"][0]["Statement"][1]
    found = lint(without)
    assert ids(found) == ["E9108"]
    assert "may not iam:PassRole it" in found[0][1] and "Fix: allow iam:PassRole on !GetAtt Delivery.Arn" in found[0][1]
    broad = mutate(_with_delays(sam_template()), _statement(1) + "/Resource", "*")
    assert ids(lint(broad)) == ["W9108"]


def test_a_group_without_the_role_variable_is_an_error() -> None:
    template = mutate(_with_delays(sam_template()),
                      "Resources/Worker/Properties/Environment/Variables/SQSJOBS_SCHEDULER_ROLE_ARN", DELETE)
    found = lint(template)
    assert ids(found) == ["E9108"]
    assert "has SQSJOBS_SCHEDULE_GROUP but no SQSJOBS_SCHEDULER_ROLE_ARN" in found[0][1]


def test_the_delivery_role_must_trust_scheduler_and_send_to_the_jobs_queue() -> None:
    lambda_trust = mutate(_with_delays(sam_template()),
                          "Resources/Delivery/Properties/AssumeRolePolicyDocument/Statement/0/Principal",
                          {"Service": "lambda.amazonaws.com"})
    found = lint(lambda_trust)
    assert ids(found) == ["E9108"] and "is not assumable by scheduler.amazonaws.com" in found[0][1]
    dlq_only = mutate(_with_delays(sam_template()),
                      "Resources/Delivery/Properties/Policies/0/PolicyDocument/Statement/0/Resource",
                      get_att("Dlq", "Arn"))
    found = lint(dlq_only)
    assert ids(found) == ["E9108"] and "may not sqs:SendMessage to Jobs" in found[0][1]


def test_plain_cloudformation_reads_the_role_and_attached_policies() -> None:
    template = cfn_template()
    resources = template["Resources"]
    resources["Delayed"] = {"Type": "AWS::Scheduler::ScheduleGroup"}
    resources["Delivery"] = _with_delays(sam_template())["Resources"]["Delivery"]
    resources["Worker"]["Properties"]["Environment"]["Variables"].update({
        "SQSJOBS_SCHEDULE_GROUP": {"Ref": "Delayed"}, "SQSJOBS_SCHEDULER_ROLE_ARN": get_att("Delivery", "Arn")})
    found = lint(template)  # the worker's role grants nothing yet: no Scheduler actions, no PassRole
    assert ids(found) == ["E9108", "E9108"]
    assert sorted(m.split(" may not ")[1][:14] for _, m in found) == ["iam:PassRole i", "scheduler:Crea"]
    resources["WorkerSchedules"] = {"Type": "AWS::IAM::Policy", "Properties": {
        "PolicyName": "schedules", "Roles": [{"Ref": "Role"}], "PolicyDocument": {"Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": SCHEDULE_ACTIONS, "Resource": SCHEDULES},
                          {"Effect": "Allow", "Action": "iam:PassRole", "Resource": get_att("Delivery", "Arn")}]}}}
    assert lint(template) == []


def test_policies_the_rule_cannot_read_are_not_guessed() -> None:
    template = _with_delays(sam_template())
    template["Resources"]["Worker"]["Properties"]["Policies"] = ["AmazonEventBridgeSchedulerFullAccess"]
    assert "E9108" not in ids(lint(template))


def test_the_delayed_job_rules_know_the_settings_variables() -> None:
    from sqsjobs._settings import ENV_QUEUE_URL, ENV_SCHEDULE_GROUP, ENV_SCHEDULER_ROLE_ARN
    from sqsjobs_rules._delayed_jobs import GROUP_VARIABLE, QUEUE_VARIABLE, ROLE_VARIABLE

    assert (GROUP_VARIABLE, ROLE_VARIABLE, QUEUE_VARIABLE) == (ENV_SCHEDULE_GROUP, ENV_SCHEDULER_ROLE_ARN,
                                                               ENV_QUEUE_URL)


@pytest.mark.slow
def test_the_shipped_template_grants_exactly_what_delayed_jobs_need() -> None:
    template = load_template()
    passing = lint(template)
    assert passing == []
    statements = template["Resources"]["WorkerFunction"]["Properties"]["Policies"][0]["Statement"]
    narrowed = [s for s in statements if s.get("Sid") != "PassSchedulerDeliveryRole"]
    template["Resources"]["WorkerFunction"]["Properties"]["Policies"][0]["Statement"] = narrowed
    found = lint(template)
    assert ids(found) == ["E9108"] and found[0][1].startswith("WorkerFunction has SQSJOBS_SCHEDULER_ROLE_ARN")


def test_a_fifo_jobs_queue_needs_content_based_deduplication_for_schedules() -> None:
    template = _with_delays(sam_template())
    template["Resources"]["Dlq"]["Properties"]["FifoQueue"] = True
    template["Resources"]["Jobs"]["Properties"]["FifoQueue"] = True
    found = lint(template)
    assert ids(found) == ["E9108"]
    assert "Jobs is a FIFO queue without ContentBasedDeduplication" in found[0][1]
    template["Resources"]["Jobs"]["Properties"]["ContentBasedDeduplication"] = True
    assert lint(template) == []
