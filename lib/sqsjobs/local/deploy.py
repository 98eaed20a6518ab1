"""Create a translated template's resources on the moto server, in dependency order.

moto's CloudFormation would skip alarms and cannot run functions, so this
module calls the service APIs itself (CreateQueue, CreateTable,
PutMetricAlarm, ...) and records the functions, event source mappings and
schedules for the local runners. A resource type it cannot emulate is named
in a warning; one that needs no local effect (IAM, permissions) is listed as
such: nothing is skipped silently.
"""

from __future__ import annotations

from typing import Any

from sqsjobs.local.aws import ACCOUNT_ID, Clients
from sqsjobs.local.errors import TemplateError
from sqsjobs.local.intrinsics import Resolver, references
from sqsjobs.local.model import Deployment
from sqsjobs.local.resources import ResourceCreator
from sqsjobs.local.template import Template


def deploy(template: Template, clients: Clients, *, stack_name: str, parameters: dict[str, str]) -> Deployment:
    """Create every resource of ``template`` against ``clients``' server."""
    deployment = Deployment(stack_name=stack_name)
    resolver = Resolver(
        parameters=_parameter_values(template, parameters),
        pseudo={
            "AWS::Region": clients.region,
            "AWS::AccountId": ACCOUNT_ID,
            "AWS::StackName": stack_name,
            "AWS::StackId": f"arn:aws:cloudformation:{clients.region}:{ACCOUNT_ID}:stack/{stack_name}/local",
            "AWS::Partition": "aws",
            "AWS::URLSuffix": "amazonaws.com",
            "AWS::NotificationARNs": [],
        },
        conditions=template.conditions,
        mappings=template.mappings,
    )
    creator = ResourceCreator(template, clients, resolver, deployment)
    for logical_id in _creation_order(template.resources):
        resource = template.resources[logical_id]
        condition = resource.get("Condition")
        if condition is not None and not resolver.condition(condition):
            continue
        creator.create(logical_id, resource)
    creator.link_functions()
    deployment.outputs = {
        name: resolver.resolve(output.get("Value")) for name, output in template.outputs.items()
    }
    return deployment


def _parameter_values(template: Template, overrides: dict[str, str]) -> dict[str, Any]:
    unknown = set(overrides) - set(template.parameters)
    if unknown:
        raise TemplateError(f"parameter override for unknown parameter(s): {', '.join(sorted(unknown))}")
    values: dict[str, Any] = {}
    for name, spec in template.parameters.items():
        if name in overrides:
            values[name] = overrides[name]
        elif "Default" in spec:
            values[name] = spec["Default"]
        else:
            raise TemplateError(f"parameter {name} has no Default; pass it with --parameter {name}=VALUE")
        _check_allowed(name, values[name], spec)
        if str(spec.get("Type", "")).startswith("List") or spec.get("Type") == "CommaDelimitedList":
            values[name] = str(values[name]).split(",")
    return values


def _check_allowed(name: str, value: Any, spec: dict[str, Any]) -> None:
    """Refuse a value outside the parameter's ``AllowedValues``, as CloudFormation does (compared as text)."""
    allowed = spec.get("AllowedValues")
    if not isinstance(allowed, list) or str(value) in {str(v) for v in allowed}:
        return
    raise TemplateError(
        f"parameter {name}={value} is not one of its AllowedValues ({', '.join(str(v) for v in allowed)})"
    )


def _creation_order(resources: dict[str, dict[str, Any]]) -> list[str]:
    """Logical ids with every resource after the ones it refers to."""
    depends: dict[str, set[str]] = {}
    for logical_id, resource in resources.items():
        needs = references(resource.get("Properties", {}))
        explicit = resource.get("DependsOn", [])
        needs |= {explicit} if isinstance(explicit, str) else set(explicit)
        depends[logical_id] = {n for n in needs if n in resources and n != logical_id}
    order: list[str] = []
    placed: set[str] = set()
    remaining = dict(depends)
    while remaining:
        ready = sorted(n for n, needs in remaining.items() if needs <= placed)
        if not ready:
            raise TemplateError(f"circular references between {', '.join(sorted(remaining))}")
        for name in ready:
            order.append(name)
            placed.add(name)
            del remaining[name]
    return order
