"""The deployed worker processes jobs: once, duplicates skipped, poison dead-lettered and paged."""

from __future__ import annotations

import itertools
import json
from typing import Any

from sqsjobs.local.pytest_plugin import LocalCloudSession

_ids = itertools.count(1000)


def subjects(cloud: LocalCloudSession) -> list[str]:
    return [str(m["subject"]) for m in cloud.emails()]


def attribute(message: dict[str, Any], name: str) -> str:
    return str(message["MessageAttributes"][name]["StringValue"])


def letters_of(cloud: LocalCloudSession, message_id: str) -> list[dict[str, Any]]:
    """This test's dead letters: other tests' (in any order, any shape of body) share the session's DLQ."""
    return [m for m in cloud.dead_letters()
            if m.get("MessageAttributes", {}).get("sqsjobs.original_message_id", {}).get("StringValue") == message_id]


def test_an_enqueued_job_is_processed_by_the_deployed_worker(local_cloud: LocalCloudSession) -> None:
    invoice = next(_ids)

    local_cloud.enqueue("invoice-email", invoice_id=invoice)
    local_cloud.drain()

    assert subjects(local_cloud).count(f"Invoice {invoice}") == 1
    assert local_cloud.queue_depth("JobsQueue") == 0


def test_a_duplicate_enqueue_sends_one_email(local_cloud: LocalCloudSession) -> None:
    invoice = next(_ids)

    local_cloud.enqueue("invoice-email", invoice_id=invoice)
    local_cloud.enqueue("invoice-email", invoice_id=invoice)
    local_cloud.drain()

    assert subjects(local_cloud).count(f"Invoice {invoice}") == 1


def test_a_poison_message_reaches_the_dlq_with_its_reason_and_pages(local_cloud: LocalCloudSession) -> None:
    sqs = local_cloud.clients.get("sqs")
    pager = sqs.create_queue(QueueName="e2e-pager")["QueueUrl"]
    pager_arn = sqs.get_queue_attributes(QueueUrl=pager, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    local_cloud.clients.get("sns").subscribe(
        TopicArn=local_cloud.deployment.topics["PageTopic"], Protocol="sqs", Endpoint=pager_arn
    )
    # The session's cloud may already be paging for an earlier test's dead letter: reset the alarm,
    # as an operator's SetAlarmState would, so this poison message's page is a fresh transition.
    local_cloud.set_alarm_state("DeadLetterAlarm", "OK")
    invoice = -next(_ids)

    message_id = local_cloud.enqueue("invoice-email", invoice_id=invoice)
    local_cloud.drain()
    local_cloud.evaluate_alarms()

    dead = letters_of(local_cloud, message_id)
    assert len(dead) == 1 and json.loads(dead[0]["Body"])["args"]["invoice_id"] == invoice
    assert attribute(dead[0], "sqsjobs.reason") == "permanent"
    assert attribute(dead[0], "sqsjobs.error_type") == "PermanentError"
    assert local_cloud.alarm_state("DeadLetterAlarm") == "ALARM"
    pages = sqs.receive_message(QueueUrl=pager, MaxNumberOfMessages=10).get("Messages", [])
    alarms = [json.loads(json.loads(p["Body"])["Message"])["AlarmName"] for p in pages]
    assert "sqsjobs-local-DeadLetterAlarm" in alarms


def test_a_malformed_body_is_dead_lettered_as_malformed(local_cloud: LocalCloudSession) -> None:
    message_id = local_cloud.send("JobsQueue", "this is not an envelope")
    local_cloud.drain()

    dead = letters_of(local_cloud, message_id)
    assert [attribute(m, "sqsjobs.reason") for m in dead] == ["malformed"]


def test_a_killed_invocations_messages_come_back_and_are_processed_once(local_cloud: LocalCloudSession) -> None:
    invoice = next(_ids)
    jobs_queue = local_cloud.queue_url("JobsQueue")
    (poller,) = [p for p in local_cloud.sqs_pollers if p.mapping.queue_url == jobs_queue]  # not the critical queue's
    failed_before = poller.stats.failed_batches

    local_cloud.crash_next_invocations("WorkerFunction")
    local_cloud.enqueue("invoice-email", invoice_id=invoice)
    local_cloud.drain()

    assert poller.stats.failed_batches == failed_before + 1
    assert subjects(local_cloud).count(f"Invoice {invoice}") == 1
    assert local_cloud.queue_depth("JobsQueue") == 0


def test_async_jobs_run_in_the_deployed_worker_each_once(local_cloud: LocalCloudSession) -> None:
    orders = [next(_ids) for _ in range(10)]

    for order in orders:
        local_cloud.enqueue("receipt-email", order_id=order)
    local_cloud.enqueue("receipt-email", order_id=orders[0])  # a duplicate: sent once all the same
    local_cloud.drain()

    sent = subjects(local_cloud)
    assert [sent.count(f"Receipt {order}") for order in orders] == [1] * 10
    assert local_cloud.queue_depth("JobsQueue") == 0
