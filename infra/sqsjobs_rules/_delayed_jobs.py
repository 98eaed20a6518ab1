"""The reading behind E9108/W9108 (``delayed_jobs.py``): a function's IAM grants, and what they cover.

An underscore module: cfn-lint loads rule modules by path without importing
them as modules, so the dataclasses live here, imported the normal way.

Example:
    >>> Grant(("scheduler:*",), ("*",)).allows("scheduler:CreateSchedule")
    True
    >>> covers("arn:${AWS::Partition}:scheduler:${AWS::Region}:${AWS::AccountId}:schedule/${G}/*",
    ...        "arn:aws:scheduler:us-east-1:123456789012:schedule/${G}/job-0")
    True
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from sqsjobs_rules import _wiring
from sqsjobs_rules._wiring import Path, Wiring

#: lib/sqsjobs/_settings.py's names (the rules load without the sqsjobs package; a test ties them)
GROUP_VARIABLE = "SQSJOBS_SCHEDULE_GROUP"
ROLE_VARIABLE = "SQSJOBS_SCHEDULER_ROLE_ARN"
QUEUE_VARIABLE = "SQSJOBS_QUEUE_URL"
SCHEDULE_ACTIONS = ("scheduler:CreateSchedule", "scheduler:UpdateSchedule", "scheduler:GetSchedule",
                    "scheduler:DeleteSchedule")
PASS_ROLE = "iam:PassRole"
GROUP_TYPE = "AWS::Scheduler::ScheduleGroup"
ROLE_TYPE = "AWS::IAM::Role"
POLICY_TYPES = ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy")
_PSEUDO = ("${AWS::Partition}", "${AWS::Region}", "${AWS::AccountId}", "${AWS::URLSuffix}")


@dataclass(frozen=True)
class Grant:
    """One Allow statement: its actions and resources (as text; ``${X}`` for a reference to X)."""

    actions: tuple[str, ...]
    resources: tuple[str | None, ...]  # None: a resource the rule cannot read

    def allows(self, action: str) -> bool:
        """Whether an action pattern of the statement matches ``action`` (IAM actions ignore case)."""
        return any(fnmatch.fnmatchcase(action.lower(), pattern.lower()) for pattern in self.actions)


@dataclass(frozen=True)
class Finding:
    """A problem (``error``) or a wider-than-needed grant (a warning)."""

    error: bool
    path: Path
    message: str


def findings(wiring: Wiring) -> list[Finding]:
    """Every E9108/W9108 finding of the template."""
    found: list[Finding] = []
    for function in wiring.functions.values():
        if GROUP_VARIABLE in function.environment:
            found.extend(_function_findings(wiring, function))
    return found


def _function_findings(wiring: Wiring, function: Any) -> Iterator[Finding]:
    name = function.logical_id
    group_value = function.environment[GROUP_VARIABLE]
    role_value = function.environment.get(ROLE_VARIABLE)
    if role_value is None:
        yield Finding(True, function.variable_path(GROUP_VARIABLE),
                      f"{name} has {GROUP_VARIABLE} but no {ROLE_VARIABLE}: it cannot create a delayed job's "
                      f"schedule (Scheduler sends with that role). Fix: set {ROLE_VARIABLE} to the ARN of a role "
                      "scheduler.amazonaws.com assumes (e.g. !GetAtt SchedulerDeliveryRole.Arn).")
    grants = _grants(wiring, name)
    if grants is not None:
        group = _group_token(wiring, group_value)
        yield from _schedule_findings(name, function, grants, group)
        if role_value is not None:
            yield from _pass_role_findings(name, function, grants, role_value)
    role_id = _wiring._arn_target(role_value)
    if role_id is not None and _type(wiring, role_id) == ROLE_TYPE:
        yield from _role_findings(wiring, function, role_id)
    queue_id = _wiring._ref_target(function.environment.get(QUEUE_VARIABLE))
    queue = wiring.queues.get(queue_id) if queue_id is not None else None
    if queue is not None and queue.fifo and \
            str(wiring.resolve.scalar(queue.properties.get("ContentBasedDeduplication", False))).lower() != "true":
        yield Finding(True, queue.property_path("ContentBasedDeduplication"),
                      f"{queue.logical_id} is a FIFO queue without ContentBasedDeduplication, and {name} schedules "
                      "delayed jobs to it: EventBridge Scheduler sends no deduplication id, so every delivery "
                      f"fails (and a FIFO queue cannot be a schedule's DLQ: they are lost). Fix: set "
                      f"{queue.logical_id}.ContentBasedDeduplication: true.")


def _schedule_findings(name: str, function: Any, grants: list[Grant], group: str | None) -> Iterator[Finding]:
    scope = f"arn:${{AWS::Partition}}:scheduler:${{AWS::Region}}:${{AWS::AccountId}}:schedule/{group or '<group>'}/*"
    candidate = f"arn:aws:scheduler:us-east-1:123456789012:schedule/{group}/job-0" if group else None
    missing, broad, group_arn_only = [], [], []
    for action in SCHEDULE_ACTIONS:
        granting = [g for g in grants if g.allows(action)]
        resources = [r for g in granting for r in g.resources]
        if None in resources or (granting and candidate is None):
            continue  # a resource (or the group) the rule cannot read: not decided
        if not any(covers(r, candidate) for r in resources if r is not None and candidate is not None):
            missing.append(action)
            if any(r is not None and ":schedule-group/" in r for r in resources):
                group_arn_only.append(action)
        elif any(covers(r, candidate.replace(f"/{group}/", "/another-group/"))
                 for r in resources if r is not None and candidate is not None):
            broad.append(action)
    path = function.variable_path(GROUP_VARIABLE)
    if missing:
        why = (" (a schedule-group ARN does not cover the schedules in it)" if group_arn_only else "")
        yield Finding(True, path,
                      f"{name} has {GROUP_VARIABLE} but may not {', '.join(missing)} on the group's schedules"
                      f"{why}: a delayed job beyond 15 minutes (or a retry beyond 12 hours) fails when it is "
                      f"scheduled. Fix: allow {', '.join(SCHEDULE_ACTIONS)} on {scope}.")
    if broad:
        yield Finding(False, path,
                      f"{name} may {', '.join(broad)} on schedules of every group, not only its own. "
                      f"Fix: scope the statement's Resource to {scope}.")


def _pass_role_findings(name: str, function: Any, grants: list[Grant], role_value: Any) -> Iterator[Finding]:
    role = _text(role_value)
    granting = [g for g in grants if g.allows(PASS_ROLE)]
    resources = [r for g in granting for r in g.resources]
    if None in resources or role is None:
        return
    path = function.variable_path(ROLE_VARIABLE)
    if not any(covers(r, role) for r in resources if r is not None):
        yield Finding(True, path,
                      f"{name} has {ROLE_VARIABLE} but may not iam:PassRole it: Scheduler refuses every schedule "
                      f"it creates. Fix: allow iam:PassRole on {_shown(role)} (Condition iam:PassedToService: "
                      "scheduler.amazonaws.com).")
    elif any(covers(r, "arn:aws:iam::123456789012:role/another-role") for r in resources if r is not None):
        yield Finding(False, path,
                      f"{name} may iam:PassRole any role, not only {_shown(role)}. Fix: scope the statement's "
                      f"Resource to {_shown(role)}.")


def _role_findings(wiring: Wiring, function: Any, role_id: str) -> Iterator[Finding]:
    props = _mapping(wiring.resources[role_id].get("Properties"))
    path = ("Resources", role_id)
    trust = _statements(props.get("AssumeRolePolicyDocument"))
    if trust is not None and not any(_trusts_scheduler(s) for s in trust):
        yield Finding(True, path,
                      f"{role_id} ({function.logical_id}'s {ROLE_VARIABLE}) is not assumable by "
                      "scheduler.amazonaws.com, so no delayed job is ever delivered. Fix: add a trust statement "
                      "for Principal Service scheduler.amazonaws.com (sts:AssumeRole) with an aws:SourceAccount "
                      "condition.")
    queue_id = _wiring._ref_target(function.environment.get(QUEUE_VARIABLE))
    grants = _role_grants(wiring, role_id)
    if queue_id is None or queue_id not in wiring.queues or grants is None:
        return
    sending = [r for g in grants if g.allows("sqs:SendMessage") for r in g.resources]
    if None in sending:
        return
    if not any(covers(r, f"${{{queue_id}.Arn}}") for r in sending if r is not None):
        yield Finding(True, path,
                      f"{role_id} ({function.logical_id}'s {ROLE_VARIABLE}) may not sqs:SendMessage to {queue_id} "
                      f"({function.logical_id}'s {QUEUE_VARIABLE}): every delayed job fails at its time and "
                      f"lands in the schedule's DLQ. Fix: allow sqs:SendMessage on !GetAtt {queue_id}.Arn.")


# ---------------------------------------------------------------- reading policies
def _grants(wiring: Wiring, function_id: str) -> list[Grant] | None:
    """The Allow statements that apply to the function; None when some cannot be read."""
    resource = wiring.resources[function_id]
    props = _mapping(resource.get("Properties"))
    role_id = _wiring._arn_target(props.get("Role"))
    if "Role" in props:
        return _role_grants(wiring, role_id) if role_id is not None else None
    if resource.get("Type") != "AWS::Serverless::Function":
        return None
    policies = props.get("Policies", [])
    policies = policies if isinstance(policies, list) else [policies]
    grants: list[Grant] = []
    for policy in policies:
        statements = _statements(policy)
        if statements is None:
            return None  # a managed policy or a SAM policy template: not readable here
        grants.extend(_allow(s) for s in statements if _is_allow(s))
    return grants


def _role_grants(wiring: Wiring, role_id: str) -> list[Grant] | None:
    if _type(wiring, role_id) != ROLE_TYPE:
        return None
    props = _mapping(wiring.resources[role_id].get("Properties"))
    if props.get("ManagedPolicyArns"):
        return None
    documents = [_mapping(p).get("PolicyDocument") for p in props.get("Policies", []) or []]
    for resource in wiring.resources.values():
        if resource.get("Type") in POLICY_TYPES:
            attached = _mapping(resource.get("Properties"))
            if role_id in [_wiring._ref_target(r) for r in attached.get("Roles", []) or []]:
                documents.append(attached.get("PolicyDocument"))
    grants: list[Grant] = []
    for document in documents:
        statements = _statements(document)
        if statements is None:
            return None
        grants.extend(_allow(s) for s in statements if _is_allow(s))
    return grants


def _statements(document: Any) -> list[Mapping[str, Any]] | None:
    if not isinstance(document, Mapping) or "Statement" not in document:
        return None
    statements = document["Statement"]
    statements = statements if isinstance(statements, list) else [statements]
    return [s for s in statements if isinstance(s, Mapping)]


def _is_allow(statement: Mapping[str, Any]) -> bool:
    return statement.get("Effect") == "Allow" and "Action" in statement


def _allow(statement: Mapping[str, Any]) -> Grant:
    actions = statement.get("Action")
    resources = statement.get("Resource", "*")
    actions = actions if isinstance(actions, list) else [actions]
    resources = resources if isinstance(resources, list) else [resources]
    return Grant(tuple(a for a in actions if isinstance(a, str)), tuple(_text(r) for r in resources))


def _trusts_scheduler(statement: Mapping[str, Any]) -> bool:
    principal = _mapping(statement.get("Principal")).get("Service")
    services = principal if isinstance(principal, list) else [principal]
    return _is_allow(statement) and "scheduler.amazonaws.com" in services and \
        Grant(tuple(statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]),
              ()).allows("sts:AssumeRole")


# ---------------------------------------------------------------- values as text
def _text(value: Any) -> str | None:
    """A resource or ARN as text: literals as they are, ``!GetAtt X.Arn`` as ``${X.Arn}``, ``!Sub`` its string."""
    if isinstance(value, str):
        return value
    target = _wiring._arn_target(value)
    if target is not None:
        return f"${{{target}.Arn}}"
    if isinstance(value, Mapping) and set(value) == {"Fn::Sub"}:
        sub = value["Fn::Sub"]
        if isinstance(sub, str):
            return sub
        if isinstance(sub, list) and sub and isinstance(sub[0], str):
            return sub[0]
    return None


def _group_token(wiring: Wiring, value: Any) -> str | None:
    """How the group appears in an ARN: ``${G}`` for ``!Ref G`` (a group of the template), else the literal name."""
    target = _wiring._ref_target(value)
    if target is not None:
        if _type(wiring, target) == GROUP_TYPE:
            return f"${{{target}}}"
        resolved = wiring.resolve.scalar(value)
        return resolved if isinstance(resolved, str) and resolved else None
    return value if isinstance(value, str) and value else None


def covers(pattern: str, arn: str) -> bool:
    """Whether an IAM resource pattern (pseudo parameters read as ``*``) covers ``arn``."""
    for pseudo in _PSEUDO:
        pattern = pattern.replace(pseudo, "*")
    return fnmatch.fnmatchcase(arn, pattern)


def _shown(text: str) -> str:
    return f"!GetAtt {text[2:-1]}" if text.startswith("${") and text.endswith(".Arn}") else text


def _type(wiring: Wiring, logical_id: str) -> Any:
    resource = wiring.resources.get(logical_id)
    return resource.get("Type") if isinstance(resource, Mapping) else None


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
