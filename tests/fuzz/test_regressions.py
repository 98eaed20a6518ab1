"""Findings of the fuzz suite, pinned as plain tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fuzz.strategies import OK_JOB, RecordingSQS

from sqsjobs import MalformedMessageError, Outcome
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.testing import FakeContext, sqs_record


def test_a_key_that_is_not_utf8_is_malformed() -> None:
    # Valid JSON whose key decodes to a lone surrogate: DynamoDB keys must be UTF-8, so the claim
    # could never succeed; it is a malformed body, dead-lettered at once instead of retried to exhaustion.
    with pytest.raises(MalformedMessageError, match="UTF-8"):
        Envelope.decode('{"v": 1, "job": "x", "key": "mut:0\\udc80", "args": {}}')


@pytest.fixture
def moto_dynamodb() -> Iterator[Any]:
    import boto3
    from moto import mock_aws

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="t", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
        yield client


def test_a_non_utf8_key_is_dead_lettered_beside_a_valid_record(moto_dynamodb: Any) -> None:
    from sqsjobs import JobApp

    sqs = RecordingSQS()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/1/q", dlq_url="https://sqs.us-east-1.amazonaws.com/1/d",
                 table_name="t", dynamodb_client=moto_dynamodb, sqs_client=sqs,  # type: ignore[arg-type]
                 emit_metrics=lambda line: None)
    ran: list[int] = []

    @app.job(OK_JOB, key="ok:{n}")
    def ok(n: int) -> None:
        ran.append(n)

    bad = sqs_record('{"v": 1, "job": "fuzz-ok", "key": "k\\udc80", "args": {"n": 1}}')
    good = sqs_record(ok.message(n=2).body)
    result = app.process_batch({"Records": [bad, good]}, FakeContext(clock=lambda: 0.0))
    assert [d.outcome for d in result.deliveries] == [Outcome.DEAD_LETTERED, Outcome.SUCCEEDED]
    assert ran == [2]
    assert sqs.dead_letters[0]["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "malformed"


@pytest.mark.parametrize("job", ["\\u0000x", "\\ud800", "\\u001b[31mred", "j" * 200_000])
def test_an_unknown_job_with_an_unsendable_name_still_reaches_the_dlq_with_its_reason(job: str) -> None:
    # The body is plain ASCII JSON that SQS delivered; only the name it decodes to holds characters
    # SQS refuses in an attribute value (or is too long to fit beside the body). Copying it raw into
    # sqsjobs.job made every DLQ send fail, so the message cycled until the queue's own redrive
    # policy moved it to the DLQ without any reason.
    from sqsjobs import JobApp
    from sqsjobs.store._memory import InMemoryStore

    sqs = RecordingSQS()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/1/q", dlq_url="https://sqs.us-east-1.amazonaws.com/1/d",
                 store=InMemoryStore(), sqs_client=sqs, emit_metrics=lambda line: None)  # type: ignore[arg-type]
    body = '{"v": 1, "job": "' + job + '", "args": {}}'
    result = app.process_batch({"Records": [sqs_record(body)]}, FakeContext(clock=lambda: 0.0))
    assert [d.outcome for d in result.deliveries] == [Outcome.DEAD_LETTERED], result.deliveries[0].notes
    (entry,) = sqs.dead_letters
    assert entry["MessageBody"] == body
    assert entry["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "malformed"


def test_a_copy_of_a_dead_lettered_key_in_the_same_batch_is_not_counted_as_done() -> None:
    from sqsjobs import JobApp, PermanentError
    from sqsjobs.store._memory import InMemoryStore

    sqs = RecordingSQS()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/1/q", dlq_url="https://sqs.us-east-1.amazonaws.com/1/d",
                 store=InMemoryStore(), sqs_client=sqs, emit_metrics=lambda line: None)  # type: ignore[arg-type]

    @app.job("poison", key="poison:{n}")
    def poison(n: int) -> None:
        raise PermanentError("record gone")

    body = poison.message(n=1).body
    result = app.process_batch({"Records": [sqs_record(body), sqs_record(body)]}, FakeContext(clock=lambda: 0.0))
    first, second = result.deliveries
    assert first.outcome is Outcome.DEAD_LETTERED
    # The job never completed: this copy must not leave the queue as a completed duplicate.
    assert second.outcome is Outcome.DEAD_LETTERED
    assert len(sqs.dead_letters) == 2
    assert {e["MessageAttributes"]["sqsjobs.reason"]["StringValue"] for e in sqs.dead_letters} == {"permanent"}
