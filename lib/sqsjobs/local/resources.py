"""Per-type creation of template resources on the moto server, and what Ref/GetAtt return.

Each method creates one resource type through its service API (CreateQueue,
CreateTable, PutMetricAlarm, ...) and records the values intrinsics resolve
to. Functions, event source mappings and schedules are not created in moto:
they are recorded for the local runners. Used by :func:`sqsjobs.local.deploy.deploy`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from sqsjobs.local.aws import ACCOUNT_ID, Clients
from sqsjobs.local.errors import TemplateError
from sqsjobs.local.filters import FilterError, beyond_lambda, parse_filters
from sqsjobs.local.intrinsics import Resolver
from sqsjobs.local.model import (
    AlarmSpec,
    Deployment,
    FunctionSpec,
    QueueInfo,
    Schedule,
    SqsMapping,
    StreamMapping,
)
from sqsjobs.local.template import Template

# Types whose effect (permissions, log retention, versions) is meaningless on
# a laptop: accepted and listed, so the developer sees they were not emulated.
NO_LOCAL_EFFECT = {
    "AWS::IAM::Role": "IAM is not enforced locally",
    "AWS::IAM::Policy": "IAM is not enforced locally",
    "AWS::IAM::ManagedPolicy": "IAM is not enforced locally",
    "AWS::Lambda::Permission": "invocation permissions are not enforced locally",
    "AWS::SQS::QueuePolicy": "queue policies are not enforced locally",
    "AWS::SNS::TopicPolicy": "topic policies are not enforced locally",
    "AWS::Logs::LogGroup": "function logs go to the terminal",
    "AWS::Lambda::Version": "the local cloud always runs the source tree",
    "AWS::Lambda::Alias": "the local cloud always runs the source tree",
    "AWS::Lambda::EventInvokeConfig": "asynchronous invocation is not emulated",
    "AWS::Lambda::LayerVersion": "the functions import this environment's packages",
}

#: of those, the ones that name a function: a Ref to them is a Ref to it (mappings may target an alias)
FUNCTION_POINTERS = ("AWS::Lambda::Version", "AWS::Lambda::Alias")

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TABLE_KEYS = (
    "AttributeDefinitions",
    "KeySchema",
    "BillingMode",
    "ProvisionedThroughput",
    "GlobalSecondaryIndexes",
    "LocalSecondaryIndexes",
    "Tags",
)


class ResourceCreator:
    """Per-type creation; each method records what Ref and GetAtt return."""

    def __init__(self, template: Template, clients: Clients, resolver: Resolver, deployment: Deployment) -> None:
        self.template = template
        self.clients = clients
        self.r = resolver
        self.d = deployment
        self.region = clients.region
        self._pending_mappings: list[tuple[str, dict[str, Any]]] = []
        self._pending_schedules: list[tuple[str, str, str, Any, bool]] = []
        self._inputs: dict[tuple[str, str], tuple[str | None, str]] = {}
        self._handlers: dict[str, Callable[[str, dict[str, Any]], None]] = {
            "AWS::SQS::Queue": self.queue,
            "AWS::DynamoDB::Table": self.table,
            "AWS::SNS::Topic": self.topic,
            "AWS::SNS::Subscription": self.subscription,
            "AWS::CloudWatch::Alarm": self.alarm,
            "AWS::CloudWatch::Dashboard": self.dashboard,
            "AWS::Lambda::Function": self.function,
            "AWS::Lambda::EventSourceMapping": self.event_source_mapping,
            "AWS::Events::Rule": self.rule,
            "AWS::Scheduler::Schedule": self.schedule,
            "AWS::Scheduler::ScheduleGroup": self.schedule_group,
            "AWS::SES::EmailIdentity": self.email_identity,
        }

    def name(self, logical_id: str, given: Any) -> str:
        return str(given) if given else f"{self.d.stack_name}-{logical_id}"

    def arn(self, service: str, resource: str) -> str:
        return f"arn:aws:{service}:{self.region}:{ACCOUNT_ID}:{resource}"

    def placeholder_arn(self, kind: str, name: str) -> str:
        """The ARN a resource with no local effect would have; IAM's are global (no region in them).

        Example:
            >>> from types import SimpleNamespace
            >>> creator = ResourceCreator(None, SimpleNamespace(region="eu-west-1"), None, None)
            >>> creator.placeholder_arn("AWS::IAM::Role", "delivery")
            'arn:aws:iam::123456789012:role/delivery'
            >>> creator.placeholder_arn("AWS::Logs::LogGroup", "/aws/lambda/worker")
            'arn:aws:logs:eu-west-1:123456789012:log-group:/aws/lambda/worker'
            >>> creator.placeholder_arn("AWS::Lambda::LayerVersion", "jobs-SqsjobsLayer")
            'arn:aws:lambda:eu-west-1:123456789012:layer:jobs-SqsjobsLayer:1'
        """
        if kind == "AWS::Logs::LogGroup":
            return self.arn("logs", f"log-group:{name}")
        if kind == "AWS::Lambda::LayerVersion":
            return self.arn("lambda", f"layer:{name}:1")
        resource = "policy" if kind in ("AWS::IAM::ManagedPolicy", "AWS::IAM::Policy") else "role"
        return f"arn:aws:iam::{ACCOUNT_ID}:{resource}/{name}"

    def create(self, logical_id: str, resource: dict[str, Any]) -> None:
        kind = resource.get("Type", "?")
        handler = self._handlers.get(kind)
        if handler is None:
            if kind in NO_LOCAL_EFFECT:
                self.d.without_local_effect[logical_id] = f"{kind}: {NO_LOCAL_EFFECT[kind]}"
                # Others may still Ref them (a role ARN, say): give them a name.
                arn = self.placeholder_arn(kind, self.name(logical_id, None))
                # A layer version's Ref is its ARN; the others' their name.
                self.r.refs[logical_id] = arn if kind == "AWS::Lambda::LayerVersion" else self.name(logical_id, None)
                self.r.attributes[(logical_id, "Arn")] = arn
                if kind in FUNCTION_POINTERS:
                    self._points_at_function(logical_id, self.r.resolve(resource.get("Properties", {})))
            else:
                self.d.warnings.append(
                    f"{logical_id} ({kind}) cannot be emulated locally and was NOT created"
                )
            return
        properties = self.r.resolve(resource.get("Properties", {}))
        handler(logical_id, properties)

    # -- storage and messaging -------------------------------------------------

    def queue(self, logical_id: str, p: dict[str, Any]) -> None:
        fifo = str(p.get("FifoQueue", "false")).lower() == "true"
        name = self.name(logical_id, p.get("QueueName"))
        if fifo and not name.endswith(".fifo"):
            name += ".fifo"
        attributes: dict[str, str] = {}
        for key in (
            "VisibilityTimeout",
            "MessageRetentionPeriod",
            "DelaySeconds",
            "MaximumMessageSize",
            "ReceiveMessageWaitTimeSeconds",
            "ContentBasedDeduplication",
            "DeduplicationScope",
            "FifoThroughputLimit",
        ):
            if key in p:
                attributes[key] = str(p[key]).lower() if isinstance(p[key], bool) else str(p[key])
        if fifo:
            attributes["FifoQueue"] = "true"
        dead_letter_arn, max_receive = "", 0
        allow_policy: dict[str, Any] | None = None
        arn = self.arn("sqs", name)
        for key in ("RedrivePolicy", "RedriveAllowPolicy"):
            if key in p:
                policy = json.loads(p[key]) if isinstance(p[key], str) else dict(p[key])
                if key == "RedrivePolicy":
                    dead_letter_arn = str(policy["deadLetterTargetArn"])
                    max_receive = int(policy["maxReceiveCount"])
                    policy["maxReceiveCount"] = max_receive
                    self._check_redrive_allowed(logical_id, arn, dead_letter_arn)
                else:
                    allow_policy = policy
                attributes[key] = json.dumps(policy)
        tags = {t["Key"]: str(t["Value"]) for t in p.get("Tags", [])}
        sqs = self.clients.get("sqs")
        try:
            url = sqs.create_queue(QueueName=name, Attributes=attributes, tags=tags)["QueueUrl"]
        except sqs.exceptions.QueueNameExists:  # resumed (sqsjobs.local.snapshot) and the template changed it
            url = sqs.get_queue_url(QueueName=name)["QueueUrl"]
            sqs.set_queue_attributes(QueueUrl=url, Attributes={k: v for k, v in attributes.items()
                                                               if k != "FifoQueue"})
        self.d.queues[logical_id] = QueueInfo(
            logical_id=logical_id, url=url, arn=arn, name=name,
            dead_letter_arn=dead_letter_arn, max_receive_count=max_receive, redrive_allow_policy=allow_policy,
        )
        self.r.refs[logical_id] = url
        self.r.attributes.update(
            {(logical_id, "Arn"): arn, (logical_id, "QueueName"): name, (logical_id, "QueueUrl"): url}
        )

    def _check_redrive_allowed(self, logical_id: str, arn: str, dead_letter_arn: str) -> None:
        """Refuse a redrive policy the DLQ's ``RedriveAllowPolicy`` excludes, as SQS does (moto does not)."""
        dlq = self.d.queue_by_arn(dead_letter_arn)
        if dlq is not None and not dlq.admits_dead_letters_from(arn):
            raise TemplateError(
                f"{logical_id}: SQS refuses its RedrivePolicy: {dlq.logical_id}'s RedriveAllowPolicy "
                f"{json.dumps(dlq.redrive_allow_policy)} does not admit {arn}"
            )

    def table(self, logical_id: str, p: dict[str, Any]) -> None:
        name = self.name(logical_id, p.get("TableName"))
        request: dict[str, Any] = {k: p[k] for k in _TABLE_KEYS if k in p}
        for index in request.get("GlobalSecondaryIndexes", []):
            index.pop("ContributorInsightsSpecification", None)
        request.setdefault("BillingMode", "PAY_PER_REQUEST")
        stream = p.get("StreamSpecification")
        if stream:
            request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": stream["StreamViewType"]}
        dynamodb = self.clients.get("dynamodb")
        try:
            description = dynamodb.create_table(TableName=name, **request)["TableDescription"]
        except dynamodb.exceptions.ResourceInUseException:  # resumed (sqsjobs.local.snapshot): kept with its items
            description = dynamodb.describe_table(TableName=name)["Table"]
            if description.get("KeySchema") != request.get("KeySchema"):
                self.d.warnings.append(f"{logical_id}: the resumed table {name} keeps its old key schema; "
                                       "`sqsjobs local up --fresh` creates it as the template says")
        ttl = p.get("TimeToLiveSpecification")
        if (ttl and str(ttl.get("Enabled", "false")).lower() == "true"
                and dynamodb.describe_time_to_live(TableName=name)["TimeToLiveDescription"].get(
                    "TimeToLiveStatus") != "ENABLED"):  # a resumed table has it already
            dynamodb.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": ttl["AttributeName"]},
            )
        self.d.tables[logical_id] = name
        self.r.refs[logical_id] = name
        self.r.attributes[(logical_id, "Arn")] = description["TableArn"]
        if "LatestStreamArn" in description:
            self.r.attributes[(logical_id, "StreamArn")] = description["LatestStreamArn"]

    def topic(self, logical_id: str, p: dict[str, Any]) -> None:
        name = self.name(logical_id, p.get("TopicName"))
        attributes = {k: str(p[k]) for k in ("DisplayName", "FifoTopic", "ContentBasedDeduplication") if k in p}
        sns = self.clients.get("sns")
        arn = sns.create_topic(Name=name, Attributes=attributes)["TopicArn"]
        for subscription in p.get("Subscription", []):
            sns.subscribe(TopicArn=arn, Protocol=subscription["Protocol"], Endpoint=subscription["Endpoint"])
        self.d.topics[logical_id] = arn
        self.r.refs[logical_id] = arn
        self.r.attributes.update({(logical_id, "TopicArn"): arn, (logical_id, "TopicName"): name})

    def subscription(self, logical_id: str, p: dict[str, Any]) -> None:
        sns = self.clients.get("sns")
        arn = sns.subscribe(TopicArn=p["TopicArn"], Protocol=p["Protocol"], Endpoint=p["Endpoint"])[
            "SubscriptionArn"
        ]
        self.r.refs[logical_id] = arn

    def email_identity(self, logical_id: str, p: dict[str, Any]) -> None:
        identity = str(p["EmailIdentity"])
        self._verify_identity(identity)
        self.r.refs[logical_id] = identity

    def _verify_identity(self, identity: str) -> None:
        ses = self.clients.get("ses")
        if "@" in identity:
            ses.verify_email_identity(EmailAddress=identity)
        else:
            ses.verify_domain_identity(Domain=identity)

    # -- observability ---------------------------------------------------------

    def alarm(self, logical_id: str, p: dict[str, Any]) -> None:
        name = self.name(logical_id, p.get("AlarmName"))
        request = {k: v for k, v in p.items() if k not in ("AlarmName",)}
        if "Threshold" in request:
            request["Threshold"] = float(request["Threshold"])
        for key in ("Period", "EvaluationPeriods", "DatapointsToAlarm"):
            if key in request:
                request[key] = int(request[key])
        for query in request.get("Metrics", []):
            if "MetricStat" in query:
                query["MetricStat"]["Period"] = int(query["MetricStat"]["Period"])
        self.clients.get("cloudwatch").put_metric_alarm(AlarmName=name, **request)
        severity = self._severity(name, p)
        self.d.alarms.append(AlarmSpec(logical_id=logical_id, name=name, properties=request, severity=severity))
        self.r.refs[logical_id] = name
        self.r.attributes[(logical_id, "Arn")] = self.arn("cloudwatch", f"alarm:{name}")

    def _severity(self, name: str, p: dict[str, Any]) -> str:
        """PAGE or WARN: the alarm's own words first, then its topics' names."""
        topics = {arn: lid for lid, arn in self.d.topics.items()}
        own = f"{name} {p.get('AlarmDescription', '')}".lower()
        actions = " ".join(topics.get(str(a), str(a)) for a in p.get("AlarmActions", [])).lower()
        # The topics first: a page topic pages whatever the description says.
        for text in (actions, own):
            if "page" in text:
                return "PAGE"
            if "warn" in text:
                return "WARN"
        return "WARN"

    def dashboard(self, logical_id: str, p: dict[str, Any]) -> None:
        name = self.name(logical_id, p.get("DashboardName"))
        body = p["DashboardBody"]
        self.clients.get("cloudwatch").put_dashboard(
            DashboardName=name, DashboardBody=body if isinstance(body, str) else json.dumps(body)
        )
        self.d.dashboards.append(name)
        self.r.refs[logical_id] = name

    # -- compute ---------------------------------------------------------------

    def function(self, logical_id: str, p: dict[str, Any]) -> None:
        name = self.name(logical_id, p.get("FunctionName"))
        arn = self.arn("lambda", f"function:{name}")
        self.r.refs[logical_id] = name
        self.r.attributes[(logical_id, "Arn")] = arn
        code_dir = self.template.code_dirs.get(logical_id)
        if code_dir is None:
            self.d.warnings.append(
                f"{logical_id} (AWS::Lambda::Function) has no local CodeUri; it will NOT run locally"
            )
            return
        if not code_dir.is_dir():
            self.d.warnings.append(f"{logical_id}: CodeUri {code_dir} is not a directory; it will NOT run")
            return
        runtime = str(p.get("Runtime", "python3.11"))
        if not runtime.startswith("python"):
            self.d.warnings.append(f"{logical_id}: runtime {runtime} cannot run locally; it will NOT run")
            return
        environment = {k: _env_string(v) for k, v in (p.get("Environment") or {}).get("Variables", {}).items()}
        for value in environment.values():
            if _EMAIL.match(value):
                # moto rejects mail from unverified senders; on AWS the
                # identity is verified once per account, outside the stack.
                self._verify_identity(value)
        self.d.functions[logical_id] = FunctionSpec(
            logical_id=logical_id,
            name=name,
            handler=str(p["Handler"]),
            code_dir=code_dir,
            timeout=int(p.get("Timeout", 3)),
            memory_mb=int(p.get("MemorySize", 128)),
            environment=environment,
            arn=arn,
        )

    def _points_at_function(self, logical_id: str, p: dict[str, Any]) -> None:
        """A version or alias (``AutoPublishAlias``) stands for its function: the source tree runs either way."""
        name = str(p.get("FunctionName", ""))
        self.r.refs[logical_id] = name
        self.r.attributes[(logical_id, "Arn")] = self.arn("lambda", f"function:{name}")
        self.r.attributes[(logical_id, "Version")] = "1"

    def event_source_mapping(self, logical_id: str, p: dict[str, Any]) -> None:
        self._pending_mappings.append((logical_id, p))
        self.r.refs[logical_id] = f"{self.d.stack_name}-{logical_id}"

    def rule(self, logical_id: str, p: dict[str, Any]) -> None:
        name = self.name(logical_id, p.get("Name"))
        self.r.refs[logical_id] = name
        self.r.attributes[(logical_id, "Arn")] = self.arn("events", f"rule/{name}")
        if "ScheduleExpression" not in p:
            self.d.warnings.append(f"{logical_id} (AWS::Events::Rule with an EventPattern) is NOT emulated")
            return
        enabled = str(p.get("State", "ENABLED")).upper() == "ENABLED"
        for target in p.get("Targets", []):
            if "InputTransformer" in target or "InputPath" in target:
                self.d.warnings.append(f"{logical_id}: InputTransformer/InputPath is NOT emulated; "
                                       "the target gets the Scheduled Event")
            self._pending_schedules.append((logical_id, name, p["ScheduleExpression"], target["Arn"], enabled))
            self._inputs[(logical_id, str(target["Arn"]))] = (target.get("Input"), "UTC")

    def schedule(self, logical_id: str, p: dict[str, Any]) -> None:
        name = self.name(logical_id, p.get("Name"))
        self.r.refs[logical_id] = name
        self.r.attributes[(logical_id, "Arn")] = self.arn("scheduler", f"schedule/default/{name}")
        target = p["Target"]
        enabled = str(p.get("State", "ENABLED")).upper() == "ENABLED"
        timezone = str(p.get("ScheduleExpressionTimezone", "UTC"))
        self._pending_schedules.append((logical_id, name, p["ScheduleExpression"], target["Arn"], enabled))
        # EventBridge Scheduler sends "{}" when a target has no Input.
        self._inputs[(logical_id, str(target["Arn"]))] = (target.get("Input", "{}"), timezone)

    def schedule_group(self, logical_id: str, p: dict[str, Any]) -> None:
        """A group apps create one-time schedules in (delayed jobs); ``local up`` fires them at their time."""
        name = self.name(logical_id, p.get("Name"))
        scheduler = self.clients.get("scheduler")
        try:  # resumed (sqsjobs.local.snapshot): the group is there with its pending schedules; moto would
            arn = scheduler.get_schedule_group(Name=name)["Arn"]  # replace it (and lose them) on a second create
        except scheduler.exceptions.ResourceNotFoundException:
            arn = scheduler.create_schedule_group(Name=name)["ScheduleGroupArn"]
        self.d.schedule_groups[logical_id] = name
        self.r.refs[logical_id] = name
        self.r.attributes[(logical_id, "Arn")] = arn

    def link_functions(self) -> None:
        """Attach mappings and schedules to functions, now that all exist."""
        by_name = {f.name: f for f in self.d.functions.values()}
        by_arn = {f.arn: f for f in self.d.functions.values()}
        for logical_id, p in self._pending_mappings:
            function = by_name.get(str(p["FunctionName"])) or by_arn.get(str(p["FunctionName"]))
            if function is None:
                self.d.warnings.append(f"{logical_id}: its function does not run locally; mapping NOT emulated")
                continue
            self._mapping(logical_id, p, function)
        for logical_id, name, expression, target_arn, enabled in self._pending_schedules:
            function = by_arn.get(str(target_arn))
            if function is None:
                self.d.warnings.append(f"{logical_id}: target {target_arn} is not a local function; NOT emulated")
                continue
            raw_input, timezone = self._inputs[(logical_id, str(target_arn))]
            self.d.schedules.append(
                Schedule(
                    logical_id=logical_id, name=name, expression=str(expression), function=function.logical_id,
                    payload=_json_or_text(raw_input), enabled=enabled, raw_input=raw_input, timezone=timezone,
                )
            )

    def _on_failure_queue(self, logical_id: str, p: dict[str, Any]) -> str:
        destination = str(((p.get("DestinationConfig") or {}).get("OnFailure") or {}).get("Destination", ""))
        if not destination:
            return ""
        queue = self.d.queue_by_arn(destination)
        if queue is None:
            self.d.warnings.append(f"{logical_id}: on-failure destination {destination} is NOT emulated (SQS only)")
            return ""
        return queue.url

    def _filters(self, logical_id: str, criteria: Any) -> tuple[dict[str, Any], ...]:
        """The mapping's checked patterns; operators Lambda's documentation does not list are warned about."""
        try:
            patterns = parse_filters(criteria)
        except FilterError as error:
            raise FilterError(f"{logical_id}: FilterCriteria: {error} (Lambda would refuse the mapping)") from None
        used = sorted({name for pattern in patterns for name in beyond_lambda(pattern)})
        if used:
            self.d.warnings.append(f"{logical_id}: FilterCriteria uses {', '.join(used)}, which Lambda's event "
                                   "filtering documentation does not list; matched locally as EventBridge does, "
                                   "but AWS may refuse the mapping")
        return tuple(patterns)

    def _mapping(self, logical_id: str, p: dict[str, Any], function: FunctionSpec) -> None:
        source = str(p["EventSourceArn"])
        enabled = str(p.get("Enabled", "true")).lower() == "true"
        report = "ReportBatchItemFailures" in p.get("FunctionResponseTypes", [])
        window = float(p.get("MaximumBatchingWindowInSeconds", 0))
        filters = self._filters(logical_id, p.get("FilterCriteria"))
        queue = self.d.queue_by_arn(source)
        if queue is not None:
            scaling = p.get("ScalingConfig") or {}
            self.d.sqs_mappings.append(
                SqsMapping(
                    logical_id=logical_id, function=function.logical_id, queue_url=queue.url,
                    queue_arn=queue.arn, batch_size=int(p.get("BatchSize", 10)), batching_window_s=window,
                    max_concurrency=int(scaling.get("MaximumConcurrency", 5)),
                    report_batch_item_failures=report, enabled=enabled, filters=filters,
                )
            )
        elif ":dynamodb:" in source and "/stream/" in source:
            self.d.stream_mappings.append(
                StreamMapping(
                    logical_id=logical_id, function=function.logical_id, stream_arn=source,
                    batch_size=int(p.get("BatchSize", 100)), batching_window_s=window,
                    starting_position=str(p.get("StartingPosition", "LATEST")),
                    report_batch_item_failures=report,
                    max_retry_attempts=int(p.get("MaximumRetryAttempts", -1)),
                    bisect_on_error=str(p.get("BisectBatchOnFunctionError", "false")).lower() == "true",
                    enabled=enabled, filters=filters, on_failure_queue_url=self._on_failure_queue(logical_id, p),
                )
            )
        else:
            self.d.warnings.append(f"{logical_id}: event source {source} is NOT emulated")


def _json_or_text(raw: str | None) -> Any:
    if raw is None:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return raw  # placeholders can make Input invalid JSON until they are filled in


def _env_string(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)
