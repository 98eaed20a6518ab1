"""Redrive pieces without a network: parsing, dedup ids, options, chunking, and the native move task
through botocore's Stubber (moto has no StartMessageMoveTask)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from sqsjobs import MoveTaskError, RedriveError, SqsJobsError
from sqsjobs._clients import operator_client
from sqsjobs.enqueue._addresses import queue_name
from sqsjobs.enqueue._batching import batches
from sqsjobs.ops import _redrive_held as rd
from sqsjobs.ops._dlq_letters import DlqMessage, dedup_id
from sqsjobs.ops._redrive_event import handle_redrive_event
from sqsjobs.ops._redrive_native import cancel_native_redrive, native_redrive_status, start_native_redrive
from sqsjobs.ops._redrive_options import RedriveOptions, options_from_event, refuse_filters_for_native

DLQ_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dlq"
DLQ_ARN = "arn:aws:sqs:us-east-1:123456789012:jobs-dlq"
JOBS_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
JOBS_ARN = "arn:aws:sqs:us-east-1:123456789012:jobs"


@pytest.fixture
def sqs() -> Any:
    return boto3.client(
        "sqs", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="x",
        endpoint_url="http://127.0.0.1:9",  # never reached: the Stubber answers
    )


def string(value: str) -> dict[str, str]:
    return {"DataType": "String", "StringValue": value}


# -- parsing --------------------------------------------------------------------


def test_dead_letter_reads_the_wire_contract() -> None:
    msg = {
        "MessageId": "m1",
        "Body": json.dumps({"v": 1, "job": "body-job"}),
        "Attributes": {"SentTimestamp": "100000"},
        "MessageAttributes": {
            "sqsjobs.job": string("invoice-email"),
            "sqsjobs.reason": string("exhausted"),
            "sqsjobs.error_type": string("TimeoutError"),
            "sqsjobs.error_message": string("read timed out"),
            "sqsjobs.attempts": {"DataType": "Number", "StringValue": "5"},
            "sqsjobs.source_queue": string(JOBS_URL),
            "sqsjobs.redrive_count": {"DataType": "Number", "StringValue": "2"},
        },
    }
    letter = DlqMessage.from_message(msg, now=160.0)  # type: ignore[arg-type]  # no table: the claims, unverified
    assert not letter.verified
    assert letter.job == "invoice-email"  # the attribute wins over the body
    assert (letter.reason, letter.error_type, letter.error_message) == ("exhausted", "TimeoutError", "read timed out")
    assert (letter.attempts, letter.redrive_count, letter.source_queue) == (5, 2, JOBS_URL)
    assert letter.age_seconds == 60.0
    assert not letter.malformed


@pytest.mark.parametrize("body", ["not json", "[]", '{"v": 1}', '{"job": ""}', ""])
def test_bodies_that_name_no_job_are_malformed(body: str) -> None:
    letter = DlqMessage.from_message({"MessageId": "m", "Body": body}, now=0.0)
    assert letter.malformed
    assert letter.job == "?"
    assert letter.age_seconds is None
    assert letter.redrive_count == 0


def test_reason_malformed_is_malformed_even_with_a_job_in_the_body() -> None:
    attrs = {"sqsjobs.reason": string("malformed")}
    msg = {"MessageId": "m", "Body": '{"v": 9, "job": "a"}', "MessageAttributes": attrs}
    assert DlqMessage.from_message(msg, now=0.0).malformed  # type: ignore[arg-type]


def test_dedup_id_is_deterministic_fresh_and_valid() -> None:
    msg: Any = {"MessageId": "m1", "Attributes": {"MessageDeduplicationId": "orig"}}
    assert dedup_id(msg, 1) == dedup_id(dict(msg), 1)
    assert dedup_id(msg, 1) != dedup_id(msg, 2)
    assert dedup_id(msg, 1) != "orig"
    assert len(dedup_id(msg, 1)) <= 128
    # Without a FIFO dedup id it falls back to the letter's honest original id (its evidence's), then the DLQ
    # message id; the attributes never count: a forged original id could make SQS drop the send as a duplicate.
    assert dedup_id({"MessageId": "x"}, 1, original_message_id="o") == dedup_id({"MessageId": "y"}, 1,
                                                                                original_message_id="o")
    forged = {"sqsjobs.reason": string("permanent"), "sqsjobs.original_message_id": string("o")}
    assert dedup_id({"MessageId": "x", "MessageAttributes": forged}, 1) != dedup_id(  # type: ignore[typeddict-item]
        {"MessageId": "y", "MessageAttributes": forged}, 1)  # type: ignore[typeddict-item]


def test_queue_name_from_url_and_arn() -> None:
    assert queue_name(DLQ_URL) == "jobs-dlq"
    assert queue_name(DLQ_ARN) == "jobs-dlq"
    assert queue_name("http://127.0.0.1:5000/123456789012/jobs.fifo") == "jobs.fifo"


# -- options ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs",
    [{"dlq": ""}, {"max_messages": 0}, {"rate": 0}, {"max_redrives": -1}, {"malformed": "drop"},
     {"wait_time_seconds": 21}, {"visibility_timeout": 0}],
)
def test_bad_options_are_refused_with_an_sqsjobs_error(kwargs: dict[str, Any]) -> None:
    with pytest.raises(RedriveError) as info:
        RedriveOptions(**{"dlq": "d", **kwargs})
    assert isinstance(info.value, SqsJobsError)


def test_options_from_event_follow_the_cli_names_and_the_environment() -> None:
    env = {"SQSJOBS_DLQ_URL": DLQ_URL, "SQSJOBS_QUEUE_URL": JOBS_URL}
    opts = options_from_event(
        {"job": "a", "error": "KeyError", "max": "5", "rate": 2, "dry_run": True, "force": True}, environ=env
    )
    assert (opts.dlq, opts.default_to, opts.to) == (DLQ_URL, JOBS_URL, None)
    assert (opts.job, opts.error_type, opts.max_messages, opts.rate) == ("a", "KeyError", 5, 2.0)
    assert opts.dry_run and opts.force
    assert options_from_event({"dlq": "other"}, environ=env).dlq == "other"


def test_options_from_event_refuse_unknown_keys() -> None:
    with pytest.raises(RedriveError, match="unknown redrive option"):
        options_from_event({"jbo": "typo"}, environ={"SQSJOBS_DLQ_URL": DLQ_URL})
    with pytest.raises(RedriveError, match="a DLQ is required"):
        options_from_event({}, environ={})


def test_chunks_respect_the_batch_byte_limit() -> None:
    big = "x" * 300_000  # letters of a queue whose MaximumMessageSize is raised: 3 fit in SendMessageBatch's 1 MiB
    letter = DlqMessage.from_message({"Body": big}, now=0)
    held = [rd.HeldMessage({"MessageId": str(i), "Body": big}, letter) for i in range(5)]
    def chunks(items: list[Any], size: int) -> list[int]:
        return [len(c) for c in batches(items, max_items=size, max_bytes=rd.BATCH_BYTES, size_of=rd.entry_bytes)]

    assert chunks(held, 10) == [3, 2]
    assert chunks(held[:3], 1) == [1, 1, 1]


# -- the native move task (Stubber) -------------------------------------------------


def test_native_start_with_rate_and_destination(sqs: Any) -> None:
    with Stubber(sqs) as stub:
        stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": DLQ_ARN}},
                          {"QueueUrl": DLQ_URL, "AttributeNames": ["QueueArn"]})
        stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": JOBS_ARN}},
                          {"QueueUrl": JOBS_URL, "AttributeNames": ["QueueArn"]})
        stub.add_response(
            "start_message_move_task", {"TaskHandle": "task-1"},
            {"SourceArn": DLQ_ARN, "DestinationArn": JOBS_ARN, "MaxNumberOfMessagesPerSecond": 50},
        )
        handle = start_native_redrive(DLQ_URL, to=JOBS_URL, rate=50, sqs_client=sqs)
        stub.assert_no_pending_responses()
    assert handle == "task-1"


def test_native_start_without_destination_lets_sqs_use_the_original_sources(sqs: Any) -> None:
    with Stubber(sqs) as stub:
        stub.add_response("get_queue_url", {"QueueUrl": DLQ_URL}, {"QueueName": "jobs-dlq"})
        stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": DLQ_ARN}},
                          {"QueueUrl": DLQ_URL, "AttributeNames": ["QueueArn"]})
        stub.add_response("start_message_move_task", {"TaskHandle": "task-2"}, {"SourceArn": DLQ_ARN})
        assert start_native_redrive("jobs-dlq", sqs_client=sqs) == "task-2"
        stub.assert_no_pending_responses()


@pytest.mark.parametrize("kwargs", [{"job": "a"}, {"error_type": "E"}, {"max_messages": 3}, {"dry_run": True}])
def test_native_refuses_filters_before_calling_aws(sqs: Any, kwargs: dict[str, Any]) -> None:
    env = {"SQSJOBS_DLQ_URL": DLQ_URL}
    event_names = {"error_type": "error", "max_messages": "max"}
    event = {"native": True, **{event_names.get(k, k): v for k, v in kwargs.items()}}
    with Stubber(sqs), pytest.raises(RedriveError, match="cannot filter"):  # no responses queued: no call allowed
        handle_redrive_event(event, None, sqs_client=sqs, environ=env)
    with pytest.raises(RedriveError, match="cannot filter"):
        refuse_filters_for_native(RedriveOptions(dlq=DLQ_URL, **kwargs))


def _list_tasks(stub: Stubber, results: list[dict[str, Any]]) -> None:
    stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": DLQ_ARN}},
                      {"QueueUrl": DLQ_URL, "AttributeNames": ["QueueArn"]})
    stub.add_response("list_message_move_tasks", {"Results": results}, {"SourceArn": DLQ_ARN, "MaxResults": 10})


def test_native_status_lists_tasks(sqs: Any) -> None:
    with Stubber(sqs) as stub:
        _list_tasks(stub, [
            {"TaskHandle": "t2", "Status": "RUNNING", "SourceArn": DLQ_ARN, "ApproximateNumberOfMessagesMoved": 40,
             "ApproximateNumberOfMessagesToMove": 100, "MaxNumberOfMessagesPerSecond": 10,
             "StartedTimestamp": 1767225600000},
            {"Status": "FAILED", "SourceArn": DLQ_ARN, "FailureReason": "AccessDenied"},
        ])
        tasks = native_redrive_status(DLQ_URL, sqs_client=sqs)
    assert [(t.status, t.moved, t.to_move) for t in tasks] == [("RUNNING", 40, 100), ("FAILED", None, None)]
    assert tasks[0].started_at == 1767225600.0
    assert tasks[1].failure_reason == "AccessDenied"


def test_native_cancel_cancels_the_running_task(sqs: Any) -> None:
    with Stubber(sqs) as stub:
        _list_tasks(stub, [
            {"Status": "COMPLETED", "SourceArn": DLQ_ARN},
            {"TaskHandle": "t-run", "Status": "RUNNING", "SourceArn": DLQ_ARN},
        ])
        stub.add_response("cancel_message_move_task", {"ApproximateNumberOfMessagesMoved": 17}, {"TaskHandle": "t-run"})
        assert cancel_native_redrive(DLQ_URL, sqs_client=sqs) == 17
        stub.assert_no_pending_responses()


def test_native_cancel_without_a_running_task_says_so(sqs: Any) -> None:
    with Stubber(sqs) as stub:
        _list_tasks(stub, [{"Status": "COMPLETED", "SourceArn": DLQ_ARN}])
        with pytest.raises(MoveTaskError, match="no running message move task"):
            cancel_native_redrive(DLQ_URL, sqs_client=sqs)


def test_lambda_event_drives_the_native_task(sqs: Any) -> None:
    env = {"SQSJOBS_DLQ_URL": DLQ_URL, "SQSJOBS_QUEUE_URL": JOBS_URL}
    with Stubber(sqs) as stub:
        stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": DLQ_ARN}},
                          {"QueueUrl": DLQ_URL, "AttributeNames": ["QueueArn"]})
        stub.add_response("start_message_move_task", {"TaskHandle": "t"}, {"SourceArn": DLQ_ARN})
        _list_tasks(stub, [{"TaskHandle": "t", "Status": "RUNNING", "SourceArn": DLQ_ARN}])
        assert handle_redrive_event({"native": True}, None, sqs_client=sqs, environ=env) == {"task_handle": "t"}
        status = handle_redrive_event({"status": True}, None, sqs_client=sqs, environ=env)
    assert status["tasks"][0]["status"] == "RUNNING"


def test_native_errors_from_sqs_surface(sqs: Any) -> None:
    from botocore.exceptions import ClientError

    with Stubber(sqs) as stub:
        stub.add_response("get_queue_attributes", {"Attributes": {"QueueArn": DLQ_ARN}},
                          {"QueueUrl": DLQ_URL, "AttributeNames": ["QueueArn"]})
        stub.add_client_error("start_message_move_task", "InvalidParameterValue",
                              "Source queue must be configured as a Dead Letter Queue.")
        with pytest.raises(ClientError, match="Dead Letter Queue"):
            start_native_redrive(DLQ_URL, sqs_client=sqs)


# -- clients ---------------------------------------------------------------------------


def test_local_cloud_client_works_without_an_aws_profile(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE",
                 "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:4566")
    client = operator_client("sqs")
    assert client.meta.endpoint_url == "http://127.0.0.1:4566"
    assert client.meta.region_name == "us-east-1"
    assert client._request_signer._credentials.access_key == "testing"
    # An explicit endpoint wins over the environment.
    assert operator_client("sqs", endpoint_url="http://127.0.0.1:5000").meta.endpoint_url == "http://127.0.0.1:5000"


@pytest.mark.parametrize(("value", "expected"), [(True, True), (False, False), ("true", True), ("False", False)])
def test_event_flags_accept_booleans_and_their_json_strings(value: Any, expected: bool) -> None:
    opts = options_from_event({"force": value, "dry_run": value}, environ={"SQSJOBS_DLQ_URL": DLQ_URL})
    assert opts.force is expected and opts.dry_run is expected


@pytest.mark.parametrize("value", ["no", "0", 1, None, "yes"])
def test_event_flags_refuse_anything_else(value: Any) -> None:
    # bool("no") would be True: a typo must not switch on --force.
    with pytest.raises(RedriveError, match="force must be true or false"):
        options_from_event({"force": value}, environ={"SQSJOBS_DLQ_URL": DLQ_URL})
