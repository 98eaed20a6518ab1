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


def test_function_policies_are_least_privilege(template: dict[str, Any]) -> None:
    functions = [k for k, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]
    assert {"WorkerFunction", "RedriveFunction"} <= set(functions)
    for name in functions:
        for policy in template["Resources"][name]["Properties"].get("Policies", []):
            # Only inline statements: a managed-policy name would not be least privilege.
            assert isinstance(policy, dict) and "Statement" in policy, (name, policy)
            for statement in policy["Statement"]:
                actions = statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]
                assert all("*" not in action for action in actions), (name, statement["Sid"])
                assert statement["Resource"] != "*", (name, statement["Sid"])
