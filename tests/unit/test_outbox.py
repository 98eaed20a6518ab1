"""Outbox units: the transaction's requests, its limits and errors, and the relay's bookkeeping (no network)."""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Any

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from sqsjobs import ConfigurationError, InvalidArgumentsError, InvalidEventError, JobApp, TransactionError
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.enqueue._producer import EnqueueReport, FailedEntry
from sqsjobs.workflows._outbox import OUTBOX_TTL_SECONDS, outbox_item_model
from sqsjobs.workflows._relay import OutboxRelay, message_from_image


class FakeDynamoDB:
    """Records TransactWriteItems calls; raises the queued errors first."""

    def __init__(self, *errors: Exception) -> None:
        self.errors = list(errors)
        self.calls: list[dict[str, Any]] = []

    def transact_write_items(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(kwargs)
        if self.errors:
            raise self.errors.pop(0)
        return {}


def make_app(client: Any, **options: Any) -> JobApp:
    app = JobApp(queue_url="https://sqs.example/123456789012/jobs", outbox_table="outbox", dynamodb_client=client,
                 clock=lambda: 1_000.0, **options)

    @app.job("process-order", key="process-order:{order_id}")
    def process_order(order_id: int) -> None: ...

    return app


def test_writes_and_enqueues_become_one_request_with_the_outbox_item_last() -> None:
    client = FakeDynamoDB()
    app = make_app(client)
    with app.transaction() as tx:
        tx.put("orders", {"pk": "order#7", "total": 12.5, "lines": [1, 2]}, condition="attribute_not_exists(pk)")
        tx.update("stock", {"pk": "sku#1"}, "SET qty = qty - :n", condition="qty >= :n", values={":n": 1})
        assert tx.enqueue("process-order", order_id=7, trace_id="t-1") == "process-order:7"

    (call,) = client.calls
    assert call["ClientRequestToken"] == tx.token
    put, update, outbox = call["TransactItems"]
    assert put["Put"]["Item"]["total"] == {"N": "12.5"}  # floats are sent as exact decimals
    assert put["Put"]["ConditionExpression"] == "attribute_not_exists(pk)"
    assert update["Update"]["ExpressionAttributeValues"] == {":n": {"N": "1"}}
    item = outbox["Put"]
    assert item["TableName"] == "outbox" and "ConditionExpression" not in item
    assert item["Item"]["pk"] == {"S": "process-order:7"}
    assert item["Item"]["expires_at"] == {"N": str(int(1_000 + OUTBOX_TTL_SECONDS))}
    message = message_from_image(item["Item"])
    assert (message.job, message.key, message.trace_id) == ("process-order", "process-order:7", "t-1")
    assert '"order_id":7' in message.body


def test_an_empty_transaction_writes_nothing_but_runs_its_callbacks() -> None:
    client = FakeDynamoDB()
    ran: list[int] = []
    with make_app(client).transaction() as tx:
        tx.on_commit(lambda: ran.append(1))
    assert client.calls == [] and ran == [1]


def test_bad_arguments_fail_at_enqueue_time_not_in_the_relay() -> None:
    app = make_app(FakeDynamoDB())
    with pytest.raises(InvalidArgumentsError), app.transaction() as tx:
        tx.enqueue("process-order", order_id={"not": "an id"})


def test_a_lost_answer_can_be_retried_with_the_same_token() -> None:
    client = FakeDynamoDB(EndpointConnectionError(endpoint_url="https://dynamodb"))
    tx = make_app(client).transaction()
    tx.put("orders", {"pk": "order#1"})
    with pytest.raises(TransactionError) as caught:
        tx.commit()
    assert caught.value.unknown_outcome
    tx.commit()
    assert [c["ClientRequestToken"] for c in client.calls] == [tx.token, tx.token]
    tx.commit()  # already committed: nothing more is written
    assert len(client.calls) == 2


def test_other_client_errors_are_transaction_errors_with_the_code() -> None:
    throttled = ClientError({"Error": {"Code": "ProvisionedThroughputExceededException", "Message": "slow"}},
                            "TransactWriteItems")
    tx = make_app(FakeDynamoDB(throttled)).transaction()
    tx.put("orders", {"pk": "order#1"})
    with pytest.raises(TransactionError, match="ProvisionedThroughputExceededException") as caught:
        tx.commit()
    assert not caught.value.condition_failed and caught.value.reasons == ()


def test_every_callback_runs_even_if_one_fails_and_the_first_error_is_raised() -> None:
    ran: list[str] = []

    def broken() -> None:
        ran.append("broken")
        raise RuntimeError("cache down")

    with pytest.raises(RuntimeError, match="cache down"), make_app(FakeDynamoDB()).transaction() as tx:
        tx.put("orders", {"pk": "order#1"})
        tx.on_commit(broken)
        tx.on_commit(lambda: ran.append("second"))
    assert ran == ["broken", "second"]


def test_a_finished_transaction_takes_no_more_items_and_a_cancelled_one_cannot_commit() -> None:
    tx = make_app(FakeDynamoDB()).transaction()
    tx.commit()
    with pytest.raises(TransactionError, match="already committed"):
        tx.put("orders", {"pk": "late"})
    cancelled = make_app(FakeDynamoDB()).transaction()
    cancelled.cancel()
    with pytest.raises(TransactionError, match="cancelled"):
        cancelled.commit()


def test_the_item_limit_counts_raw_and_model_items_too() -> None:
    tx = make_app(FakeDynamoDB()).transaction()
    for i in range(99):
        tx.add({"ConditionCheck": {"TableName": "t", "Key": {"pk": {"S": str(i)}}, "ConditionExpression": "x"}})
    tx.put_model(outbox_item_model("other")("k", job="j", body="{}", created_at=1, expires_at=2))
    with pytest.raises(TransactionError, match="at most 100 items"):
        tx.check("t", {"pk": "x"}, "attribute_exists(pk)")


def test_no_outbox_table_is_a_configuration_error_naming_the_variable() -> None:
    app = JobApp(queue_url="https://sqs.example/q", dynamodb_client=FakeDynamoDB(), environ={})

    @app.job("noop")
    def noop(n: int) -> None: ...

    with pytest.raises(ConfigurationError, match="SQSJOBS_OUTBOX_TABLE"), app.transaction() as tx:
        tx.enqueue("noop", n=1)


class FakeProducer:
    def __init__(self, failing: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.failing = failing
        self.sent: list[JobMessage] = []

    def send_many(self, messages: list[JobMessage]) -> EnqueueReport:
        ids = {}
        failed = []
        for i, m in enumerate(messages):
            if m.key in self.failing:
                failed.append(FailedEntry(index=i, key=m.key, code="Throttled", message="x", sender_fault=False))
            else:
                ids[i] = f"m-{i}"
                self.sent.append(m)
        return EnqueueReport(message_ids=ids, failed=tuple(failed), calls=1)


def stream_record(sequence: str, key: str | None, event: str = "INSERT") -> dict[str, Any]:
    change: dict[str, Any] = {"SequenceNumber": sequence, "Keys": {"pk": {"S": key or "?"}}}
    if key is not None:
        body = json.dumps({"v": 1, "job": "process-order", "key": key, "args": {}})
        change["NewImage"] = {"pk": {"S": key}, "job": {"S": "process-order"}, "body": {"S": body},
                              "delay": {"N": "5"}, "created_at": {"N": "1"}, "expires_at": {"N": "2"}}
    return {"eventName": event, "dynamodb": change}


def test_relay_reports_unsent_and_unreadable_records_in_stream_order() -> None:
    producer = FakeProducer(failing={"k:3"})
    relay = OutboxRelay(queue_url="https://sqs.example/q", producer=producer, logger=_Quiet())
    broken = stream_record("99", "k:bad")
    del broken["dynamodb"]["NewImage"]["body"]
    event = {"Records": [stream_record("100", "k:1"), stream_record("1000", "k:3"), broken,
                         stream_record("101", "k:1", event="REMOVE")]}
    result = relay.relay(event)
    assert [m.key for m in producer.sent] == ["k:1"] and producer.sent[0].delay == 5
    assert result.failures == ("99", "1000")  # numeric order, not string order
    assert (result.sent, result.skipped) == (1, 1)


def test_relay_refuses_an_event_that_is_not_a_stream_batch() -> None:
    with pytest.raises(InvalidEventError):
        OutboxRelay(queue_url="q", producer=FakeProducer()).relay({"nope": 1})


def test_relay_needs_a_queue() -> None:
    with pytest.raises(ConfigurationError, match="SQSJOBS_QUEUE_URL"):
        OutboxRelay.from_env({})


def test_decimals_inside_maps_and_lists() -> None:
    tx = make_app(FakeDynamoDB()).transaction()
    tx.put("t", {"pk": "a", "m": {"x": 0.1, "l": [0.2]}})
    item = tx.items[0]["Put"]["Item"]
    assert item["m"] == {"M": {"x": {"N": "0.1"}, "l": {"L": [{"N": "0.2"}]}}}
    assert Decimal("0.1") == Decimal(item["m"]["M"]["x"]["N"])


class _Quiet:
    def error(self, *args: Any, **kwargs: Any) -> None: ...
