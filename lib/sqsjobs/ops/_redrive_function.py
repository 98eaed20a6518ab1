"""``sqsjobs.ops.redrive_handler()``: the whole redrive Lambda, for a handler file of two lines.

handlers/redrive.py is ``handler = redrive_handler()``. The call runs at the
function's init and imports what a redrive runs (:mod:`sqsjobs.ops._redrive_event`),
but builds no client and calls no AWS: the SQS client and the idempotency
table's store are made on the first invocation, from the one botocore session
(``sqsjobs._clients``), then kept for the life of the instance. The event is
the CLI's options (:func:`sqsjobs.ops._redrive_options.options_from_event`).
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cached_property
from typing import TYPE_CHECKING, Any

from sqsjobs._settings import Settings

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.store._lease import LeaseStore


def redrive_handler(*, environ: Mapping[str, str] | None = None, sqs_client: SQSClient | None = None,
                    dynamodb_client: DynamoDBClient | None = None) -> RedriveFunction:
    """The redrive Lambda's handler: ``handler(event, context)`` redrives the DLQ as the event asks.

    The event takes the CLI's options (``{"job": "invoice-email", "error":
    "TimeoutError", "max": 500}``, ``{"dry_run": true}``; ``{"native": true}``,
    ``{"status": true}`` and ``{"cancel": true}`` drive SQS's own move task)
    and the summary comes back; the run stops before the function's timeout
    and says what is left. The DLQ and the default target are
    ``SQSJOBS_DLQ_URL`` and ``SQSJOBS_QUEUE_URL``; with ``SQSJOBS_TABLE`` each
    letter's reason and redrive count are proven against the worker's evidence,
    and letters whose key was cancelled stay. ``environ`` (default
    ``os.environ``) and the clients can be given, for a test.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> import sqsjobs
        >>> from sqsjobs.ops import redrive_handler
        >>> with mock_aws():
        ...     sqs = sqsjobs.client("sqs", region_name="eu-west-1")
        ...     dlq, jobs = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("jobs-dlq", "jobs"))
        ...     _ = sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"job": "sync", "key": "sync:1"}))
        ...     handler = redrive_handler(environ={"SQSJOBS_DLQ_URL": dlq, "SQSJOBS_QUEUE_URL": jobs},
        ...                               sqs_client=sqs)
        ...     summary = handler({"wait_time_seconds": 0}, None)
        ...     summary["moved"], summary["stopped"], handler.records is None  # no table: no evidence
        (1, 'drained', True)
    """
    return RedriveFunction(environ=environ, sqs_client=sqs_client, dynamodb_client=dynamodb_client)


class RedriveFunction:
    """A redrive Lambda handler (``redrive_handler()``): its clients are built on the first invocation."""

    def __init__(self, *, environ: Mapping[str, str] | None, sqs_client: SQSClient | None,
                 dynamodb_client: DynamoDBClient | None) -> None:
        # Imported here, at the function's init, not on its first invocation (and never by the worker).
        from sqsjobs.ops._redrive_event import handle_redrive_event

        self._handle = handle_redrive_event
        self._environ = environ
        self._sqs_client = sqs_client
        self._dynamodb_client = dynamodb_client

    @cached_property
    def sqs(self) -> SQSClient:
        """The SQS client: the one given, else one from the process's botocore session."""
        if self._sqs_client is not None:
            return self._sqs_client
        from sqsjobs._clients import sqs_client

        return sqs_client()

    @cached_property
    def records(self) -> LeaseStore | None:
        """The idempotency table (``SQSJOBS_TABLE``) as a store: the letters' evidence and cancelled keys."""
        table = Settings.from_env(self._environ).table_name
        if not table:
            return None
        from sqsjobs._clients import dynamodb_client
        from sqsjobs.store._dynamodb import DynamoDBStore

        return DynamoDBStore(self._dynamodb_client or dynamodb_client(), table)

    def __call__(self, event: Mapping[str, Any] | None, context: Any) -> dict[str, Any]:
        """Redrive as ``event`` asks, within the invocation's remaining time; return the summary."""
        return self._handle(event or {}, context, sqs_client=self.sqs, environ=self._environ, records=self.records)
