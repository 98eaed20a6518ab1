"""Delivery and retention invariants of template.yaml (issue 11).

- The queue's maxReceiveCount is MaxAttempts + 1 for every value MaxAttempts
  may take, so the worker dead-letters with a reason before SQS's backstop.
- Idempotency records outlive the DLQ's letters (RecordTtlSeconds), and every
  function that writes or reads records is told how long.
- A stack delete or replacement keeps dead letters and the guard's records,
  and only the jobs queue may dead-letter into the DLQ.
"""

from __future__ import annotations

from typing import Any

import pytest
from template_support import load_template

from sqsjobs._settings import DEFAULT_RECORD_TTL, ENV_MAX_ATTEMPTS, ENV_RECORD_TTL

RECORD_FUNCTIONS = ("WorkerFunction", "SchedulerFunction", "RedriveFunction")
RETAINED = {"DeletionPolicy": "Retain", "UpdateReplacePolicy": "Retain"}


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _environment(template: dict[str, Any], function: str) -> dict[str, Any]:
    merged = dict(template["Globals"]["Function"]["Environment"]["Variables"])
    merged.update(template["Resources"][function]["Properties"].get("Environment", {}).get("Variables", {}))
    return merged


def test_every_allowed_max_attempts_has_a_receive_count_one_higher(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["MaxAttempts"]
    rows = template["Mappings"]["ReceivesPerMaxAttempts"]
    allowed = [int(v) for v in parameter["AllowedValues"]]
    assert sorted(int(k) for k in rows) == sorted(allowed)
    assert all(rows[str(n)] == {"MaxReceiveCount": n + 1} for n in allowed)
    assert int(parameter["Default"]) in allowed
    # SQS takes maxReceiveCount 1..1000.
    assert max(allowed) + 1 <= 1000 and min(allowed) >= 1


def test_the_worker_gets_max_attempts_and_the_queue_one_receive_more(template: dict[str, Any]) -> None:
    redrive = template["Resources"]["JobsQueue"]["Properties"]["RedrivePolicy"]
    assert redrive["maxReceiveCount"] == {
        "Fn::FindInMap": ["ReceivesPerMaxAttempts", {"Ref": "MaxAttempts"}, "MaxReceiveCount"]
    }
    for function in ("WorkerFunction", "SchedulerFunction"):
        assert _environment(template, function)[ENV_MAX_ATTEMPTS] == {"Ref": "MaxAttempts"}


def test_records_outlive_the_dlqs_retention_plus_a_redrive_week(template: dict[str, Any]) -> None:
    parameter = template["Parameters"]["RecordTtlSeconds"]
    retention = template["Resources"]["DeadLetterQueue"]["Properties"]["MessageRetentionPeriod"]
    assert parameter["Default"] == DEFAULT_RECORD_TTL == retention + 7 * 24 * 3600
    # CloudFormation itself refuses a TTL shorter than any DLQ can keep a letter (14 days).
    assert parameter["MinValue"] == 1209600 >= retention
    for function in RECORD_FUNCTIONS:
        assert _environment(template, function)[ENV_RECORD_TTL] == {"Ref": "RecordTtlSeconds"}, function


def test_dead_letters_and_tables_survive_a_stack_delete_or_replacement(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    tables = [name for name, r in resources.items() if r["Type"] == "AWS::DynamoDB::Table"]
    assert {"IdempotencyTable", "OutboxTable", "OrdersTable"} <= set(tables)
    for name in [*tables, "DeadLetterQueue", "OutboxRelayFailureQueue"]:
        assert {k: resources[name].get(k) for k in RETAINED} == RETAINED, name


def test_only_the_jobs_queues_may_dead_letter_into_the_dlq(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    policy = resources["DeadLetterQueue"]["Properties"]["RedriveAllowPolicy"]
    assert policy["redrivePermission"] == "byQueue"
    sources = [n for n, r in resources.items()
               if r["Type"] == "AWS::SQS::Queue" and "RedrivePolicy" in r.get("Properties", {})]
    assert sources == ["JobsQueue", "CriticalQueue"]
    # Each jobs queue's ARN from its name (a GetAtt would be a circular dependency).
    for queue, arn in zip(sources, policy["sourceQueueArns"], strict=True):
        assert resources[queue]["Properties"]["QueueName"] == {"Fn::Sub": f"${{AWS::StackName}}-{queue}"}
        assert arn == {"Fn::Sub": f"arn:${{AWS::Partition}}:sqs:${{AWS::Region}}:${{AWS::AccountId}}:"
                                  f"${{AWS::StackName}}-{queue}"}
        redrive = resources[queue]["Properties"]["RedrivePolicy"]
        assert redrive["maxReceiveCount"] == {
            "Fn::FindInMap": ["ReceivesPerMaxAttempts", {"Ref": "MaxAttempts"}, "MaxReceiveCount"]}
