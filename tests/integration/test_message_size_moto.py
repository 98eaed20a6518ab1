"""A 1 MiB queue on moto (issue 25, "Also"): the app sends, batches and runs messages its queue's size allows.

moto takes MaximumMessageSize up to 1,048,576 and counts characters (not bytes) and no attributes, so these
bodies are ASCII and the app's own byte count is the stricter check.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sqsjobs import JobApp, Outcome
from sqsjobs._errors import MessageTooLargeError
from sqsjobs.store._memory import InMemoryStore
from sqsjobs.testing import receive_event

MIB = 1024 * 1024


@pytest.fixture
def sqs() -> Any:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def test_a_1_mib_queue_takes_what_the_app_sends_and_the_worker_runs_it(sqs: Any) -> None:
    url = sqs.create_queue(QueueName="big", Attributes={"MaximumMessageSize": str(MIB)})["QueueUrl"]
    ran: list[int] = []
    app = JobApp(queue_url=url, max_message_bytes=MIB, sqs_client=sqs, store=InMemoryStore())

    @app.job("render", key="render:{page}")
    def render(page: int, html: str) -> None:
        ran.append(len(html))

    report = app.enqueue_many(render.message(page=i, html="x" * 400_000) for i in range(3))
    assert report.ok and report.calls == 2  # 2 x 400 kB in one SendMessageBatch (1 MiB per request), then 1
    render.enqueue(page=9, html="y" * 1_000_000)
    with pytest.raises(MessageTooLargeError):
        render.enqueue(page=10, html="z" * MIB)
    for _ in range(4):
        event = receive_event(sqs, url, max_messages=1)
        result = app.process_batch(event)
        assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED]
    assert sorted(ran) == [400_000, 400_000, 400_000, 1_000_000]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["MaximumMessageSize"])["Attributes"]
    assert json.loads(attributes["MaximumMessageSize"]) == MIB
