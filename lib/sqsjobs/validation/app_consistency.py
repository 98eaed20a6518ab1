"""The template against its app: each schedule fires a scheduled job with the same cron, each routed job exists.

A schedule whose ``Input`` names ``nightly-reprot``, or fires at another
time than ``@app.scheduled`` says, deploys fine and fails (or runs at the
wrong period) at 2 a.m.; an SQS filter naming a job the app lacks drops its
messages' meaning. Each function's handler module is imported in a child
process (:mod:`sqsjobs.validation.inspect_app`) with its ``CodeUri`` as the
import root and its template environment, as Lambda would.

Example:
    >>> routes = Routes(schedules=[ScheduledRoute(source="NightlyReport", job="nightly-reprot",
    ...                                          expression="cron(0 2 * * ? *)")], filtered_jobs=[])
    >>> app = {"jobs": ["nightly-report"], "schedules": {"nightly-report": "cron(0 2 * * ? *)"}}
    >>> [p.message for p in compare("SchedulerFunction", "handlers/", routes, app)]
    ["fires job 'nightly-reprot', which the app in handlers/ does not declare (it declares: nightly-report)"]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqsjobs._settings import ENV_AWS_DEFAULT_REGION, ENV_DLQ_URL, ENV_QUEUE_URL, ENV_SCHEDULE_GROUP, ENV_TABLE
from sqsjobs.validation.layout import code_location, handler_module, module_exists, serverless_functions
from sqsjobs.validation.problems import Problem, Severity

#: seconds an import of user code may take before it is reported as stuck
IMPORT_TIMEOUT = 120


@dataclass(frozen=True, kw_only=True)
class ScheduledRoute:
    """A schedule in the template that fires a job (its ``Input`` names ``job``)."""

    source: str
    job: str
    expression: str | None


@dataclass(kw_only=True)
class Routes:
    """What the template sends one function: scheduled jobs, and jobs its SQS filters select."""

    schedules: list[ScheduledRoute] = field(default_factory=list)
    filtered_jobs: list[tuple[str, str]] = field(default_factory=list)  # (source, job)


def check_app_consistency(document: Mapping[str, Any], base: Path, wired: Any) -> list[Problem]:
    """Import each python function's handler module (in a child) and compare its app with the template.

    ``wired`` is the rules' reading of the template (``sqsjobs_rules._wiring.Wiring``): its resolver, and
    which queues feed which function.
    """
    from sqsjobs.validation.callbacks import callback_problems
    from sqsjobs.validation.environment import Role, check_environment, features_of

    resolve = wired.resolve
    routes = collect_routes(document, resolve)
    fed = {source.function_id for source in wired.sources if source.function_id}
    variables = {logical_id: list(function.environment) for logical_id, function in wired.functions.items()}
    features = features_of(variables.values(), declares_schedule_group=any(
        isinstance(r, Mapping) and r.get("Type") == "AWS::Scheduler::ScheduleGroup"
        for r in _mapping(document.get("Resources")).values()), relays_a_table=_relays_a_table(wired))
    written = _written_values(wired)
    problems: list[Problem] = []
    described: dict[tuple[Path, str, tuple[tuple[str, str], ...]], dict[str, Any]] = {}
    # per app: its CodeUri and its @app.scheduled jobs (with their expressions)
    scheduled: dict[tuple[Path, tuple[str, ...]], tuple[str, dict[str, str]]] = {}
    for logical_id, properties, _ in serverless_functions(document):
        code_dir, module = code_location(properties, base), handler_module(properties)
        if code_dir is None or module is None or not module_exists(code_dir, module):
            continue  # a missing CodeUri or handler module is check_layout's to report
        environment = tuple(sorted(_environment(wired, logical_id).items()))
        cache_key = (code_dir, module, environment)
        if cache_key not in described:
            described[cache_key] = _describe(code_dir, module, dict(environment))
        answer = described[cache_key]
        uri = str(properties.get("CodeUri", "."))
        if not answer.get("ok"):
            if answer.get("configuration"):
                # The app refuses its own configuration with this environment: Lambda's cold start would too.
                problems.append(Problem(
                    where=logical_id, message=f"{module} in {uri} fails at import with this function's environment: "
                                              f"{answer.get('error')}",
                    fix=f"give {logical_id} what the error names (its Environment.Variables), or fix the app"))
                continue
            problems.append(Problem(
                where=logical_id, severity=Severity.WARNING,
                message=f"cannot import {module} from {uri} to compare its jobs with the template: "
                        f"{answer.get('error')}",
                fix=f"make `python -c 'import {module}'` work in {uri} (its dependencies installed)"))
            continue
        roles = ({Role.WORKER} if logical_id in fed else set()) | (
            {Role.SCHEDULER} if routes.get(logical_id, Routes()).schedules else set())
        for app in answer.get("apps", []):
            problems += compare(logical_id, uri, routes.get(logical_id, Routes()), app)
            if Role.WORKER in roles:
                problems += callback_problems(logical_id, properties, document, resolve,
                                              app.get("callback_jobs", []))
            problems += check_environment(logical_id, variables.get(logical_id, []), app, roles=roles,
                                          features=features, sources={**_likely_values(wired, logical_id),
                                                                      **written})
            # Two handler modules of one CodeUri (worker.py, scheduler.py) share the app: key it by its jobs.
            scheduled.setdefault((code_dir, tuple(sorted(app.get("jobs", [])))),
                                 (uri, dict(app.get("schedules", {}))))
    fired = {route.job for function_routes in routes.values() for route in function_routes.schedules}
    for uri, schedules in scheduled.values():
        for job, expression in schedules.items():
            if job not in fired:
                problems.append(Problem(
                    where=f"app in {uri}", severity=Severity.WARNING,
                    message=f"@app.scheduled job {job!r} has no schedule in the template, so it never fires",
                    fix=f"add a ScheduleV2 event with Input '{{\"job\": \"{job}\"}}' and {expression} on the "
                        "scheduler function"))
    return problems


def compare(function: str, uri: str, routes: Routes, app: Mapping[str, Any]) -> list[Problem]:
    """Problems between what the template routes to ``function`` and the jobs of its ``app``."""
    jobs: list[str] = list(app.get("jobs", []))
    schedules: Mapping[str, str] = app.get("schedules", {})
    declared = ", ".join(jobs) or "none"
    problems: list[Problem] = []
    for route in routes.schedules:
        where = f"{function} schedule {route.source}"
        if route.job not in jobs:
            problems.append(Problem(
                where=where, message=f"fires job {route.job!r}, which the app in {uri} does not declare (it "
                                     f"declares: {declared})",
                fix="correct the job in the schedule's Input, or declare it with @app.scheduled"))
        elif route.job not in schedules:
            problems.append(Problem(
                where=where, message=f"fires job {route.job!r}, which is declared with @app.job, not "
                                     "@app.scheduled, so the scheduler has no period or lease for it",
                fix=f"declare {route.job!r} with @app.scheduled(..., schedule={route.expression!r})"))
        elif route.expression is not None and _normal(route.expression) != _normal(schedules[route.job]):
            problems.append(Problem(
                where=where, message=f"fires {route.job!r} on {route.expression}, but @app.scheduled says "
                                     f"{schedules[route.job]}",
                fix="make the two expressions the same (the decorator's decides the period of each run)"))
    for source, job in routes.filtered_jobs:
        if job not in jobs:
            problems.append(Problem(
                where=f"{function} {source}", message=f"its filter selects job {job!r}, which the app in {uri} "
                                                      f"does not declare (it declares: {declared})",
                fix="correct the job name in FilterCriteria, or declare the job"))
    return problems


def collect_routes(document: Mapping[str, Any], resolve: Any) -> dict[str, Routes]:
    """Per function logical id: the schedules that fire a job and the jobs its SQS filters select."""
    routes: dict[str, Routes] = {}
    resources = _mapping(document.get("Resources"))
    for logical_id, properties, _ in serverless_functions(document):
        for name, event in _mapping(properties.get("Events")).items():
            if not isinstance(event, Mapping):
                continue
            props = _mapping(event.get("Properties"))
            kind = event.get("Type")
            if kind in ("Schedule", "ScheduleV2"):
                expression = props.get("ScheduleExpression" if kind == "ScheduleV2" else "Schedule")
                _add_schedule(routes, logical_id, name, props.get("Input"), expression, resolve)
            elif kind == "SQS":
                for job in _filtered_jobs(props.get("FilterCriteria")):
                    routes.setdefault(logical_id, Routes()).filtered_jobs.append((f"event {name}", job))
    for logical_id, resource in resources.items():
        if not isinstance(resource, Mapping):
            continue
        props = _mapping(resource.get("Properties"))
        kind = resource.get("Type")
        if kind == "AWS::Scheduler::Schedule":
            target = _mapping(props.get("Target"))
            function = _target_id(target.get("Arn"))
            if function:
                _add_schedule(routes, function, logical_id, target.get("Input"), props.get("ScheduleExpression"),
                              resolve)
        elif kind == "AWS::Events::Rule" and "ScheduleExpression" in props:
            for target in props.get("Targets") or []:
                function = _target_id(_mapping(target).get("Arn"))
                if function:
                    _add_schedule(routes, function, logical_id, _mapping(target).get("Input"),
                                  props.get("ScheduleExpression"), resolve)
        elif kind == "AWS::Lambda::EventSourceMapping":
            function = _target_id(props.get("FunctionName"))
            for job in _filtered_jobs(props.get("FilterCriteria")):
                if function:
                    routes.setdefault(function, Routes()).filtered_jobs.append((f"mapping {logical_id}", job))
    return routes


def _add_schedule(routes: dict[str, Routes], function: str, source: str, raw_input: Any, expression: Any,
                  resolve: Any) -> None:
    text = resolve.scalar(raw_input) if resolve is not None else raw_input
    if not isinstance(text, str):
        return
    try:
        payload = json.loads(text)
    except ValueError:
        return
    job = payload.get("job") if isinstance(payload, dict) else None
    if isinstance(job, str):
        resolved = resolve.scalar(expression) if resolve is not None else expression
        routes.setdefault(function, Routes()).schedules.append(
            ScheduledRoute(source=source, job=job, expression=resolved if isinstance(resolved, str) else None))


def _filtered_jobs(criteria: Any) -> Iterator[str]:
    """Job names an SQS filter pattern selects: ``body.job`` or the ``sqsjobs.job`` attribute."""
    for entry in _mapping(criteria).get("Filters") or []:
        raw = _mapping(entry).get("Pattern")
        try:
            pattern = json.loads(raw) if isinstance(raw, str) else None
        except ValueError:
            continue
        if not isinstance(pattern, dict):
            continue
        candidates = [_mapping(pattern.get("body")).get("job"),
                      _mapping(_mapping(pattern.get("messageAttributes")).get("sqsjobs.job")).get("stringValue")]
        for values in candidates:
            for value in values if isinstance(values, list) else []:
                if isinstance(value, str):
                    yield value


def _target_id(value: Any) -> str | None:
    if isinstance(value, Mapping):
        if set(value) == {"Ref"} and isinstance(value["Ref"], str):
            return value["Ref"]
        att = value.get("Fn::GetAtt")
        if isinstance(att, str):
            att = att.split(".", 1)
        if isinstance(att, list) and len(att) == 2 and att[1] == "Arn" and isinstance(att[0], str):
            return att[0]
    return None


def _environment(wired: Any, logical_id: str) -> dict[str, str]:
    """The function's environment (Globals merged) as the child gets it.

    Parameters and mappings are resolved; a reference to a resource stands for what a deployment gives, in
    the shape sqsjobs' settings check (a queue URL, a role ARN, a name), so the app is built as in Lambda.
    """
    found: dict[str, str] = {}
    for name, value in wired.functions[logical_id].environment.items():
        resolved = wired.resolve.scalar(value)
        if isinstance(resolved, str | int | float) and not isinstance(resolved, bool):
            found[name] = str(resolved)
        else:
            stand_in = _stand_in(wired, value)
            if stand_in is not None:
                found[name] = stand_in
    return found


def _stand_in(wired: Any, value: Any) -> str | None:
    """What ``!Ref X`` / ``!GetAtt X.Arn`` of a resource of the template will be, in its shape."""
    if not isinstance(value, Mapping) or len(value) != 1:
        return None
    region = os.environ.get(ENV_AWS_DEFAULT_REGION, "us-east-1")
    if set(value) == {"Ref"}:
        target, attribute = value["Ref"], None
    elif set(value) == {"Fn::GetAtt"}:
        att = value["Fn::GetAtt"]
        parts = att.split(".", 1) if isinstance(att, str) else list(att)
        if len(parts) != 2:
            return None
        target, attribute = parts
    else:
        return None
    kind = _mapping(wired.resources.get(target)).get("Type")
    if not isinstance(target, str) or not isinstance(kind, str):
        return None
    if attribute is None:
        return f"https://sqs.{region}.amazonaws.com/123456789012/{target}" if kind == "AWS::SQS::Queue" else target
    if attribute == "Arn":
        service = kind.split("::")[1].lower() if kind.count("::") == 2 else "unknown"
        if service == "iam":
            return f"arn:aws:iam::123456789012:role/{target}"
        return f"arn:aws:{service}:{region}:123456789012:{target}"
    return target


def _describe(code_dir: Path, module: str, environment: Mapping[str, str]) -> dict[str, Any]:
    env = {**os.environ, **environment}
    env.setdefault(ENV_AWS_DEFAULT_REGION, "us-east-1")  # an import that builds a client needs one
    try:
        done = subprocess.run([sys.executable, "-m", "sqsjobs.validation.inspect_app", str(code_dir), module],
                              cwd=code_dir, env=env, capture_output=True, text=True, timeout=IMPORT_TIMEOUT,
                              check=False)
    except subprocess.TimeoutExpired:
        return {"ok": False, "error": f"importing it took over {IMPORT_TIMEOUT} s"}
    lines = done.stdout.strip().splitlines()
    try:
        answer: dict[str, Any] = json.loads(lines[-1])
    except (IndexError, ValueError):
        answer = {"ok": False, "error": (done.stderr.strip().splitlines() or ["the child printed nothing"])[-1]}
    return answer


def _relays_a_table(wired: Any) -> bool:
    """Whether a DynamoDB table's stream feeds a function that sends jobs: the outbox's relay."""
    streams: list[tuple[Any, Any]] = []  # (stream ARN, function id): mappings, and SAM DynamoDB events
    for logical_id, resource in wired.resources.items():
        props = _mapping(resource.get("Properties"))
        if resource.get("Type") == "AWS::Lambda::EventSourceMapping":
            streams.append((props.get("EventSourceArn"), _target_id(props.get("FunctionName"))))
        for event in _mapping(props.get("Events")).values():
            if isinstance(event, Mapping) and event.get("Type") == "DynamoDB":
                streams.append((_mapping(event.get("Properties")).get("Stream"), logical_id))
    for source, function in streams:
        att = _mapping(source).get("Fn::GetAtt")
        parts = att.split(".", 1) if isinstance(att, str) else att
        if not (isinstance(parts, list) and len(parts) == 2 and parts[1] == "StreamArn"):
            continue
        table = _mapping(wired.resources.get(parts[0])).get("Type") == "AWS::DynamoDB::Table"
        if table and function in wired.functions and ENV_QUEUE_URL in wired.functions[function].environment:
            return True
    return False


def _likely_values(wired: Any, function_id: str) -> dict[str, str]:
    """What a function's missing variables most likely are, from the template alone (for a fix)."""
    found: dict[str, str] = {}
    fed = [s.queue_id for s in wired.sources if s.function_id == function_id and s.queue_id]
    if fed:
        found[ENV_QUEUE_URL] = f"!Ref {fed[0]}"
        dead = wired.queues[fed[0]].dead_letter_id
        if dead:
            found[ENV_DLQ_URL] = f"!Ref {dead}"
    by_type: dict[str, list[str]] = {}
    for logical_id, resource in wired.resources.items():
        kind = resource.get("Type")
        if kind == "AWS::DynamoDB::Table" and "StreamSpecification" in _mapping(resource.get("Properties")):
            continue  # a streamed table is an outbox (or the app's own), not the idempotency table
        by_type.setdefault(str(kind), []).append(logical_id)
    for variable, kind in ((ENV_TABLE, "AWS::DynamoDB::Table"), (ENV_SCHEDULE_GROUP, "AWS::Scheduler::ScheduleGroup")):
        if len(by_type.get(kind, [])) == 1:
            found[variable] = f"!Ref {by_type[kind][0]}"
    return found


def _written_values(wired: Any) -> dict[str, str]:
    """Per variable, how a function of the template sets it when that is a plain reference (for a fix)."""
    found: dict[str, str] = {}
    for function in wired.functions.values():
        for name, value in function.environment.items():
            if isinstance(value, Mapping) and set(value) == {"Ref"}:
                found.setdefault(name, f"!Ref {value['Ref']}")
            elif isinstance(value, Mapping) and set(value) == {"Fn::GetAtt"}:
                att = value["Fn::GetAtt"]
                found.setdefault(name, f"!GetAtt {att if isinstance(att, str) else '.'.join(map(str, att))}")
    return found


def _normal(expression: str) -> str:
    return " ".join(expression.split())


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}
