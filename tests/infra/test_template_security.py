"""Security invariants of the template that must survive every extension of it."""

from __future__ import annotations

from typing import Any

import pytest
from template_support import load_template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def test_every_queue_denies_non_tls_access(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    queues = {k for k, r in resources.items() if r["Type"] == "AWS::SQS::Queue"}
    covered: set[str] = set()
    for resource in resources.values():
        if resource["Type"] != "AWS::SQS::QueuePolicy":
            continue
        statements = resource["Properties"]["PolicyDocument"]["Statement"]
        denies_plain_http = any(
            s["Effect"] == "Deny"
            and s["Principal"] == "*"
            and s["Action"] == "sqs:*"
            and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
            for s in statements
        )
        if denies_plain_http:
            covered |= {q["Ref"] for q in resource["Properties"]["Queues"]}
    assert queues and queues - covered == set()


def test_queues_and_tables_are_encrypted_at_rest(template: dict[str, Any]) -> None:
    for name, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::SQS::Queue":
            assert props.get("SqsManagedSseEnabled") is True or "KmsMasterKeyId" in props, name
        if resource["Type"] == "AWS::DynamoDB::Table":
            assert props["SSESpecification"]["SSEEnabled"] is True, name
            assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}, name


#: the one statement on "*": IAM cannot scope a task token to a state machine (docs/durable.md); it exists only
#: when AwaitingStateMachines names one
ANY_RESOURCE = {"AnswerTaskTokens": ("AnswersTaskTokens", ["states:SendTaskSuccess", "states:SendTaskFailure",
                                                           "states:SendTaskHeartbeat"])}


def statements(policy: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """A policy's statements, each with the condition it exists under (``!If [C, statement, NoValue]``)."""
    found: list[tuple[str | None, dict[str, Any]]] = []
    for statement in policy["Statement"]:
        if "Fn::If" in statement:
            condition, present, absent = statement["Fn::If"]
            assert absent == {"Ref": "AWS::NoValue"}, statement
            found.append((condition, present))
        else:
            found.append((None, statement))
    return found


def test_function_policies_are_least_privilege(template: dict[str, Any]) -> None:
    functions = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]
    assert {"WorkerFunction", "RedriveFunction"} <= set(functions)
    for name in functions:
        for policy in template["Resources"][name]["Properties"].get("Policies", []):
            # Only inline statements: a managed-policy name would not be least privilege.
            assert isinstance(policy, dict) and "Statement" in policy, (name, policy)
            for condition, statement in statements(policy):
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                assert all("*" not in action for action in actions), (name, statement["Sid"])
                if statement["Resource"] == "*":
                    assert ANY_RESOURCE.get(statement["Sid"]) == (condition, actions), (name, statement["Sid"])


def test_the_worker_answers_only_the_durable_functions_the_parameter_names(template: dict[str, Any]) -> None:
    policy = template["Resources"]["WorkerFunction"]["Properties"]["Policies"][0]
    (answer,) = [s for c, s in statements(policy) if s["Sid"] == "AnswerDurableCallbacks"]
    assert [c for c, s in statements(policy) if s["Sid"] == "AnswerDurableCallbacks"] == ["AnswersDurableCallbacks"]
    assert template["Conditions"]["AnswersDurableCallbacks"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AwaitingFunctions"}, ""]}]}
    # Resource: one ARN per name, NAME:* (a durable execution is authorized against its versioned function ARN)
    split = answer["Resource"]["Fn::Split"]
    assert split[0] == ","
    text, names = split[1]["Fn::Sub"]
    assert text.endswith(":function:${Names}:*")
    assert names["Names"]["Fn::Join"][1] == {"Fn::Split": [",", {"Ref": "AwaitingFunctions"}]}
