"""The producer's retries are counted with botocore's: every SQS request is counted, and the bound holds.

botocore's real retry logic runs here: a ``before-send`` hook answers every
request (and counts it) instead of the network, so the requests counted are
exactly the ones SQS would see and bill. botocore's backoff sleeps are recorded,
not slept.
"""

from __future__ import annotations

import json
import random
import types
from typing import Any

import botocore.endpoint
import pytest
from botocore.awsrequest import AWSResponse
from botocore.config import Config

from sqsjobs import ConfigurationError, EnqueueError, JobApp
from sqsjobs._clients import client, sqs_client
from sqsjobs.enqueue._producer import MAX_CALLS_PER_MESSAGE, Producer, botocore_attempts

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"


class Body:
    """The raw body botocore reads from a response."""

    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **kwargs: Any) -> Any:
        yield self.content


class FakeSqs:
    """Answers every SQS request from a script (status, JSON body) and counts them."""

    def __init__(self, script: Any) -> None:
        self.script = script
        self.requests: list[str] = []

    def __call__(self, request: Any, **kwargs: Any) -> AWSResponse:
        operation = request.headers.get("X-Amz-Target", b"")
        operation = operation.decode() if isinstance(operation, bytes) else operation
        self.requests.append(operation.rsplit(".", 1)[-1])
        status, body = self.script(len(self.requests), json.loads(request.body or b"{}"))
        headers = {"Content-Type": "application/x-amz-json-1.0"}
        return AWSResponse(request.url, status, headers, Body(json.dumps(body).encode()))


@pytest.fixture(autouse=True)
def no_backoff_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(botocore.endpoint, "time", types.SimpleNamespace(sleep=slept.append))
    return slept


def messages(count: int) -> list[Any]:
    app = JobApp(queue_url=QUEUE)

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None: ...

    return [send_invoice_email.message(invoice_id=n) for n in range(count)]


def answered(sqs: Any, fake: FakeSqs) -> Any:
    sqs.meta.events.register("before-send.sqs", fake)
    return sqs


def always_500(number: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 500, {"__type": "InternalError", "message": "the service is having a moment"}


def test_a_batch_that_keeps_failing_costs_at_most_six_requests_not_twelve() -> None:
    fake = FakeSqs(always_500)
    sqs = answered(sqs_client(region_name="us-east-1"), fake)
    sleeps: list[float] = []
    report = Producer(sqs, QUEUE, sleep=sleeps.append, random=random.Random(0)).send_many(messages(10))
    # botocore tries each call 3 times; the producer makes a second call, then its budget is spent.
    assert fake.requests == ["SendMessageBatch"] * MAX_CALLS_PER_MESSAGE
    assert report.calls == MAX_CALLS_PER_MESSAGE == 6
    assert report.sent == 0 and len(report.failed) == 10
    assert len(sleeps) == 1  # one wait between the producer's two calls


def test_entries_reported_failed_are_retried_within_the_same_budget() -> None:
    def first_entry_fails(number: int, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        entries = body["Entries"]
        return 200, {"Successful": [{"Id": e["Id"], "MessageId": f"m-{e['Id']}", "MD5OfMessageBody": "0" * 32}
                                    for e in entries if e["Id"] != "0"],
                     "Failed": [{"Id": "0", "SenderFault": False, "Code": "InternalError", "Message": "again"}]
                     if any(e["Id"] == "0" for e in entries) else []}

    fake = FakeSqs(first_entry_fails)
    sqs = answered(sqs_client(region_name="us-east-1"), fake)
    report = Producer(sqs, QUEUE, sleep=lambda seconds: None).send_many(messages(3))
    # Each round is one request (botocore does not retry a 200); entry 0 rides in 4 of them: 4 + 3 > 6.
    assert len(fake.requests) == 4
    assert report.sent == 2 and [f.index for f in report.failed] == [0]


def test_one_send_is_botocores_attempts_and_no_more() -> None:
    fake = FakeSqs(always_500)
    sqs = answered(sqs_client(region_name="us-east-1"), fake)
    with pytest.raises(EnqueueError):
        Producer(sqs, QUEUE).send(messages(1)[0])
    assert fake.requests == ["SendMessage"] * 3


@pytest.mark.parametrize(("retries", "attempts", "requests"), [
    ({"mode": "standard"}, 3, 6),
    ({"mode": "legacy"}, 5, 5),  # a second call could need 5 more: over 6, so none
    ({"total_max_attempts": 2}, 2, 6),  # three calls of two attempts
    ({"total_max_attempts": 1}, 1, 6),  # no botocore retries: six calls
])
def test_the_budget_holds_whatever_the_clients_retry_settings(retries: Any, attempts: int, requests: int) -> None:
    fake = FakeSqs(always_500)
    sqs = answered(client("sqs", region_name="us-east-1", config=Config(retries=retries)), fake)
    assert botocore_attempts(sqs) == attempts
    Producer(sqs, QUEUE, sleep=lambda seconds: None).send_many(messages(1))
    assert len(fake.requests) == requests <= MAX_CALLS_PER_MESSAGE


def test_a_client_that_retries_past_the_budget_is_refused() -> None:
    sqs = client("sqs", region_name="us-east-1", config=Config(retries={"total_max_attempts": 10}))
    with pytest.raises(ConfigurationError, match="max_calls=6 is below the 10 attempts botocore makes"):
        Producer(sqs, QUEUE)
