"""`sqsjobs check` refuses a job declared with callbacks=True whose worker may answer no workflow
(lib/sqsjobs/validation/callbacks.py), judged on the shipped template with its parameters."""

from __future__ import annotations

from typing import Any

import pytest
from template_support import load_template

from sqsjobs.validation.callbacks import callback_problems
from sqsjobs_rules._wiring import Resolver


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def problems(template: dict[str, Any], **overrides: str) -> list[str]:
    worker = template["Resources"]["WorkerFunction"]["Properties"]
    found = callback_problems("WorkerFunction", worker, template, Resolver(template, overrides), ["resize"])
    return [p.message for p in found]


def test_without_awaiting_functions_the_worker_answers_none(template: dict[str, Any]) -> None:
    (message,) = problems(template)
    assert "resize" in message and "callbacks=True" in message


@pytest.mark.parametrize(("parameter", "value"), [
    ("AwaitingFunctions", "arn:aws:lambda:us-east-1:123456789012:function:orders-flow"),
    ("AwaitingStateMachines", "orders-flow")])
def test_a_named_function_or_state_machine_lets_the_worker_answer(template: dict[str, Any], parameter: str,
                                                                  value: str) -> None:
    assert problems(template, **{parameter: value}) == []


def test_an_app_without_callback_jobs_needs_nothing(template: dict[str, Any]) -> None:
    worker = template["Resources"]["WorkerFunction"]["Properties"]
    assert callback_problems("WorkerFunction", worker, template, Resolver(template), []) == []


def test_a_role_resource_with_the_actions_counts() -> None:
    document = {"Resources": {"Role": {"Type": "AWS::IAM::Role", "Properties": {"Policies": [{"PolicyDocument": {
        "Statement": [{"Effect": "Allow", "Action": ["lambda:SendDurableExecutionCallback*"], "Resource": "x"}]}}]}}}}
    properties = {"Role": {"Fn::GetAtt": ["Role", "Arn"]}}
    assert callback_problems("Fn", properties, document, None, ["resize"]) == []
