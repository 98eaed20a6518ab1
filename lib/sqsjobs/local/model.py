"""What a deployed template is locally: functions and the things that invoke them.

Plain frozen values produced by :mod:`sqsjobs.local.deploy` and consumed by the
pollers, the scheduler and the alarm evaluator.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True, kw_only=True)
class FunctionSpec:
    """A Lambda function the local cloud runs in worker processes.

    Example:
        >>> FunctionSpec(logical_id="Worker", name="sqsjobs-local-Worker", handler="worker.handler",
        ...              code_dir=Path("handlers"), timeout=30).timeout
        30
    """

    logical_id: str
    name: str
    handler: str
    code_dir: Path
    timeout: int = 3
    memory_mb: int = 128
    environment: dict[str, str] = field(default_factory=dict)
    arn: str = ""


@dataclass(frozen=True, kw_only=True)
class SqsMapping:
    """An SQS event source mapping, with Lambda's defaults.

    Example:
        >>> SqsMapping(logical_id="M", function="Worker", queue_url="u", queue_arn="a").batch_size
        10
    """

    logical_id: str
    function: str
    queue_url: str
    queue_arn: str
    batch_size: int = 10
    batching_window_s: float = 0.0
    max_concurrency: int = 5
    report_batch_item_failures: bool = False
    enabled: bool = True
    filters: tuple[dict[str, Any], ...] = ()


@dataclass(frozen=True, kw_only=True)
class StreamMapping:
    """A DynamoDB stream event source mapping, with Lambda's defaults.

    Example:
        >>> StreamMapping(logical_id="M", function="Relay", stream_arn="s").max_retry_attempts
        -1
    """

    logical_id: str
    function: str
    stream_arn: str
    batch_size: int = 100
    batching_window_s: float = 0.0
    starting_position: str = "LATEST"
    report_batch_item_failures: bool = False
    max_retry_attempts: int = -1
    bisect_on_error: bool = False
    enabled: bool = True
    filters: tuple[dict[str, Any], ...] = ()
    #: the on-failure destination's queue URL (SQS destinations only)
    on_failure_queue_url: str = ""


@dataclass(frozen=True, kw_only=True)
class Schedule:
    """A scheduled invocation (EventBridge rule or Scheduler schedule).

    Example:
        >>> Schedule(logical_id="R", name="nightly", expression="cron(0 2 * * ? *)", function="F").timezone
        'UTC'
    """

    logical_id: str
    name: str
    expression: str
    function: str
    payload: Any = None
    enabled: bool = True
    #: the Input as written, for EventBridge Scheduler's ``<aws.scheduler.*>`` placeholders
    raw_input: str | None = None
    timezone: str = "UTC"


@dataclass(frozen=True, kw_only=True)
class AlarmSpec:
    """A CloudWatch alarm as written in the template, resolved to local names.

    Example:
        >>> AlarmSpec(logical_id="Dlq", name="stack-Dlq", properties={"Threshold": 0}).severity
        'WARN'
    """

    logical_id: str
    name: str
    properties: dict[str, Any]
    severity: str = "WARN"


@dataclass(frozen=True, kw_only=True)
class QueueInfo:
    """A created queue: its URL, ARN, name, maxReceiveCount (0 without a DLQ) and redrive allow policy.

    Example:
        >>> QueueInfo(logical_id="Q", url="u", arn="a", name="q").max_receive_count
        0
    """

    logical_id: str
    url: str
    arn: str
    name: str
    dead_letter_arn: str = ""
    max_receive_count: int = 0
    #: the ``RedriveAllowPolicy`` as a dict (moto keeps none, so the local cloud enforces it at deploy)
    redrive_allow_policy: dict[str, Any] | None = None

    def admits_dead_letters_from(self, source_arn: str) -> bool:
        """Whether SQS would let ``source_arn`` name this queue as its DLQ.

        Example:
            >>> dlq = QueueInfo(logical_id="D", url="u", arn="d", name="d", redrive_allow_policy={
            ...     "redrivePermission": "byQueue", "sourceQueueArns": ["arn:q"]})
            >>> dlq.admits_dead_letters_from("arn:q"), dlq.admits_dead_letters_from("arn:other")
            (True, False)
        """
        policy = self.redrive_allow_policy or {"redrivePermission": "allowAll"}
        permission = str(policy.get("redrivePermission", "allowAll"))
        if permission == "byQueue":
            sources = policy.get("sourceQueueArns") or []
            return isinstance(sources, list) and source_arn in sources
        return permission != "denyAll"


@dataclass(kw_only=True)
class Deployment:
    """Everything ``deploy`` created or will run, by logical id.

    Example:
        >>> d = Deployment(stack_name="s", queues={"Q": QueueInfo(logical_id="Q", url="u", arn="a", name="q")})
        >>> d.queue_by_url("u").logical_id
        'Q'
    """

    stack_name: str
    queues: dict[str, QueueInfo] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)
    topics: dict[str, str] = field(default_factory=dict)
    functions: dict[str, FunctionSpec] = field(default_factory=dict)
    sqs_mappings: list[SqsMapping] = field(default_factory=list)
    stream_mappings: list[StreamMapping] = field(default_factory=list)
    schedules: list[Schedule] = field(default_factory=list)
    #: EventBridge Scheduler schedule groups (logical id -> name): where apps create one-time schedules
    schedule_groups: dict[str, str] = field(default_factory=dict)
    alarms: list[AlarmSpec] = field(default_factory=list)
    dashboards: list[str] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    without_local_effect: dict[str, str] = field(default_factory=dict)

    def queue_by_url(self, url: str) -> QueueInfo | None:
        """The queue with ``url``, if the template created it."""
        return next((q for q in self.queues.values() if q.url == url), None)

    def queue_by_arn(self, arn: str) -> QueueInfo | None:
        """The queue with ``arn``, if the template created it."""
        return next((q for q in self.queues.values() if q.arn == arn), None)
