"""The console's app on in-process moto (``mock_aws``): a jobs queue, its DLQ, alarms, the table."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from aws_support import prove_letter
from starlette.testclient import TestClient

from sqsjobs.console.app import create_app
from sqsjobs.console.config import ConsoleConfig
from sqsjobs.console.security import CSRF_FIELD
from sqsjobs.console.sources import Sources
from sqsjobs.store._dynamodb import DynamoDBStore

TABLE = "records"


@dataclass
class Stack:
    """Clients and names of the fixture's resources."""

    sqs: Any
    cloudwatch: Any
    dynamodb: Any
    queue_url: str
    dlq_url: str

    def sources(self, clock: Callable[[], float] | None = None) -> Sources:
        extra = {"clock": clock} if clock else {}
        return Sources(sqs=self.sqs, cloudwatch=self.cloudwatch, dynamodb=self.dynamodb, queue_url=self.queue_url,
                       dlq_url=self.dlq_url, table=TABLE, **extra)

    def client(self, clock: Callable[[], float] | None = None, **options: Any) -> TestClient:
        """A TestClient of the console with ``options`` (ConsoleConfig fields), reading time from ``clock``."""
        config = ConsoleConfig(**{"queue": self.queue_url, "refresh_seconds": 5.0, **options})
        return TestClient(create_app(config, self.sources(clock)), base_url="http://127.0.0.1:8765")

    def dead_letter(self, job: str, reason: str, error_type: str = "", message: str = "", body: str | None = None,
                    redrives: int = 0, evidence: bool = True) -> str:
        """Put a letter on the DLQ as the worker writes one: attributes, and (``evidence``) its evidence item.

        ``redrives`` is written as the worker and redrive write it: the attribute, and the ``redrive#`` item.
        """
        attrs = {"sqsjobs.job": job, "sqsjobs.reason": reason, "sqsjobs.attempts": "1",
                 "sqsjobs.source_queue": self.queue_url}
        if error_type:
            attrs["sqsjobs.error_type"] = error_type
        if message:
            attrs["sqsjobs.error_message"] = message
        if redrives:
            attrs["sqsjobs.redrive_count"] = str(redrives)
        body = body if body is not None else json.dumps({"v": 1, "job": job, "key": f"{job}:1", "args": {"id": 1}})
        dlq_id = str(self.sqs.send_message(
            QueueUrl=self.dlq_url, MessageBody=body,
            MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attrs.items()},
        )["MessageId"])
        if evidence:
            prove_letter(DynamoDBStore(self.dynamodb, TABLE), dlq_id, original=f"original-of-{dlq_id}", job=job,
                         key=f"{job}:1", reason=reason, error_type=error_type, error_message=message, attempts=1,
                         source_queue=self.queue_url, redrives=redrives)
        return dlq_id


@pytest.fixture
def stack() -> Iterator[Stack]:
    from moto import mock_aws

    with mock_aws():
        import boto3

        sqs = boto3.client("sqs", region_name="us-east-1")
        cloudwatch = boto3.client("cloudwatch", region_name="us-east-1")
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        dlq_url = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
        dlq_arn = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
        queue_url = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": json.dumps(
            {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": "4"})})["QueueUrl"]
        dynamodb.create_table(TableName=TABLE, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
        cloudwatch.put_metric_alarm(
            AlarmName="jobs-dlq-not-empty", Namespace="AWS/SQS", MetricName="ApproximateNumberOfMessagesVisible",
            Dimensions=[{"Name": "QueueName", "Value": "jobs-dlq"}], Statistic="Maximum", Period=60,
            EvaluationPeriods=1, Threshold=0, ComparisonOperator="GreaterThanThreshold")
        cloudwatch.put_metric_alarm(
            AlarmName="jobs-oldest-age", EvaluationPeriods=1, Threshold=5,
            ComparisonOperator="GreaterThanThreshold",
            Metrics=[{"Id": "age", "ReturnData": False, "MetricStat": {"Period": 60, "Stat": "Maximum", "Metric": {
                "Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": "jobs"}]}}},
                {"Id": "latencies", "Expression": "age / 60", "ReturnData": True}])
        yield Stack(sqs=sqs, cloudwatch=cloudwatch, dynamodb=dynamodb, queue_url=queue_url, dlq_url=dlq_url)


@pytest.fixture
def local_metric_data(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process moto answers GetMetricData as the local cloud's server does (percentiles, metric math)."""
    from moto.cloudwatch.models import CloudWatchBackend

    from sqsjobs.local.moto_cloudwatch import get_metric_data

    monkeypatch.setattr(CloudWatchBackend, "get_metric_data", get_metric_data)


def csrf_of(html: str) -> str:
    """The CSRF token a page's forms carry."""
    marker = f'name="{CSRF_FIELD}" value="'
    start = html.index(marker) + len(marker)
    return html[start : html.index('"', start)]
