"""What a batch bills, counted from the requests the runtime sends (sqsjobs._usage) and shared out to its jobs
(worker/_batch_metrics.py): DynamoDB's and SQS's documented billing rules, the meter, the attribution."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.stub import Stubber

from sqsjobs import _metrics as m
from sqsjobs._clients import dynamodb_client, sqs_client
from sqsjobs._usage import (
    Metered,
    UsageMeter,
    dynamodb_units,
    message_bytes,
    poller_requests,
    sqs_billed,
    sqs_requests,
)
from sqsjobs.worker._batch_metrics import BatchUsage, billed_shares, write_metrics
from sqsjobs.worker._delivery import Delivery, State


def insert(key: str, *extra: dict[str, Any]) -> dict[str, Any]:
    return {"Statement": "INSERT INTO \"t\" VALUE {'pk': ?, 'job': ?}", "Parameters": [{"S": key}, {"S": "j"}, *extra]}


# ---------------------------------------------------------------- the rules
def test_a_write_costs_a_unit_per_started_kb_whether_its_condition_held_or_not() -> None:
    statements = [insert("a:1"), insert("a:2", {"S": "x" * 1500}), insert("a:3", {"S": "x" * 3000}),
                  {"Statement": "UPDATE \"t\" SET \"r\"=? WHERE \"pk\"=?", "Parameters": [{"N": "12"}, {"S": "b:1"}]}]

    units = dynamodb_units("BatchExecuteStatement", {"Statements": statements}, {"a:1": "a", "b:1": "b"})

    assert units == [("a", 1.0, 0.0), (None, 2.0, 0.0), (None, 3.0, 0.0), ("b", 1.0, 0.0)]


def test_a_transaction_bills_each_item_twice_and_reads_by_consistency() -> None:
    update = {"Update": {"Key": {"pk": {"S": "group#g"}}, "ExpressionAttributeValues": {":n": {"N": "1"}}}}
    put = {"Put": {"Item": {"pk": {"S": "a:1"}, "r": {"S": "y" * 2000}}}}

    assert dynamodb_units("TransactWriteItems", {"TransactItems": [update, put]}, {"a:1": "a"}) == [
        (None, 2.0, 0.0), ("a", 4.0, 0.0)]
    assert dynamodb_units("GetItem", {"Key": {"pk": {"S": "a:1"}}, "ConsistentRead": True}, {"a:1": "a"}) == [
        ("a", 0.0, 1.0)]
    assert dynamodb_units("BatchGetItem", {"RequestItems": {"t": {"Keys": [{"pk": {"S": "a:1"}}]}}}) == [
        (None, 0.0, 0.5)]
    assert dynamodb_units("DescribeTable", {"TableName": "t"}) == []


def test_sqs_bills_a_request_per_64_kib_of_a_calls_payload() -> None:
    attributes = {"sqsjobs.job": {"DataType": "String", "StringValue": "a"}}
    small = [{"Id": str(i), "MessageBody": "b" * 100, "MessageAttributes": attributes} for i in range(10)]
    large = [{"Id": "0", "MessageBody": "b" * 200_000}, {"Id": "1", "MessageBody": "c" * 62_144}]

    assert message_bytes("b" * 100, attributes) == 100 + len("sqsjobs.job") + len("String") + 1
    assert sum(n for _, n in sqs_requests("SendMessageBatch", {"Entries": small})) == pytest.approx(1.0)
    assert [n for _, n in sqs_requests("SendMessageBatch", {"Entries": large})] == pytest.approx([200 / 262.144 * 4,
                                                                                                62.144 / 262.144 * 4])
    assert sqs_requests("ChangeMessageVisibilityBatch", {"Entries": [{"ReceiptHandle": "r1"}, {"ReceiptHandle": "r2"}]},
                        {"r2": "b"}) == [(None, 0.5), ("b", 0.5)]
    assert sqs_requests("GetQueueUrl", {"QueueName": "jobs"}) == [(None, 1.0)]
    assert (sqs_billed(1), sqs_billed(65_537)) == (1, 2)


def test_lambdas_poller_receives_ten_a_call_and_deletes_what_was_acknowledged() -> None:
    shares = poller_requests([1000] * 12, [True] * 11 + [False])

    # Two receives (ten, then two) and two deletes (ten, then one): four requests.
    assert sum(shares) == pytest.approx(4.0)
    assert shares[:2] == pytest.approx([0.2, 0.2]) and shares[10] == pytest.approx(1.5) and shares[11] == 0.5


def test_a_batchs_billed_time_is_each_run_plus_an_equal_share_or_in_proportion_when_runs_overlapped() -> None:
    assert billed_shares([10.0, 0.0, 30.0, 0.0], 48) == [12.0, 2.0, 32.0, 2.0]
    assert billed_shares([60.0, 20.0], 40) == [30.0, 10.0]  # concurrent runs: 80 ms of runs in a 40 ms batch
    assert BatchUsage(elapsed_ms=47.01, memory_mb=512).billed_ms == 48


# ---------------------------------------------------------------- the meter
@pytest.fixture
def meter_and_clients() -> Any:
    dynamodb, sqs = dynamodb_client(region_name="eu-west-1"), sqs_client(region_name="eu-west-1")
    meter = UsageMeter()
    meter.attach(dynamodb)
    meter.attach(meter.attaching(lambda: sqs)())
    with Stubber(dynamodb) as ddb_stub, Stubber(sqs) as sqs_stub:
        yield meter, dynamodb, sqs, ddb_stub, sqs_stub


def test_the_meter_counts_answered_calls_of_an_open_batch_by_the_job_they_name(meter_and_clients: Any) -> None:
    meter, dynamodb, sqs, ddb_stub, sqs_stub = meter_and_clients
    statements = [insert("a:1"), insert("b:1"), insert("limit#ses#token#3")]
    for _ in range(3):
        ddb_stub.add_response("batch_execute_statement", {"Responses": [{}, {}, {}]})
    ddb_stub.add_client_error("batch_execute_statement", "ValidationException", http_status_code=400)
    ddb_stub.add_response("batch_execute_statement", {"Responses": [{}, {}, {}]})
    sqs_stub.add_response("change_message_visibility_batch", {"Successful": [], "Failed": []})

    dynamodb.batch_execute_statement(Statements=statements)  # before the batch: not counted
    meter.open({"a:1": "a", "b:1": "b", "receipt-b": "b"})
    dynamodb.batch_execute_statement(Statements=statements)
    dynamodb.batch_execute_statement(Statements=statements)
    with pytest.raises(Exception, match="ValidationException"):
        dynamodb.batch_execute_statement(Statements=statements)  # refused whole: AWS bills nothing
    sqs.change_message_visibility_batch(QueueUrl="https://sqs.eu-west-1.amazonaws.com/1/q", Entries=[
        {"Id": "0", "ReceiptHandle": "receipt-b", "VisibilityTimeout": 30}])
    metered = meter.close()
    dynamodb.batch_execute_statement(Statements=statements)  # after: not counted

    assert metered.by_job == {"a": [2.0, 0.0, 0.0], "b": [2.0, 0.0, 1.0]}
    assert metered.shared == [2.0, 0.0, 0.0]  # the limiter's token named no delivery: the batch's


def test_a_single_write_refused_by_its_condition_is_billed_and_other_refusals_are_not(meter_and_clients: Any) -> None:
    meter, dynamodb, _, ddb_stub, _ = meter_and_clients
    ddb_stub.add_client_error("put_item", "ConditionalCheckFailedException", http_status_code=400)
    ddb_stub.add_client_error("put_item", "ProvisionedThroughputExceededException", http_status_code=400)
    ddb_stub.add_client_error("update_item", "ValidationException", http_status_code=400)

    meter.open({"a:1": "a", "b:1": "b"})
    for call in (lambda: dynamodb.put_item(TableName="t", Item={"pk": {"S": "a:1"}}),  # a duplicate's claim
                 lambda: dynamodb.put_item(TableName="t", Item={"pk": {"S": "b:1"}}),  # throttled: nothing done
                 lambda: dynamodb.update_item(TableName="t", Key={"pk": {"S": "b:1"}})):
        with pytest.raises(Exception, match="Exception"):
            call()

    assert meter.close().by_job == {"a": [1.0, 0.0, 0.0]}


def test_a_batch_of_one_job_counts_everything_as_that_jobs(meter_and_clients: Any) -> None:
    meter, dynamodb, _, ddb_stub, _ = meter_and_clients
    ddb_stub.add_response("batch_execute_statement", {"Responses": [{}, {}]})

    meter.open({"a:1": "a", "a:2": "a", "r1": "a"})
    dynamodb.batch_execute_statement(Statements=[insert("a:1"), insert("limit#x#token#1")])

    assert meter.close().by_job == {"a": [2.0, 0.0, 0.0]}


def test_a_client_is_listened_to_once_and_other_services_not_at_all() -> None:
    meter = UsageMeter()
    dynamodb = dynamodb_client(region_name="eu-west-1")
    meter.attach(dynamodb)
    meter.attach(dynamodb)
    meter.attach(object())  # not a botocore client
    with Stubber(dynamodb) as stub:
        stub.add_response("get_item", {})
        meter.open({"a:1": "a"})
        dynamodb.get_item(TableName="t", Key={"pk": {"S": "a:1"}})

    assert meter.close().by_job == {"a": [0.0, 0.5, 0.0]}  # counted once, eventually consistent


# ---------------------------------------------------------------- shared out to the jobs
def deliveries(jobs: list[str], runs_ms: list[float]) -> list[Delivery]:
    out = []
    for i, (job, ms) in enumerate(zip(jobs, runs_ms, strict=True)):
        d = Delivery.parse({"messageId": f"m{i}", "receiptHandle": f"r{i}", "body": json.dumps({"job": job})}, i)
        d.duration_ms = ms
        d.state = State.ACKED
        out.append(d)
    return out


def usage_of(lines: list[str]) -> dict[str, dict[str, float]]:
    found: dict[str, dict[str, float]] = {}
    for doc in map(json.loads, lines):
        for name in m.USAGE:
            if name in doc:
                found.setdefault(doc[m.DIMENSION_JOB], {})[name] = doc[name][0]
    return found


def test_each_job_gets_its_runs_share_of_the_invocation_and_its_own_units() -> None:
    ds = deliveries(["?", "?", "?", "?"], [10.0, 0.0, 30.0, 0.0])
    metered = Metered()
    metered.add("?", write=6)
    metered.add(None, write=4, sqs=2)
    lines: list[str] = []

    write_metrics(ds, namespace="sqsjobs", service="demo", emit=lines.append,
                  usage=BatchUsage(elapsed_ms=47.2, memory_mb=2048, metered=metered), clock=lambda: 1.0)

    usage = usage_of(lines)["?"]
    assert usage[m.LAMBDA_GB_SECONDS] == pytest.approx(48 / 1000 * 2)  # all 48 billed ms at 2 GB
    assert usage[m.WRITE_UNITS] == 10
    assert usage[m.SQS_REQUESTS] == pytest.approx(2 + 1 + 1)  # the batch's 2, one receive, one delete
    first = json.loads(lines[0])
    assert first[m.BATCHES] == [1.0] and first[m.LOG_BYTES] == [float(sum(len(line) + 1 for line in lines))]


def test_off_lambda_no_time_is_billed_and_zero_usage_writes_nothing() -> None:
    lines: list[str] = []

    write_metrics(deliveries(["?"], [5.0]), namespace="sqsjobs", service="demo", emit=lines.append,
                  usage=BatchUsage(elapsed_ms=9.0, memory_mb=None), clock=lambda: 1.0)

    assert set(usage_of(lines)["?"]) == {m.SQS_REQUESTS}  # the poller's; no GB-s, no DynamoDB units
