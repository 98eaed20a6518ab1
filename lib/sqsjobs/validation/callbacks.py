"""A job workflows await (``callbacks=True``) needs a function whose role may answer them.

The worker answers a durable execution's callback (``lambda:SendDurableExecutionCallback*``) or a Step
Functions task token (``states:SendTask*``) from the function that consumes the job's queue
(``workflows/_callback_stage.py``). Without the permission the answer is refused with AccessDenied, the
delivery comes back until SQS moves it, and the workflow waits until its timeout: ``sqsjobs check``
says so before the deploy. A statement under ``Fn::If`` counts when its condition holds with the
template's parameters (``--parameter``: ``AwaitingFunctions=arn:aws:lambda:...:function:my-durable-fn``).

Example:
    >>> props = {"Policies": [{"Statement": [{"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "q"}]}]}
    >>> [p.message[:50] for p in callback_problems("Worker", props, {}, None, ["resize"])]
    ['job(s) resize are declared with callbacks=True, bu']
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from sqsjobs.validation.problems import Problem

#: the actions an answer needs (either service will do: a job is awaited by one or the other)
ANSWERS = ("lambda:SendDurableExecutionCallbackSuccess", "states:SendTaskSuccess")


def callback_problems(function: str, properties: Mapping[str, Any], document: Mapping[str, Any], resolve: Any,
                      callback_jobs: Sequence[str]) -> list[Problem]:
    """The problem of ``function`` when its app declares ``callback_jobs`` and its role can answer no workflow."""
    if not callback_jobs or any(_grants(s, action) for s in _statements(properties, document, resolve)
                                for action in ANSWERS):
        return []
    return [Problem(
        where=function,
        message=f"job(s) {', '.join(callback_jobs)} are declared with callbacks=True, but {function}'s role may "
                "answer no workflow (it grants neither lambda:SendDurableExecutionCallbackSuccess nor "
                "states:SendTaskSuccess)",
        fix="name the durable functions (their ARNs) in the AwaitingFunctions parameter (or the state machines in "
            "AwaitingStateMachines), or grant the SendDurableExecutionCallback*/SendTask* actions (docs/durable.md)")]


def _grants(statement: Mapping[str, Any], action: str) -> bool:
    if statement.get("Effect") != "Allow":
        return False
    actions = statement.get("Action")
    listed = actions if isinstance(actions, list) else [actions]
    return any(isinstance(a, str) and fnmatch.fnmatchcase(action.lower(), a.lower()) for a in listed)


def _statements(properties: Mapping[str, Any], document: Mapping[str, Any], resolve: Any) -> Iterator[Any]:
    """The Allow statements of a function's ``Policies`` and of the ``AWS::IAM::Role`` its ``Role`` names."""
    documents: list[Any] = [p for p in _list(properties.get("Policies")) if isinstance(p, Mapping)]
    role = properties.get("Role")
    target = role.get("Fn::GetAtt") if isinstance(role, Mapping) else None
    name = target[0] if isinstance(target, list) and target else (target.split(".")[0] if isinstance(target, str)
                                                                  else None)
    resource = (document.get("Resources") or {}).get(name) if name else None
    if isinstance(resource, Mapping) and resource.get("Type") == "AWS::IAM::Role":
        for policy in _list((resource.get("Properties") or {}).get("Policies")):
            if isinstance(policy, Mapping):
                documents.append(policy.get("PolicyDocument") or {})
    for policy in documents:
        for statement in _list(policy.get("Statement")):
            chosen = _branch(statement, resolve)
            if isinstance(chosen, Mapping):
                yield chosen


def _branch(statement: Any, resolve: Any) -> Any:
    """A statement, or the branch of its ``Fn::If`` its condition picks (None when it cannot be told)."""
    if not (isinstance(statement, Mapping) and "Fn::If" in statement):
        return statement
    args = statement["Fn::If"]
    if not (isinstance(args, list) and len(args) == 3):
        return None
    holds = resolve.condition(args[0]) if resolve is not None else None
    return args[1] if holds else args[2] if holds is False else None


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []
