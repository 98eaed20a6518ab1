"""Lambda entry point for DLQ redrive: the CLI's options in the event, the summary back.

Invoke it with ``aws lambda invoke`` or ``sam remote invoke``, e.g. the event
``{"job": "invoice-email", "error": "TimeoutError", "max": 500}`` or
``{"dry_run": true}``; ``{"native": true}``, ``{"status": true}`` and
``{"cancel": true}`` drive SQS's own move task. The DLQ and the default target
come from ``SQSJOBS_DLQ_URL`` and ``SQSJOBS_QUEUE_URL``; ``SQSJOBS_TABLE`` proves
each letter's reason and redrive count (the worker's evidence) and keeps the
letters whose key was cancelled. The run stops before
the function's timeout and reports what is left; invoke it again to continue.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sqsjobs._settings import Settings
from sqsjobs.ops._redrive_event import handle_redrive_event

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.store._lease import LeaseStore


@lru_cache(maxsize=1)
def _sqs() -> SQSClient:
    # Built on the first invocation from the process's one botocore session, then reused.
    from sqsjobs._clients import sqs_client

    return sqs_client()


@lru_cache(maxsize=1)
def _records() -> LeaseStore | None:
    # The idempotency table (SQSJOBS_TABLE): the letters' evidence and counts, and cancelled keys.
    from sqsjobs._clients import dynamodb_client
    from sqsjobs.store._dynamodb import DynamoDBStore

    table = Settings.from_env().table_name
    return DynamoDBStore(dynamodb_client(), table) if table else None


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Redrive as the event asks, within the remaining time; return the summary."""
    return handle_redrive_event(event or {}, context, sqs_client=_sqs(), records=_records())
