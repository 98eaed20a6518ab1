"""The worker on stock moto, as a user tests it: enqueue with the app, receive with boto3, call the handler.

Each test runs on in-process ``mock_aws``, a ``ThreadedMotoServer`` and a ``moto.server`` process
(conftest.py's ``endpoint``), with nothing of sqsjobs' local cloud installed.
"""

from __future__ import annotations

import logging
from typing import Any

import app as shop
import pytest
import worker

from sqsjobs import Outcome


def test_a_job_runs_once_and_its_status_says_succeeded(cloud: Any) -> None:
    shop.send_receipt.enqueue(order_id=1)
    event = cloud.event(cloud.receive())

    assert worker.handler(event, None) == {"batchItemFailures": []}
    assert shop.sent == [1]
    status = shop.app.status("receipt:1")
    assert status is not None and status.state == "succeeded" and status.attempts == 1


def test_a_duplicate_delivery_is_acknowledged_without_running(cloud: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    shop.send_receipt.enqueue(order_id=2)
    shop.send_receipt.enqueue(order_id=2)  # a producer that sent twice
    shop.send_receipt.enqueue(order_id=3)
    messages = cloud.receive()
    assert len(messages) == 3

    first = shop.app.process_batch(cloud.event(messages))
    assert sorted(d.outcome.value for d in first.deliveries) == ["duplicate", "succeeded", "succeeded"]
    assert first.failures == () and sorted(shop.sent) == [2, 3]

    again = shop.app.process_batch(cloud.event(messages))  # Lambda delivers the batch again (an ack was lost)
    assert [d.outcome for d in again.deliveries] == [Outcome.DUPLICATE] * 3 and again.failures == ()
    assert sorted(shop.sent) == [2, 3]

    # moto's PartiQL cannot carry the batch's writes: each went as its own conditional request, said once.
    said = [r.getMessage() for r in caplog.records if "BatchExecuteStatement" in r.getMessage()]
    assert len(said) == 1 and "own conditional request" in said[0] and "moto" in said[0]


def test_a_permanent_failure_lands_in_the_dlq_with_its_reason(cloud: Any) -> None:
    shop.send_receipt.enqueue(order_id=-1)
    shop.send_receipt.enqueue(order_id=4)

    assert worker.handler(cloud.event(cloud.receive()), None) == {"batchItemFailures": []}
    (letter,) = cloud.receive(cloud.dlq_url)
    attributes = {name: a["StringValue"] for name, a in letter["MessageAttributes"].items()}
    assert attributes["sqsjobs.reason"] == "permanent"
    assert attributes["sqsjobs.error_message"] == "order -1 does not exist"
    assert shop.sent == [4]
    status = shop.app.status("receipt:-1")
    assert status is not None and status.state == "dead_lettered"


def test_a_stale_owner_s_completions_are_refused(cloud: Any) -> None:
    # Container A runs three orders; during the first its lease runs out (the clock jumps past it), SQS
    # delivers the messages again and container B takes them over and finishes them. A's completions are
    # then fenced on a lease it no longer holds: refused, and the records stay B's.
    b = shop.make_app()
    taken_over: list[str] = []

    def lease_runs_out(order_id: int) -> None:
        if order_id != 10 or not shop.during:
            return
        shop.during.clear()  # once: B's own run of order 10 goes on undisturbed
        cloud.clock.now += 10_000
        for m in messages:
            cloud.sqs.change_message_visibility(QueueUrl=cloud.queue_url, ReceiptHandle=m["ReceiptHandle"],
                                                VisibilityTimeout=0)
        redelivered = cloud.receive()
        assert {m["Attributes"]["ApproximateReceiveCount"] for m in redelivered} == {"2"}
        with cloud.use(b):
            taken_over.extend(d.outcome.value for d in b.process_batch(cloud.event(redelivered)).deliveries)

    for order in (10, 11, 12):
        shop.send_receipt.enqueue(order_id=order)
    messages = cloud.receive()
    assert len(messages) == 3
    shop.during.append(lease_runs_out)
    a = shop.app.process_batch(cloud.event(messages))

    assert taken_over == ["succeeded"] * 3
    assert a.fence_lost == 3  # every completion of A refused
    assert sorted(shop.sent).count(10) == 2  # a run whose lease ran out may run again; its record is B's
    for order in (10, 11, 12):
        status = shop.app.status(f"receipt:{order}")
        assert status is not None and status.state == "succeeded"


def test_a_rate_limit_reserves_one_slot_a_job_and_defers_the_rest_once_to_their_slots(cloud: Any) -> None:
    # One a minute: the first starts, the next two get slots a minute and two minutes on, carried by their copies.
    for user in (1, 2, 3):
        shop.send_newsletter.enqueue(user_id=user)
    copies: list[dict[str, Any]] = []
    cloud.sqs.meta.events.register("provide-client-params.sqs.SendMessageBatch",
                                   lambda params, **kwargs: copies.extend(params["Entries"]))
    result = shop.app.process_batch(cloud.event(cloud.receive()))
    assert shop.sent == [1]
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED, Outcome.DEFERRED, Outcome.DEFERRED]
    assert result.failures == ()  # the deferred left as copies (DelaySeconds), none used an attempt
    assert shop.app.status("newsletter:2") is None
    assert [c["DelaySeconds"] for c in copies] == [59, 119]  # back half a second before their slots, or more
    schedule = cloud.dynamodb.get_item(TableName=cloud.table, Key={"pk": {"S": "limit#mail#gcra"}},
                                       ConsistentRead=True)["Item"]
    assert float(schedule["tat"]["N"]) > cloud.clock() + 3 * 60  # three slots, a minute and a bit apart
    assert cloud.receive() == []  # both copies wait their DelaySeconds

    # The first copy back, a moment before its slot (SQS's delay is real time: the test builds its delivery): it
    # starts at its slot, and the limiter's item is not written.
    (name, slot), = (pair.split("=") for pair in [copies[0]["MessageAttributes"]["sqsjobs.slots"]["StringValue"]])
    assert name == "mail"
    back = {"MessageId": "copy-2", "ReceiptHandle": "r", "MD5OfBody": "", "Body": copies[0]["MessageBody"],
            "Attributes": {"ApproximateReceiveCount": "1"}, "MessageAttributes": copies[0]["MessageAttributes"]}
    cloud.clock.now = float(slot)
    again = shop.app.process_batch(cloud.event([back]))
    assert [d.outcome for d in again.deliveries] == [Outcome.SUCCEEDED] and shop.sent == [1, 2]
    after = cloud.dynamodb.get_item(TableName=cloud.table, Key={"pk": {"S": "limit#mail#gcra"}},
                                    ConsistentRead=True)["Item"]
    assert after["tat"] == schedule["tat"]


@pytest.mark.parametrize("endpoint", ["mock_aws", "ThreadedMotoServer"], indirect=True)
@pytest.mark.usefixtures("sqsjobs_moto_partiql")
def test_moto_partiql_keeps_the_batched_path_where_moto_runs_in_this_process(cloud: Any, endpoint: str | None,
                                                                              caplog: pytest.LogCaptureFixture) -> None:
    # Opt in (the package's fixture): moto answers sqsjobs' statements as DynamoDB documents, for this test.
    caplog.set_level(logging.WARNING)
    calls: list[str] = []
    cloud.dynamodb.meta.events.register("after-call.dynamodb.*", lambda model, **_: calls.append(model.name))
    for order in (20, 21, 22):
        shop.send_receipt.enqueue(order_id=order)
    assert worker.handler(cloud.event(cloud.receive()), None) == {"batchItemFailures": []}
    assert sorted(shop.sent) == [20, 21, 22]
    # The probe (twice: the table's first; on a server's endpoint, one statement before it), then one call
    # for the claims and one for the completions.
    assert calls == ["BatchExecuteStatement"] * (4 if endpoint is None else 5)
    assert not [r for r in caplog.records if "BatchExecuteStatement" in r.getMessage()]
