"""The two workers being compared, doing the same job on the same messages.

- **sqsjobs**: ``JobApp.handle_batch`` with its DynamoDB store (claims in
  parallel, completions in parallel), the DLQ and full-jitter retries.
- **Powertools**: ``BatchProcessor(EventType.SQS)`` + ``process_partial_response``
  with the record handler wrapped in ``idempotent_function`` over
  ``DynamoDBPersistenceLayer``, as its documentation sets it up for SQS
  (``data_keyword_argument="record"``, ``config.register_lambda_context``).
  The idempotency key is the job's key from the body
  (``powertools_json(body).key``) rather than the documented ``messageId``, so
  a producer's duplicate send is caught exactly as sqsjobs catches it.

The job is the same function for both: read the arguments, do the side
effect (append to a list), or raise what the scenario asks for.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

JOB = "invoice-email"


@dataclass
class Job:
    """The job body both frameworks run: a side effect, or the failure the scenario injects."""

    effects: list[int] = field(default_factory=list)
    fail: bool = False

    def __call__(self, invoice_id: int) -> None:
        if self.fail:
            raise ConnectionError("mail server unavailable")
        self.effects.append(invoice_id)


Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def sqsjobs_handler(
    *, sqs: Any, dynamodb: Any, queue_url: str, dlq_url: str, table: str, job: Job,
    emit: Callable[[str], None] | None = None, cost_metrics: bool = True,
) -> tuple[Handler, Any]:
    """The sqsjobs worker; returns (handler, app). ``emit`` receives its EMF lines (default: dropped);
    ``cost_metrics=False`` leaves out what each batch bills (bench/metering.py measures the difference)."""
    from aws_lambda_powertools import Logger

    from sqsjobs import JobApp

    app = JobApp(queue_url=queue_url, dlq_url=dlq_url, table_name=table, max_attempts=5, function_timeout=60,
                 sqs_client=sqs, dynamodb_client=dynamodb, random=random.Random(1), cost_metrics=cost_metrics,
                 # Metrics are still built (their cost counts); only the print is skipped.
                 emit_metrics=emit or (lambda line: None), logger=Logger(service="bench", level="ERROR"))

    @app.job(JOB, key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None:
        job(invoice_id)

    return app.handle_batch, app


def powertools_handler(*, dynamodb: Any, table: str, job: Job) -> Handler:
    """The Powertools equivalent (batch + idempotency), per its documentation for SQS."""
    from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
    from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
    from aws_lambda_powertools.utilities.idempotency import (
        DynamoDBPersistenceLayer,
        IdempotencyConfig,
        idempotent_function,
    )

    processor = BatchProcessor(event_type=EventType.SQS)
    persistence = DynamoDBPersistenceLayer(table_name=table, boto3_client=dynamodb)
    config = IdempotencyConfig(event_key_jmespath="powertools_json(body).key")

    @idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence)
    def record_handler(record: SQSRecord) -> None:
        body = json.loads(record["body"])
        job(**body["args"])

    def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
        config.register_lambda_context(context)
        response: dict[str, Any] = process_partial_response(event=event, record_handler=record_handler,
                                                            processor=processor, context=context)
        return response

    return handler


def bodies(first: int, count: int) -> list[str]:
    """The same message bodies for both: sqsjobs envelopes for invoice ids ``first``..."""
    from sqsjobs import JobApp

    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/bench")

    @app.job(JOB, key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None: ...

    return [send_invoice_email.message(invoice_id=i).body for i in range(first, first + count)]


def message_bytes() -> int:
    """What SQS counts of one of these jobs' messages (body, attribute names, types and values)."""
    from sqsjobs import JobApp

    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/bench")

    @app.job(JOB, key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None: ...

    return send_invoice_email.message(invoice_id=123_456).size()


def event(messages: list[str], *, attempt: int = 1) -> dict[str, Any]:
    """An SQS event carrying ``messages`` (fresh message ids)."""
    from sqsjobs.testing import sqs_event

    return sqs_event(messages, attempt=attempt, event_source_arn="arn:aws:sqs:us-east-1:123456789012:bench")
