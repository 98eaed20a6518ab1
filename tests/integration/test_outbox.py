"""Transactional enqueue against moto: transaction → outbox stream → relay → SQS → worker guard."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from sqsjobs import Outcome, TransactionError
from sqsjobs.testing import drain_queue, messages_in, receive_event
from sqsjobs.workflows._outbox import MAX_TRANSACTION_ITEMS
from sqsjobs.workflows._relay import OutboxRelay

OUTBOX = "outbox"
ORDERS = "orders"


class StreamReader:
    """Reads a moto table's stream from where it last stopped, as Lambda's event source mapping would."""

    def __init__(self, aws: Any, table: str) -> None:
        import boto3

        self.streams = boto3.client("dynamodbstreams", region_name="us-east-1")
        self.arn = aws.dynamodb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
        shard = self.streams.describe_stream(StreamArn=self.arn)["StreamDescription"]["Shards"][0]["ShardId"]
        self.iterator = self.streams.get_shard_iterator(StreamArn=self.arn, ShardId=shard,
                                                        ShardIteratorType="TRIM_HORIZON")["ShardIterator"]

    def event(self) -> dict[str, Any]:
        response = self.streams.get_records(ShardIterator=self.iterator)
        self.iterator = response["NextShardIterator"]
        records = []
        for record in response["Records"]:
            change = dict(record["dynamodb"])
            created = change.get("ApproximateCreationDateTime")
            if isinstance(created, datetime):
                change["ApproximateCreationDateTime"] = created.timestamp()
            records.append({**record, "dynamodb": change, "eventSourceARN": self.arn})
        return {"Records": records}


@pytest.fixture
def tables(aws: Any) -> Any:
    aws.dynamodb.create_table(
        TableName=OUTBOX, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
        StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"},
    )
    aws.dynamodb.create_table(
        TableName=ORDERS, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
        AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}], BillingMode="PAY_PER_REQUEST",
    )
    return aws


@pytest.fixture
def shop(make_app: Any, tables: Any) -> Any:
    app = make_app(outbox_table=OUTBOX, backoff_base=0)
    processed: list[int] = []

    @app.job("process-order", key="process-order:{order_id}")
    def process_order(order_id: int) -> None:
        processed.append(order_id)

    app.processed = processed  # type: ignore[attr-defined]
    return app


def place_order(app: Any, order_id: int, *, total: int = 1250, after: Any = None) -> None:
    with app.transaction() as tx:
        tx.put(ORDERS, {"pk": f"order#{order_id}", "total_cents": total, "status": "NEW"},
               condition="attribute_not_exists(pk)")
        tx.enqueue("process-order", order_id=order_id)
        if after:
            tx.on_commit(after)


def relay(aws: Any, **options: Any) -> OutboxRelay:
    return OutboxRelay(**{"queue_url": aws.queue_url, "sqs_client": aws.sqs, "sleep": lambda seconds: None,
                          **options})


def count_items(aws: Any, table: str) -> int:
    return int(aws.dynamodb.scan(TableName=table, Select="COUNT")["Count"])


def test_committed_order_is_delivered_once_even_when_the_relay_runs_twice(shop: Any, tables: Any) -> None:
    stream = StreamReader(tables, OUTBOX)
    committed: list[str] = []
    place_order(shop, 7, after=lambda: committed.append("order 7"))
    assert committed == ["order 7"]
    assert count_items(tables, ORDERS) == 1
    # Nothing reached SQS inside the transaction: only the relay sends.
    assert messages_in(tables.sqs, tables.queue_url) == []

    event = stream.event()
    assert [r["eventName"] for r in event["Records"]] == ["INSERT"]
    first = relay(tables).relay(event)
    assert (first.sent, first.failures, first.keys) == (1, (), ("process-order:7",))
    again = relay(tables).handle(event)  # the stream delivers the same batch again
    assert again == {"batchItemFailures": []}
    assert len(messages_in(tables.sqs, tables.queue_url)) == 2

    outcomes = []
    drain_queue(tables.sqs, tables.queue_url,
                lambda e: outcomes.extend(d.outcome for d in shop.process_batch(e).deliveries))
    assert shop.processed == [7]
    assert sorted(outcomes) == [Outcome.DUPLICATE, Outcome.SUCCEEDED]


def test_relay_crash_after_sending_is_one_more_duplicate(shop: Any, tables: Any) -> None:
    stream = StreamReader(tables, OUTBOX)
    place_order(shop, 8)
    place_order(shop, 9)
    event = stream.event()

    class CrashAfterSend:
        def __init__(self, real: Any) -> None:
            self.real = real

        def send_many(self, messages: Any) -> Any:
            self.real.send_many(messages)
            raise RuntimeError("relay killed after SendMessageBatch returned")

    crashing = relay(tables)
    crashing._producer = CrashAfterSend(crashing.producer)  # type: ignore[assignment]
    with pytest.raises(RuntimeError):
        crashing.handle(event)  # Lambda marks the batch failed and the mapping retries it
    assert relay(tables).relay(event).sent == 2
    assert len(messages_in(tables.sqs, tables.queue_url)) == 4

    drain_queue(tables.sqs, tables.queue_url, shop.process_batch)
    assert sorted(shop.processed) == [8, 9]


def test_a_cancelled_transaction_writes_and_enqueues_nothing(shop: Any, tables: Any) -> None:
    tables.dynamodb.put_item(TableName=ORDERS, Item={"pk": {"S": "sku#1"}, "qty": {"N": "0"}})
    callbacks: list[str] = []
    with pytest.raises(TransactionError) as caught, shop.transaction() as tx:
        tx.put(ORDERS, {"pk": "order#20", "sku": "sku#1"}, condition="attribute_not_exists(pk)")
        tx.update(ORDERS, {"pk": "sku#1"}, "SET qty = qty - :one", condition="qty >= :one", values={":one": 1})
        tx.enqueue("process-order", order_id=20)
        tx.on_commit(lambda: callbacks.append("ran"))
    assert caught.value.condition_failed
    assert caught.value.reasons == ("None", "ConditionalCheckFailed", "None")
    assert "item 1: ConditionalCheckFailed" in str(caught.value)
    assert callbacks == []
    assert count_items(tables, ORDERS) == 1  # the stock item only
    assert count_items(tables, OUTBOX) == 0
    # Read the stream from its start only now: moto rolls a cancelled transaction back by swapping
    # in a copy of the table, and a shard iterator taken before still sees the discarded writes.
    assert StreamReader(tables, OUTBOX).event()["Records"] == []
    assert messages_in(tables.sqs, tables.queue_url) == []


def test_an_exception_or_cancel_in_the_block_commits_nothing(shop: Any, tables: Any) -> None:
    with pytest.raises(ValueError), shop.transaction() as tx:
        tx.put(ORDERS, {"pk": "order#2"})
        tx.enqueue("process-order", order_id=2)
        raise ValueError("payment declined")
    with shop.transaction() as tx:
        tx.put(ORDERS, {"pk": "order#3"})
        tx.enqueue("process-order", order_id=3)
        tx.on_commit(lambda: pytest.fail("a cancelled transaction must not run callbacks"))
        tx.cancel()
    assert count_items(tables, ORDERS) == 0
    assert count_items(tables, OUTBOX) == 0


def test_the_transaction_item_limit_is_refused_before_anything_is_written(shop: Any, tables: Any) -> None:
    with pytest.raises(TransactionError, match=f"at most {MAX_TRANSACTION_ITEMS} items"), \
            shop.transaction() as tx:
        for order_id in range(MAX_TRANSACTION_ITEMS // 2):
            tx.put(ORDERS, {"pk": f"order#{order_id}"})
            tx.enqueue("process-order", order_id=order_id)
        tx.put(ORDERS, {"pk": "order#one-too-many"})
    assert count_items(tables, ORDERS) == 0
    assert count_items(tables, OUTBOX) == 0


def test_the_same_job_twice_in_one_transaction_is_one_outbox_item(shop: Any, tables: Any) -> None:
    with shop.transaction() as tx:
        first = tx.enqueue("process-order", order_id=5)
        second = tx.enqueue("process-order", order_id=5)
    assert first == second == "process-order:5"
    assert count_items(tables, OUTBOX) == 1


def test_only_unsent_records_are_reported_back_to_the_stream(shop: Any, tables: Any) -> None:
    stream = StreamReader(tables, OUTBOX)
    for order_id in (11, 12, 13):
        place_order(shop, order_id)
    event = stream.event()

    class RefusesOrder12:
        """SQS refusing one entry of the batch (throttled), every time."""

        def __init__(self, real: Any) -> None:
            self.real = real
            self.calls = 0

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            self.calls += 1
            bad = [e for e in Entries if '"order_id":12' in e["MessageBody"]]
            good = [e for e in Entries if e not in bad]
            response = self.real.send_message_batch(QueueUrl=QueueUrl, Entries=good) if good else {}
            failed = [{"Id": e["Id"], "Code": "ThrottlingException", "Message": "slow down", "SenderFault": False}
                      for e in bad]
            return {"Successful": response.get("Successful", []), "Failed": failed}

    sqs = RefusesOrder12(tables.sqs)
    result = relay(tables, sqs_client=sqs).relay(event)
    sequence_of_12 = event["Records"][1]["dynamodb"]["SequenceNumber"]
    assert result.failures == (sequence_of_12,)
    assert result.response() == {"batchItemFailures": [{"itemIdentifier": sequence_of_12}]}
    assert sorted(result.keys) == ["process-order:11", "process-order:13"]
    assert sqs.calls == 4  # the first call and the producer's three retries of the throttled entry

    # The mapping retries from the failed record; now SQS takes it.
    retry = {"Records": event["Records"][1:]}
    assert relay(tables).relay(retry).failures == ()
    drain_queue(tables.sqs, tables.queue_url, shop.process_batch)
    assert sorted(shop.processed) == [11, 12, 13]


def test_ttl_removals_and_foreign_records_are_skipped(tables: Any) -> None:
    removal = {"eventName": "REMOVE", "dynamodb": {"Keys": {"pk": {"S": "process-order:1"}},
                                                  "SequenceNumber": "100"}}
    result = relay(tables).relay({"Records": [removal]})
    assert (result.sent, result.skipped, result.failures) == (0, 1, ())
    assert receive_event(tables.sqs, tables.queue_url)["Records"] == []
