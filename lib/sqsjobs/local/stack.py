"""The deployed stack's queues and messages, as ``LocalCloud`` offers them (``cloud.send``, ``cloud.peek``...).

A base of :class:`sqsjobs.local.cloud.LocalCloud`, apart from its lifecycle
(start, reload, stop): these need only the moto server, the clients, the
deployment and the telemetry, which the cloud sets before anything runs.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from sqsjobs._settings import ENV_DLQ_URL, ENV_QUEUE_URL, ENV_QUEUE_URL_PREFIX, ENV_SCHEDULE_GROUP, Settings
from sqsjobs.enqueue._producer import Producer
from sqsjobs.local.aws import Clients, local_environment
from sqsjobs.local.errors import LocalCloudError
from sqsjobs.local.metric_store import parse_emf
from sqsjobs.local.moto_api import sent_emails
from sqsjobs.local.telemetry import QUEUE_DEPTH_ATTRIBUTES

if TYPE_CHECKING:
    from sqsjobs.local.model import Deployment, Schedule
    from sqsjobs.local.server import MotoServer
    from sqsjobs.local.telemetry import Telemetry

__all__ = ["StackQueues", "environment"]


class StackQueues:
    """Queues, messages, schedules and the app's view of the deployed template (what a test sends and peeks)."""

    server: MotoServer
    clients: Clients
    deployment: Deployment
    telemetry: Telemetry

    @property
    def endpoint(self) -> str:
        """The moto server's URL."""
        return self.server.endpoint

    def env(self) -> dict[str, str]:
        """Environment for a process that should talk to this local cloud."""
        return local_environment(self.server.endpoint, self.clients.region)

    def queue_url(self, logical_id: str) -> str:
        """The URL of the queue the template calls ``logical_id``."""
        return self.deployment.queues[logical_id].url

    def function_env(self, logical_id: str) -> dict[str, str]:
        """The resolved environment of function ``logical_id`` (what its handler sees)."""
        return dict(self.deployment.functions[logical_id].environment)

    def send(self, queue: str, body: str, attributes: dict[str, str] | None = None) -> str:
        """Send a raw message to queue ``queue`` (logical id); return its message id."""
        message_attributes = {k: {"DataType": "String", "StringValue": v} for k, v in (attributes or {}).items()}
        response = self.clients.get("sqs").send_message(
            QueueUrl=self.queue_url(queue), MessageBody=body, MessageAttributes=message_attributes
        )
        return str(response["MessageId"])

    def app_queue(self, name: str = "default") -> str:
        """Logical id of the app's queue ``name``: ``SQSJOBS_QUEUE_URL`` (or ``..._<NAME>``) in the functions' env."""
        variable = ENV_QUEUE_URL if name == "default" else f"{ENV_QUEUE_URL_PREFIX}{name.upper()}"
        for spec in self.deployment.functions.values():
            url = spec.environment.get(variable)
            queue = self.deployment.queue_by_url(url) if url else None
            if queue is not None:
                return queue.logical_id
        raise LocalCloudError(f"no function has {variable} set to a queue of this template")

    @contextmanager
    def producing(self, app: Any, *, emit_metrics: Any = None,
                  settings: dict[str, Any] | None = None) -> Iterator[Any]:
        """``app`` (a ``JobApp``) pointed at this cloud the way the template points its functions, for a block.

        Queue, DLQ, idempotency table, schedule group and delivery role come
        from the worker's environment (``settings`` replaces them); the clients are this cloud's:
        SQS, DynamoDB and Scheduler are injected, and every other client made in the block (a
        job's ``sqsjobs._clients.client("ses")``, ``boto3.client(...)``, CloudWatch) finds the cloud
        through the environment, set for the block (``local_environment``) and put back after it. So
        ``app.enqueue(..., delay=timedelta(hours=2))`` creates its schedule here, and nothing made in
        the block reaches AWS. The app's EMF lines go to this cloud's metrics, as a function's do.
        """
        if settings is None:
            # The function that knows the most: the queue, then the schedule group and the DLQ (the worker, here).
            producers = [dict(f.environment) for f in self.deployment.functions.values()
                         if ENV_QUEUE_URL in f.environment]
            producers.sort(key=lambda env: (ENV_SCHEDULE_GROUP in env, ENV_DLQ_URL in env), reverse=True)
            found = Settings.from_env(producers[0] if producers else {})
            settings = {name: getattr(found, name) for name in ("queue_url", "dlq_url", "table_name",
                                                                "schedule_group", "scheduler_role_arn")
                        if getattr(found, name)}
        with environment(self.env()), app.use(
                sqs_client=self.clients.get("sqs"), dynamodb_client=self.clients.get("dynamodb"),
                scheduler_client=self.clients.get("scheduler"), settings=settings,
                emit_metrics=emit_metrics or self.record_metrics) as configured:
            yield configured

    def record_metrics(self, line: str) -> None:
        """Take an EMF line printed outside the functions (an app in a test) as this cloud's metrics."""
        points = parse_emf(line)
        if points:
            self.telemetry.record(points)

    def send_job(self, message: Any, queue: str | None = None) -> str:
        """Send a prepared ``JobMessage`` (from ``app.message(...)``) to its job's queue, as the producer would."""
        url = self.queue_url(queue or self.app_queue(getattr(message, "queue", "default")))
        return Producer(self.clients.get("sqs"), url).send(message)

    def queue_depth(self, queue: str) -> int:
        """Messages on queue ``queue`` (logical id): visible + in flight + delayed."""
        attributes = self.clients.get("sqs").get_queue_attributes(
            QueueUrl=self.queue_url(queue), AttributeNames=["All"]
        )["Attributes"]
        return sum(int(attributes.get(a, 0)) for a in QUEUE_DEPTH_ATTRIBUTES)

    def peek(self, queue: str, max_messages: int = 10) -> list[dict[str, Any]]:
        """Receive up to ``max_messages`` from ``queue`` and make them visible again at once."""
        from sqsjobs.ops._peek import peek

        return [dict(message) for message in peek(self.clients.get("sqs"), self.queue_url(queue),
                                                  max_messages=max_messages)]

    def peek_all(self, queue: str) -> list[dict[str, Any]]:
        """Every message on ``queue``; they stay on the queue (each is received once more).

        ``peek`` alone cannot do it: a receive with a zero visibility timeout
        hands back the same first ten every time.
        """
        from sqsjobs.testing import messages_in

        return list(messages_in(self.clients.get("sqs"), self.queue_url(queue)))

    def find_schedule(self, name: str) -> Schedule:
        """The schedule known by ``name``; :class:`KeyError` listing the names otherwise."""
        for schedule in self.deployment.schedules:
            function = self.deployment.functions[schedule.function]
            job = schedule.payload.get("job") if isinstance(schedule.payload, dict) else None
            if name in (schedule.name, schedule.logical_id, function.logical_id, function.name, job):
                return schedule
        names = ", ".join(s.name for s in self.deployment.schedules) or "none"
        raise KeyError(f"no schedule {name!r}; schedules: {names}")

    def emails(self) -> list[dict[str, Any]]:
        """E-mails sent through SES so far (moto records them; nothing is delivered).

        Each is ``{"id", "source", "destinations", "subject", "body"}`` (raw ones carry ``raw_data``).
        """
        return sent_emails(self.endpoint)

    def app_environment(self) -> dict[str, str]:
        """Every variable the template gives its functions, for a shell or a script acting as the app.

        The worker's (a function an SQS queue feeds) win; the other functions add what it lacks
        (the DLQ for redrive, the scheduler's tables...). Lambda's own variables are not included.
        """
        fed = {mapping.function for mapping in self.deployment.sqs_mappings}
        functions = sorted(self.deployment.functions.values(),
                           key=lambda spec: (spec.logical_id not in fed, ENV_QUEUE_URL not in spec.environment))
        merged: dict[str, str] = {}
        for spec in functions:
            for name, value in spec.environment.items():
                merged.setdefault(name, value)
        return merged


@contextmanager
def environment(values: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``values`` set for the block, then exactly as it was.

    Example:
        >>> with environment({"SQSJOBS_EXAMPLE": "1"}):
        ...     os.environ["SQSJOBS_EXAMPLE"]
        '1'
        >>> "SQSJOBS_EXAMPLE" in os.environ
        False
    """
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
