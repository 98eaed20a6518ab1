"""``sqsjobs.testing.messages_in`` against moto's SQS (found while building the chaos ledger)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sqsjobs.testing import messages_in


@pytest.fixture
def sqs() -> Iterator[Any]:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def test_messages_in_returns_every_message_and_leaves_them_visible(sqs: Any) -> None:
    # Receiving with VisibilityTimeout=0 hands back the same first ten messages every time (moto
    # always, SQS often), so the helper stopped at ten and counted each of them twice.
    queue = sqs.create_queue(QueueName="many")["QueueUrl"]
    for start in range(0, 35, 5):
        sqs.send_message_batch(QueueUrl=queue, Entries=[{"Id": str(i), "MessageBody": f"m{start + i}"}
                                                        for i in range(5)])
    first = messages_in(sqs, queue)
    assert sorted(m["Body"] for m in first) == sorted(f"m{i}" for i in range(35))
    again = messages_in(sqs, queue)
    assert len(again) == 35
    # Each look is one receive per message, not two.
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in again} == {"2"}
