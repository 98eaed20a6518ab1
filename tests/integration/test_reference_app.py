"""The reference app's worker handler, as Lambda would import and call it (moto SES records e-mails)."""

from __future__ import annotations

import importlib
from typing import Any

import boto3
import pytest
from aws_support import create_table
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from sqsjobs.testing import FakeContext, messages_in, receive_event


def sent_emails() -> list[Any]:
    return list(ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages)


def test_invoice_email_is_sent_once_despite_duplicates_and_a_poison_goes_to_the_dlq(
    aws: Any, handlers_on_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", aws.queue_url)
    monkeypatch.setenv("SQSJOBS_DLQ_URL", aws.dlq_url)
    monkeypatch.setenv("SQSJOBS_TABLE", aws.table)
    monkeypatch.setenv("SQSJOBS_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("SQSJOBS_SENDER", "billing@example.com")
    boto3.client("ses").verify_email_identity(EmailAddress="billing@example.com")

    worker = importlib.import_module("worker")
    app = importlib.import_module("app")
    app.send_invoice_email.enqueue(invoice_id=42)
    app.send_invoice_email.enqueue(invoice_id=42)
    app.app.enqueue("invoice-email", invoice_id=-1)  # no such invoice: PermanentError

    response = worker.handler(receive_event(aws.sqs, aws.queue_url), FakeContext(clock=lambda: 0.0))

    assert response == {"batchItemFailures": []}
    emails = sent_emails()
    assert len(emails) == 1
    assert emails[0].destinations["ToAddresses"] == ["customer-42@example.com"]
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert dead["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "permanent"


def test_product_search_bulk_writes_its_items_in_one_call_and_dead_letters_the_missing_one(
    aws: Any, handlers_on_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", aws.queue_url)
    monkeypatch.setenv("SQSJOBS_DLQ_URL", aws.dlq_url)
    monkeypatch.setenv("SQSJOBS_TABLE", aws.table)
    monkeypatch.setenv("SQSJOBS_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("SQSJOBS_ORDERS_TABLE", "orders")
    create_table(aws.dynamodb, "orders")
    worker = importlib.import_module("worker")
    app = importlib.import_module("app")
    app.app.enqueue_many([app.upsert_product_search_bulk.message(product_id=i) for i in (1, 2, -3, 4)])

    response = worker.handler(receive_event(aws.sqs, aws.queue_url), FakeContext(clock=lambda: 0.0))

    assert response == {"batchItemFailures": []}
    items = aws.dynamodb.scan(TableName="orders")["Items"]
    assert sorted(item["pk"]["S"] for item in items) == ["search#1", "search#2", "search#4"]
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert dead["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "permanent"
    assert app.app.status("product-search-bulk:-3").state == "dead_lettered"
