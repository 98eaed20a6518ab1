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


#: the one statement on "*": states:SendTask* have no resource type in IAM (docs/durable.md, "Deploying"); it exists
#: only when AwaitingStateMachines names a state machine
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
    assert [c for c, s in statements(policy) if s["Sid"] == "AnswerDurableCallbacks"] == ["AnswersDurableCallbacks"]
    assert template["Conditions"]["AnswersDurableCallbacks"] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "AwaitingFunctions"}, ""]}]}


#: an account's functions, and a durable execution's ARN: the resource IAM authorizes SendDurableExecutionCallback*
#: against (docs/durable.md, "Deploying"): the function's ARN, then $LATEST or a version number, never an alias
FUNCTION = "arn:aws:lambda:us-east-1:123456789012:function:"


def execution(function: str, version: str = "3") -> str:
    return f"{FUNCTION}{function}:{version}/durable-execution/run-1/0f3c"


def test_the_callback_grant_matches_the_named_functions_executions_and_no_other(template: dict[str, Any]) -> None:
    import fnmatch

    from sqsjobs.local.intrinsics import Resolver

    policy = template["Resources"]["WorkerFunction"]["Properties"]["Policies"][0]
    (answer,) = [s for _, s in statements(policy) if s["Sid"] == "AnswerDurableCallbacks"]
    # The local cloud's resolver, which refuses what CloudFormation refuses (a function as a delimiter).
    resolver = Resolver(parameters={"AwaitingFunctions": f"{FUNCTION}publish,{FUNCTION}publish-album"})
    granted = resolver.resolve(answer["Resource"])
    assert granted == [f"{FUNCTION}publish:*", f"{FUNCTION}publish-album:*"]

    def allowed(arn: str) -> bool:  # IAM's Resource match: `*` stands for any run of characters, `/` and `:` too
        return any(fnmatch.fnmatchcase(arn, pattern) for pattern in granted)

    assert allowed(execution("publish")) and allowed(execution("publish", "$LATEST"))
    assert allowed(execution("publish-album", "12"))
    assert not allowed(execution("publisher")) and not allowed(execution("other"))
    assert not allowed(execution("publish").replace("123456789012", "210987654321"))


@pytest.mark.parametrize(("value", "ok"), [
    ("", True), (f"{FUNCTION}publish", True), (f"{FUNCTION}publish,{FUNCTION}publish-album", True),
    ("arn:aws-cn:lambda:cn-north-1:123456789012:function:publish", True),
    ("publish", False), (f"{FUNCTION}publish, {FUNCTION}publish-album", False), (f"{FUNCTION}publish:live", False),
    (f"{FUNCTION}publish:3", False)])
def test_awaiting_functions_takes_unqualified_function_arns(template: dict[str, Any], value: str, ok: bool) -> None:
    # A name, an alias, a version or a space would be granted as an ARN that matches no durable execution: every
    # answer refused at run time. The parameter's AllowedPattern refuses them at `sqsjobs check`, `local up`, deploy.
    from sqsjobs.validation.parameters import check_parameters

    problems = check_parameters(template["Parameters"], {"AwaitingFunctions": value})
    assert (problems == []) is ok, [p.message for p in problems]


def delimiters(value: Any) -> list[Any]:
    """Every Fn::Join and Fn::Split delimiter in ``value``."""
    if isinstance(value, list):
        return [d for item in value for d in delimiters(item)]
    if not isinstance(value, dict):
        return []
    found = [v[0] for k, v in value.items() if k in ("Fn::Join", "Fn::Split") and isinstance(v, list) and v]
    return found + [d for v in value.values() for d in delimiters(v)]


def test_every_join_and_split_delimiter_is_a_literal_string(template: dict[str, Any]) -> None:
    # CloudFormation takes no function as a delimiter, and cfn-lint checks none inside a SAM function's Policies
    # (it validates SAM resources against SAM's schema, untransformed).
    found = delimiters(template)
    assert len(found) >= 2
    assert [d for d in found if not isinstance(d, str)] == []
