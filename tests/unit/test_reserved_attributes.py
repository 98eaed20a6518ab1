"""Producers cannot set ``sqsjobs.*`` attributes: the namespace is the worker's (issue 11, finding 5).

A producer-set ``sqsjobs.source_queue`` survived SQS's own redrive and steered
``sqsjobs redrive`` to a queue the producer chose. The message refuses any
extra attribute in the namespace; the two it carries (``sqsjobs.job``,
``sqsjobs.trace_id``) come from its ``job`` and ``trace_id`` fields.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sqsjobs._errors import EnqueueError, ReservedAttributeError, SqsJobsError
from sqsjobs.enqueue._message import ATTR_JOB, ATTR_TRACE_ID, JobMessage
from sqsjobs.enqueue._producer import Producer
from sqsjobs.workflows._relay import OutboxRelay, message_from_image


def message(**extra: str) -> JobMessage:
    return JobMessage(job="invoice-email", key="invoice-email:1", body="{}", trace_id="t-1", extra_attributes=extra)


@pytest.mark.parametrize(
    "name", ["sqsjobs.source_queue", "sqsjobs.reason", "sqsjobs.redrive_count", "sqsjobs.job", "SQSJobs.Reason"]
)
def test_a_message_refuses_any_extra_attribute_in_the_sqsjobs_namespace(name: str) -> None:
    with pytest.raises(ReservedAttributeError) as refused:
        message(**{name: "x"})
    text = str(refused.value)
    assert name in text and "sqsjobs.job" in text and "sqsjobs.trace_id" in text
    assert "\n" not in text
    # One error tree: a refused enqueue, whatever the caller catches.
    assert isinstance(refused.value, EnqueueError) and isinstance(refused.value, SqsJobsError)


def test_a_replaced_message_is_checked_too() -> None:
    with pytest.raises(ReservedAttributeError):
        dataclasses.replace(message(), extra_attributes={"sqsjobs.source_queue": "https://evil/q"})


def test_other_extras_and_the_producers_own_two_attributes_are_sent() -> None:
    attrs = message(tenant="acme").attributes()
    assert attrs[ATTR_JOB]["StringValue"] == "invoice-email"
    assert attrs[ATTR_TRACE_ID]["StringValue"] == "t-1"
    assert attrs["tenant"]["StringValue"] == "acme"


@pytest.mark.moto
def test_the_producer_sends_nothing_in_the_namespace_but_its_own_two() -> None:
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        url = sqs.create_queue(QueueName="jobs")["QueueUrl"]
        Producer(sqs, url).send(message(tenant="acme"))
        (received,) = sqs.receive_message(QueueUrl=url, MessageAttributeNames=["All"])["Messages"]
    assert sorted(received["MessageAttributes"]) == [ATTR_JOB, ATTR_TRACE_ID, "tenant"]


def image(attributes: dict[str, str]) -> dict[str, Any]:
    body = json.dumps({"v": 1, "job": "process-order", "key": "k:1", "args": {}})
    return {"pk": {"S": "k:1"}, "job": {"S": "process-order"}, "body": {"S": body},
            "attributes": {"S": json.dumps(attributes)}, "created_at": {"N": "1"}, "expires_at": {"N": "2"}}


def test_an_outbox_item_carrying_a_reserved_attribute_is_not_relayed() -> None:
    assert message_from_image(image({"tenant": "acme"})).extra_attributes == {"tenant": "acme"}
    with pytest.raises(ReservedAttributeError, match=r"sqsjobs\.source_queue"):
        message_from_image(image({"sqsjobs.source_queue": "https://evil/q"}))

    sent: list[JobMessage] = []

    class Recording:
        def send_many(self, messages: list[JobMessage]) -> Any:
            from sqsjobs.enqueue._producer import EnqueueReport

            sent.extend(messages)
            return EnqueueReport(message_ids={i: f"m-{i}" for i in range(len(messages))}, calls=1)

    class Quiet:
        def error(self, *args: Any, **kwargs: Any) -> None: ...

    relay = OutboxRelay(queue_url="https://sqs.example/q", producer=Recording(), logger=Quiet())  # type: ignore[arg-type]
    forged = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "7",
                                                  "NewImage": image({"sqsjobs.reason": "permanent"})}}
    good = {"eventName": "INSERT", "dynamodb": {"SequenceNumber": "8", "NewImage": image({"tenant": "acme"})}}
    result = relay.relay({"Records": [forged, good]})
    # The forged one goes to the stream's retries and then its on-failure destination, never to SQS.
    assert result.failures == ("7",) and result.sent == 1
    assert [m.extra_attributes for m in sent] == [{"tenant": "acme"}]
