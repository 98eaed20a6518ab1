"""``sqsjobs local fire NAME``: run a schedule's target now, locally or on AWS.

Locally the running ``local up`` runs it in its own workers (the control
endpoint); against AWS (or any ``--endpoint-url``) the rule's or schedule's
Lambda target is invoked synchronously with the payload the schedule would
send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqsjobs.local.control import DEFAULT_TEMPLATE, call, default_state_path, read_state
from sqsjobs.local.errors import LocalCloudError


def fire_local(name: str, template: str | Path = DEFAULT_TEMPLATE) -> dict[str, Any]:
    """Ask the running local cloud of ``template``'s project to fire schedule ``name``; return its result."""
    state = read_state(default_state_path(template))
    answer = call(state, "fire", {"name": name})
    if "error" in answer:
        raise LocalCloudError(str(answer["error"]))
    return answer


def fire_remote(name: str, *, endpoint_url: str | None, region: str | None, profile: str | None) -> dict[str, Any]:
    """Invoke the Lambda target of EventBridge rule or Scheduler schedule ``name``."""
    import boto3

    session = boto3.session.Session(profile_name=profile, region_name=region)
    events = session.client("events", endpoint_url=endpoint_url)
    payload: Any
    try:
        targets = events.list_targets_by_rule(Rule=name)["Targets"]
    except events.exceptions.ResourceNotFoundException:
        targets = []
    if targets:
        target = targets[0]
        arn = target["Arn"]
        payload = json.loads(target["Input"]) if "Input" in target else {
            "version": "0", "detail-type": "Scheduled Event", "source": "aws.events", "detail": {},
            "resources": [events.describe_rule(Name=name)["Arn"]],
        }
    else:
        scheduler = session.client("scheduler", endpoint_url=endpoint_url)
        try:
            schedule_target = scheduler.get_schedule(Name=name)["Target"]
        except scheduler.exceptions.ResourceNotFoundException:
            raise LocalCloudError(f"no EventBridge rule or schedule named {name!r}") from None
        arn = schedule_target["Arn"]
        payload = json.loads(schedule_target.get("Input") or "{}")
    if ":lambda:" not in arn:
        raise LocalCloudError(f"{name} targets {arn}, not a Lambda function; fire it there")
    response = session.client("lambda", endpoint_url=endpoint_url).invoke(
        FunctionName=arn, InvocationType="RequestResponse", Payload=json.dumps(payload).encode()
    )
    body = response["Payload"].read()
    return {
        "ok": "FunctionError" not in response,
        "payload": json.loads(body) if body else None,
        "error_type": response.get("FunctionError", ""),
    }
