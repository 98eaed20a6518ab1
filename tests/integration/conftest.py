"""moto-backed AWS for integration tests: a jobs queue with its DLQ and the idempotency table."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_support import MAX_ATTEMPTS, Aws, create_queues, create_table, trust_statements
from moto import mock_aws

from sqsjobs import JobApp


@pytest.fixture
def aws() -> Iterator[Aws]:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        queue_url, dlq_url = create_queues(sqs, "jobs")
        create_table(dynamodb, "idempotency")
        trust_statements(dynamodb, "idempotency")
        yield Aws(sqs=sqs, dynamodb=dynamodb, queue_url=queue_url, dlq_url=dlq_url, table="idempotency")


@pytest.fixture
def make_app(aws: Aws, clock: Any, rng: Any) -> Any:
    def make(**overrides: Any) -> JobApp:
        options: dict[str, Any] = dict(
            queue_url=aws.queue_url, dlq_url=aws.dlq_url, table_name=aws.table, max_attempts=MAX_ATTEMPTS,
            sqs_client=aws.sqs, dynamodb_client=aws.dynamodb, clock=clock, random=rng,
            emit_metrics=lambda line: None, sleep=lambda seconds: None,
        )
        options.update(overrides)
        return JobApp(**options)

    return make


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    """A moto server on 127.0.0.1 that serves one request at a time (DynamoDB atomic per request, as the real one),
    for tests whose workers run in other processes."""
    from sqsjobs.local.serial_moto import threaded_server

    server = threaded_server()
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def table(endpoint: str) -> str:
    """A fresh idempotency table on ``endpoint``."""
    name = f"idempotency-{uuid.uuid4().hex[:8]}"
    create_table(boto3.client("dynamodb", endpoint_url=endpoint, region_name="us-east-1"), name)
    return name
