"""The Powertools handler doing handlers/worker.py's job, set up as its documentation does for SQS.

Only imported by ``bench`` (cold start: ``python -X importtime -c "import pt_worker"``).
"""

from __future__ import annotations

import json
import os
from functools import lru_cache
from typing import Any

from aws_lambda_powertools.utilities.batch import BatchProcessor, EventType, process_partial_response
from aws_lambda_powertools.utilities.data_classes.sqs_event import SQSRecord
from aws_lambda_powertools.utilities.idempotency import (
    DynamoDBPersistenceLayer,
    IdempotencyConfig,
    idempotent_function,
)

processor = BatchProcessor(event_type=EventType.SQS)
persistence_layer = DynamoDBPersistenceLayer(table_name=os.environ.get("SQSJOBS_TABLE", "idempotency"))
config = IdempotencyConfig(event_key_jmespath="powertools_json(body).key")


@lru_cache(maxsize=1)
def _ses() -> Any:
    import boto3

    return boto3.client("ses")


def fetch_invoice(invoice_id: int) -> dict[str, Any]:
    """The same stand-in for a database read as handlers/app.py."""
    return {"id": invoice_id, "email": f"customer-{invoice_id}@example.com", "total_cents": invoice_id * 1000}


@idempotent_function(data_keyword_argument="record", config=config, persistence_store=persistence_layer)
def record_handler(record: SQSRecord) -> None:
    """Send the invoice named in the record's body."""
    invoice = fetch_invoice(int(json.loads(record["body"])["args"]["invoice_id"]))
    _ses().send_email(
        Source=os.environ.get("SQSJOBS_SENDER", "billing@example.com"),
        Destination={"ToAddresses": [invoice["email"]]},
        Message={"Subject": {"Data": f"Invoice {invoice['id']}"},
                 "Body": {"Text": {"Data": f"Total due: {invoice['total_cents'] / 100:.2f}"}}},
    )


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``{"batchItemFailures": [...]}``."""
    config.register_lambda_context(context)
    response: dict[str, Any] = process_partial_response(event=event, record_handler=record_handler,
                                                        processor=processor, context=context)
    return response
