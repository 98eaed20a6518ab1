"""`sqsjobs local fire NAME --endpoint-url`: the rule lookup against a real endpoint (a bare moto server)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest

from sqsjobs.local.errors import LocalCloudError
from sqsjobs.local.fire import fire_remote
from sqsjobs.local.server import MotoServer


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    server = MotoServer.start()
    try:
        yield server.endpoint
    finally:
        server.stop()


def test_an_unknown_name_is_reported(endpoint: str) -> None:
    with pytest.raises(LocalCloudError, match="no EventBridge rule or schedule named 'nope'"):
        fire_remote("nope", endpoint_url=endpoint, region="us-east-1", profile=None)


def test_a_rule_that_targets_something_else_than_a_function_is_refused(endpoint: str) -> None:
    events = boto3.client("events", endpoint_url=endpoint, region_name="us-east-1")
    events.put_rule(Name="to-queue", ScheduleExpression="rate(1 hour)")
    events.put_targets(Rule="to-queue", Targets=[{"Id": "q", "Arn": "arn:aws:sqs:us-east-1:123456789012:q"}])

    with pytest.raises(LocalCloudError, match="not a Lambda function"):
        fire_remote("to-queue", endpoint_url=endpoint, region="us-east-1", profile=None)
