"""A user's own test of their `sqsjobs init` project on stock moto (issue 30, item 1's "Done when").

tests/dist/test_from_the_wheel.py copies this file into the project it makes (as tests/test_stock_moto.py) and
runs it with the project's pytest: in-process ``mock_aws``, the table and the queues made from the project's own
template.yaml, the app's ``enqueue``, messages received with boto3 and handed to ``worker.handler`` as Lambda's
SQS event. Nothing patches moto: the test fails if sqsjobs' statement emulation was loaded.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
import worker
import yaml
from app import app, welcome
from moto import mock_aws

from sqsjobs.testing import FakeContext, receive_event

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"


class _Template(yaml.SafeLoader):
    """template.yaml as data: CloudFormation's short tags (!Ref, !GetAtt...) read as None."""


_Template.add_multi_constructor("!", lambda loader, suffix, node: None)


@pytest.fixture
def aws(monkeypatch: pytest.MonkeyPatch) -> Any:
    for name, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                        "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(name, value)
    resources = yaml.load(TEMPLATE.read_text(), _Template)["Resources"]
    with mock_aws():
        table = resources["IdempotencyTable"]["Properties"]
        dynamodb = boto3.client("dynamodb")
        dynamodb.create_table(TableName="jobs", AttributeDefinitions=table["AttributeDefinitions"],
                              KeySchema=table["KeySchema"], BillingMode=table["BillingMode"])
        sqs = boto3.client("sqs")
        dlq = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        visibility = str(resources["JobsQueue"]["Properties"].get("VisibilityTimeout") or 180)
        queue = sqs.create_queue(QueueName="jobs", Attributes={"VisibilityTimeout": visibility})["QueueUrl"]
        settings = {"queue_url": queue, "dlq_url": dlq, "table_name": "jobs"}
        with app.use(settings=settings, sqs_client=sqs, dynamodb_client=dynamodb):
            yield sqs, queue, dlq


def _handle(sqs: Any, queue: str) -> dict[str, Any]:
    event = receive_event(sqs, queue)
    assert event["Records"], "nothing to receive"
    result: dict[str, Any] = worker.handler(event, FakeContext(remaining_ms=30_000))
    return result


def test_the_worker_runs_on_stock_moto(aws: Any) -> None:
    sqs, queue, dlq = aws
    welcome.enqueue(user_id=7)
    welcome.enqueue(user_id=0)
    assert _handle(sqs, queue) == {"batchItemFailures": []}
    welcome.enqueue(user_id=7)  # a second delivery of a completed key: acknowledged, not run
    assert _handle(sqs, queue) == {"batchItemFailures": []}

    status = app.status("welcome:7")
    assert status is not None and (status.state, status.attempts) == ("succeeded", 1)
    letters = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"])["Messages"]
    assert [m["MessageAttributes"]["sqsjobs.reason"]["StringValue"] for m in letters] == ["permanent"]
    assert sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "0"
    # Stock moto: sqsjobs' own statement emulation was never loaded.
    assert not [name for name in sys.modules if name.startswith("sqsjobs.local.moto_")]
