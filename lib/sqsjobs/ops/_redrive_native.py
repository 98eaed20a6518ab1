"""SQS's own message move task: everything from a DLQ back to its sources, server-side.

Faster than :class:`sqsjobs.ops._redrive.Redrive` for a large DLQ, but it cannot
filter, dry-run or count redrives (no poison guard), so ``sqsjobs redrive
--native`` refuses those options. moto has no such API: the tests stub it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from sqsjobs.enqueue._addresses import resolve_queue_url
from sqsjobs.ops._errors import MoveTaskError, RedriveError
from sqsjobs.ops._queues import queue_arn

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient



@dataclass(frozen=True, kw_only=True)
class MoveTask:
    """One SQS message move task, as ``ListMessageMoveTasks`` reports it.

    Example:
        >>> MoveTask(handle="h", status="RUNNING", source_arn="arn:dlq").status
        'RUNNING'
    """

    handle: str | None
    status: str
    source_arn: str
    destination_arn: str | None = None
    rate: int | None = None
    moved: int | None = None
    to_move: int | None = None
    failure_reason: str | None = None
    started_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return asdict(self)


def start_native_redrive(
    dlq: str, *, sqs_client: SQSClient, to: str | None = None, rate: float | None = None
) -> str:
    """Start SQS's own move task from the DLQ; return its task handle.

    Without ``to`` SQS sends each message back to the queue it came from;
    ``rate`` caps messages per second (SQS's default: as fast as it can).

    Example:
        >>> from botocore.stub import Stubber
        >>> from sqsjobs._clients import sqs_client
        >>> sqs, arn = sqs_client(region_name="eu-west-1"), "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq"
        >>> dlq = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq"
        >>> with Stubber(sqs) as stub:
        ...     stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": arn}})
        ...     stub.add_response("start_message_move_task", {"TaskHandle": "task-1"},
        ...                           {"SourceArn": arn, "MaxNumberOfMessagesPerSecond": 50})
        ...     start_native_redrive(dlq, rate=50, sqs_client=sqs)
        'task-1'
    """
    source_arn = queue_arn(sqs_client, resolve_queue_url(sqs_client, dlq))
    kwargs: dict[str, Any] = {"SourceArn": source_arn}
    if to:
        kwargs["DestinationArn"] = queue_arn(sqs_client, resolve_queue_url(sqs_client, to))
    if rate is not None:
        kwargs["MaxNumberOfMessagesPerSecond"] = max(1, int(rate))
    with _move_tasks_supported(sqs_client):
        return sqs_client.start_message_move_task(**kwargs)["TaskHandle"]


def native_redrive_status(dlq: str, *, sqs_client: SQSClient) -> tuple[MoveTask, ...]:
    """The DLQ's recent move tasks, newest first (SQS keeps the last 10).

    Example:
        >>> from botocore.stub import Stubber
        >>> from sqsjobs._clients import sqs_client
        >>> sqs, arn = sqs_client(region_name="eu-west-1"), "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq"
        >>> dlq = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq"
        >>> with Stubber(sqs) as stub:
        ...     stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": arn}})
        ...     stub.add_response("list_message_move_tasks", {"Results": [{"Status": "RUNNING", "TaskHandle": "t"}]})
        ...     [(t.status, t.handle) for t in native_redrive_status(dlq, sqs_client=sqs)]
        [('RUNNING', 't')]
    """
    source_arn = queue_arn(sqs_client, resolve_queue_url(sqs_client, dlq))
    with _move_tasks_supported(sqs_client):
        results = sqs_client.list_message_move_tasks(SourceArn=source_arn, MaxResults=10).get("Results", [])
    return tuple(
        MoveTask(
            handle=r.get("TaskHandle"),
            status=r.get("Status", "UNKNOWN"),
            source_arn=r.get("SourceArn", source_arn),
            destination_arn=r.get("DestinationArn"),
            rate=r.get("MaxNumberOfMessagesPerSecond"),
            moved=r.get("ApproximateNumberOfMessagesMoved"),
            to_move=r.get("ApproximateNumberOfMessagesToMove"),
            failure_reason=r.get("FailureReason"),
            started_at=r["StartedTimestamp"] / 1000 if "StartedTimestamp" in r else None,
        )
        for r in results
    )


def cancel_native_redrive(dlq: str, *, sqs_client: SQSClient) -> int:
    """Cancel the DLQ's running move task; return how many it had moved.

    Messages already moved stay moved; the rest stay in the DLQ.

    Example:
        >>> from botocore.stub import Stubber
        >>> from sqsjobs._clients import sqs_client
        >>> sqs, arn = sqs_client(region_name="eu-west-1"), "arn:aws:sqs:eu-west-1:123456789012:jobs-dlq"
        >>> dlq = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs-dlq"
        >>> with Stubber(sqs) as stub:
        ...     stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": arn}})
        ...     stub.add_response("list_message_move_tasks", {"Results": [{"Status": "RUNNING", "TaskHandle": "t"}]})
        ...     stub.add_response("cancel_message_move_task", {"ApproximateNumberOfMessagesMoved": 420},
        ...                       {"TaskHandle": "t"})
        ...     cancel_native_redrive(dlq, sqs_client=sqs)
        420
    """
    tasks = native_redrive_status(dlq, sqs_client=sqs_client)
    running = [t for t in tasks if t.status == "RUNNING" and t.handle]
    if not running:
        raise MoveTaskError(f"no running message move task on {dlq}; see `sqsjobs redrive --native --status`")
    with _move_tasks_supported(sqs_client):
        response = sqs_client.cancel_message_move_task(TaskHandle=running[0].handle or "")
    return response.get("ApproximateNumberOfMessagesMoved", 0)


@contextmanager
def _move_tasks_supported(sqs_client: SQSClient) -> Iterator[None]:
    """Turn an endpoint without move tasks (the local cloud's moto answers with an HTML 500 page) into one line."""
    from botocore.exceptions import ClientError

    try:
        yield
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        message = str(error.response.get("Error", {}).get("Message", ""))
        if code.isdigit() or message.lstrip().lower().startswith(("<!doctype", "<html")):
            raise RedriveError(
                f"{sqs_client.meta.endpoint_url} does not support SQS message move tasks (HTTP {code or '?'}; the "
                "local cloud's moto has none): use `sqsjobs redrive` without --native there"
            ) from None
        raise
