"""The reference app's worker handler, as Lambda would import and call it (moto SES records e-mails)."""

from __future__ import annotations

import importlib
from typing import Any

import boto3
import pytest
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
