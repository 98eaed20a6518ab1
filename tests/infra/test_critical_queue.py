"""The critical queue (jobs declared with queue="critical"): wired like the jobs queue, and every `sqsjobs check`
rule finds it by its wiring, so each rule that guards JobsQueue also fails on a broken CriticalQueue."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from template_support import DELETE, get_att, lint, load_template, mutate, policy_statements

from sqsjobs._settings import ENV_QUEUE_URL_PREFIX

CRITICAL_ENV = f"{ENV_QUEUE_URL_PREFIX}CRITICAL"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def critical_event(template: dict[str, Any]) -> dict[str, Any]:
    event: dict[str, Any] = template["Resources"]["WorkerFunction"]["Properties"]["Events"]["Critical"]
    return event


def test_the_critical_queue_has_its_own_mapping_and_concurrency(template: dict[str, Any]) -> None:
    props = critical_event(template)["Properties"]
    assert props["Queue"] == get_att("CriticalQueue", "Arn")
    assert props["ScalingConfig"] == {"MaximumConcurrency": {"Ref": "CriticalMaximumConcurrency"}}
    assert props["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
    jobs = template["Resources"]["WorkerFunction"]["Properties"]["Events"]["Jobs"]["Properties"]
    # Off provisioned mode (the default), the jobs queue's mapping is capped by MaximumConcurrency.
    assert jobs["ScalingConfig"] == {"Fn::If": ["UseProvisionedPollers", {"Ref": "AWS::NoValue"},
                                                {"MaximumConcurrency": {"Ref": "MaximumConcurrency"}}]}


def test_every_function_that_sends_jobs_knows_the_critical_queue(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    for function in ("WorkerFunction", "SchedulerFunction", "OutboxRelayFunction"):
        env = resources[function]["Properties"]["Environment"]["Variables"]
        assert env[CRITICAL_ENV] == {"Ref": "CriticalQueue"}, function
    for function in ("WorkerFunction", "SchedulerFunction", "OutboxRelayFunction", "RedriveFunction"):
        statements = policy_statements(resources[function]["Properties"]["Policies"][0])
        senders = [s for s in statements if "sqs:SendMessage" in json.dumps(s["Action"])
                   and get_att("JobsQueue", "Arn") in (s["Resource"] if isinstance(s["Resource"], list)
                                                        else [s["Resource"]])]
        assert senders and all(get_att("CriticalQueue", "Arn") in s["Resource"] for s in senders), function


def test_the_critical_queue_is_watched_and_on_the_dashboard(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    alarm = resources["CriticalOldestMessageAlarm"]["Properties"]
    (stat,) = [m["MetricStat"]["Metric"] for m in alarm["Metrics"] if "MetricStat" in m]
    assert stat["Dimensions"] == [{"Name": "QueueName", "Value": get_att("CriticalQueue", "QueueName")}]
    assert alarm["AlarmActions"]
    body = resources["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    titles = [w["properties"]["title"] for w in json.loads(body.replace("${", "<"))["widgets"]]
    assert {"Critical queue depth", "Oldest critical job age (s)",
            "Jobs deferred by a limiter, per job and limiter"} <= set(titles)
    assert body.count("${CriticalQueue.QueueName}") == 3


@pytest.mark.slow
def test_the_shipped_template_passes_with_two_jobs_queues(template: dict[str, Any]) -> None:
    assert lint(template) == []


@pytest.mark.slow
def test_a_broken_critical_queue_fails_the_same_rules_as_the_jobs_queue(template: dict[str, Any]) -> None:
    broken = mutate(template, "Resources/CriticalQueue/Properties/VisibilityTimeout", 60)
    broken = mutate(broken, "Resources/WorkerFunction/Properties/Events/Critical/Properties/FunctionResponseTypes",
                    DELETE)
    broken = mutate(broken, "Resources/CriticalQueue/Properties/RedrivePolicy/maxReceiveCount", 3)
    broken = mutate(broken, "Resources/CriticalQueue/Properties/MessageRetentionPeriod", 1209600)
    found = lint(broken)
    messages = {rule: text for rule, text in found}
    assert sorted(messages) == ["E9101", "E9103", "E9104", "E9105", "W9101"], found
    assert all("CriticalQueue" in text for text in messages.values())
    assert "JobsQueue" not in " ".join(messages.values())  # the healthy queue is not blamed


@pytest.mark.slow
def test_a_critical_queue_without_a_dlq_or_with_an_unwatched_one_is_refused(template: dict[str, Any]) -> None:
    no_dlq = lint(mutate(template, "Resources/CriticalQueue/Properties/RedrivePolicy", DELETE))
    assert [rule for rule, _ in no_dlq] == ["E9102"] and "CriticalQueue feeds WorkerFunction" in no_dlq[0][1]

    own_dlq = copy.deepcopy(template)
    own_dlq["Resources"]["CriticalDeadLetterQueue"] = {"Type": "AWS::SQS::Queue",
                                                       "Properties": {"MessageRetentionPeriod": 1209600}}
    own_dlq["Resources"]["CriticalQueue"]["Properties"]["RedrivePolicy"]["deadLetterTargetArn"] = get_att(
        "CriticalDeadLetterQueue", "Arn")
    unwatched = lint(own_dlq)
    assert [rule for rule, _ in unwatched] == ["E9106"]
    assert "CriticalDeadLetterQueue is the dead-letter queue of CriticalQueue" in unwatched[0][1]
