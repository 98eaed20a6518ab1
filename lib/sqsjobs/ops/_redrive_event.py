"""The redrive Lambda's logic (``handlers/redrive.py``): the CLI's options in the event, the summary back.

The event is read by :func:`sqsjobs.ops._redrive_options.options_from_event`;
``native``/``status``/``cancel`` drive SQS's own move task
(:mod:`sqsjobs.ops._redrive_native`), anything else runs :class:`sqsjobs.ops._redrive.Redrive`
until the function's deadline is near.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

from sqsjobs.ops._redrive import Redrive
from sqsjobs.ops._redrive_native import cancel_native_redrive, native_redrive_status, start_native_redrive
from sqsjobs.ops._redrive_options import event_flag, options_from_event, refuse_filters_for_native
from sqsjobs.worker._budget import remaining_seconds

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.store._lease import LeaseStore

__all__ = ["LAMBDA_PLANNED_LINES", "handle_redrive_event"]

# How many dry-run lines and notes the Lambda returns (the rest are counted).
LAMBDA_PLANNED_LINES: Final = 100


def handle_redrive_event(
    event: Mapping[str, Any],
    context: Any,
    *,
    sqs_client: SQSClient,
    environ: Mapping[str, str] | None = None,
    records: LeaseStore | None = None,
) -> dict[str, Any]:
    """Run what the event asks (redrive, native start/status/cancel) within the Lambda's time.

    With ``records`` (the idempotency table), letters whose key was cancelled stay in the DLQ.

    Example:
        >>> import json
        >>> from moto import mock_aws
        >>> from sqsjobs._clients import sqs_client
        >>> with mock_aws():
        ...     sqs = sqs_client(region_name="eu-west-1")
        ...     dlq, jobs = (sqs.create_queue(QueueName=name)["QueueUrl"] for name in ("jobs-dlq", "jobs"))
        ...     for job in ("invoice-email", "sync"):
        ...         _ = sqs.send_message(QueueUrl=dlq, MessageBody=json.dumps({"job": job, "key": f"{job}:1"}))
        ...     event = {"dlq": "jobs-dlq", "to": "jobs", "max": 1, "wait_time_seconds": 0}
        ...     result = handle_redrive_event(event, None, sqs_client=sqs, environ={})
        ...     result["moved"], result["stopped"], result["left"]
        (1, 'max', 1)
    """
    options = options_from_event(event, environ=environ)
    if event_flag(event, "status"):
        tasks = native_redrive_status(options.dlq, sqs_client=sqs_client)
        return {"tasks": [t.to_dict() for t in tasks]}
    if event_flag(event, "cancel"):
        return {"cancelled": True, "moved": cancel_native_redrive(options.dlq, sqs_client=sqs_client)}
    if event_flag(event, "native"):
        refuse_filters_for_native(options)
        return {"task_handle": start_native_redrive(options.dlq, to=options.to, rate=options.rate,
                                                    sqs_client=sqs_client)}
    engine = Redrive(
        options,
        sqs_client=sqs_client,
        # Without a Lambda context (a direct call) there is no deadline to stop before.
        remaining_time=None if remaining_seconds(context) is None else lambda: remaining_seconds(context) or 0.0,
        records=records,
    )
    result = engine.run().to_dict()
    # Lambda's response is capped at 6 MB: a run over a large DLQ returns the
    # first lines and the counts (the CLI's --json has every message).
    for lines in ("planned", "notes"):
        result[f"{lines}_total"] = len(result[lines])
        result[lines] = result[lines][:LAMBDA_PLANNED_LINES]
    return result
