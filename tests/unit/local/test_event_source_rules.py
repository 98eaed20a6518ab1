"""Which messages stay after an invocation, as Lambda decides."""

from __future__ import annotations

from typing import Any

import pytest

from sqsjobs.local.invoker import InvocationResult
from sqsjobs.local.model import SqsMapping
from sqsjobs.local.sqs_poller import failed_ids, to_lambda_record
from sqsjobs.local.stream_poller import first_failure

IDS = ["a", "b", "c"]


def ok(payload: Any) -> InvocationResult:
    return InvocationResult(request_id="r", ok=True, payload=payload)


@pytest.mark.parametrize("payload", [None, {}, "", {"batchItemFailures": []}, {"batchItemFailures": None}])
def test_an_empty_response_means_every_message_succeeded(payload: Any) -> None:
    assert failed_ids(ok(payload), IDS, True) == (set(), False)


def test_listed_messages_stay() -> None:
    assert failed_ids(ok({"batchItemFailures": [{"itemIdentifier": "b"}]}), IDS, True) == ({"b"}, False)


@pytest.mark.parametrize(
    "payload",
    [
        {"batchItemFailures": [{"itemIdentifier": "zzz"}]},
        {"batchItemFailures": [{"itemIdentifier": ""}]},
        {"batchItemFailures": [{"itemIdentifier": None}]},
        {"batchItemFailures": [{}]},
        {"batchItemFailures": "b"},
        ["b"],
    ],
)
def test_a_malformed_response_fails_the_whole_batch(payload: Any) -> None:
    assert failed_ids(ok(payload), IDS, True) == (set(IDS), True)


def test_a_failed_invocation_keeps_everything_and_without_reporting_success_deletes_all() -> None:
    failed = InvocationResult(request_id="r", ok=False, timed_out=True)

    assert failed_ids(failed, IDS, True) == (set(IDS), False)
    assert failed_ids(ok({"batchItemFailures": [{"itemIdentifier": "b"}]}), IDS, False) == (set(), False)


def test_streams_resume_at_the_first_reported_sequence_number() -> None:
    payload = {"batchItemFailures": [{"itemIdentifier": "3"}, {"itemIdentifier": "2"}]}

    assert first_failure(ok(payload), ["1", "2", "3"], True) == "2"
    assert first_failure(ok({"batchItemFailures": [{"itemIdentifier": "9"}]}), ["1", "2"], True) == "1"
    assert first_failure(ok(None), ["1", "2"], True) is None


def test_records_have_lambdas_shape() -> None:
    mapping = SqsMapping(logical_id="M", function="F", queue_url="u", queue_arn="arn:q")
    message = {
        "MessageId": "m", "ReceiptHandle": "h", "Body": "b", "MD5OfBody": "x",
        "Attributes": {"ApproximateReceiveCount": "2"},
        "MessageAttributes": {"sqsjobs.job": {"DataType": "String", "StringValue": "j"}},
        "MD5OfMessageAttributes": "y",
    }

    record = to_lambda_record(message, mapping, "us-east-1")

    assert record["eventSourceARN"] == "arn:q"
    assert record["attributes"]["ApproximateReceiveCount"] == "2"
    assert record["messageAttributes"]["sqsjobs.job"] == {
        "stringValue": "j", "stringListValues": [], "binaryListValues": [], "dataType": "String"}
