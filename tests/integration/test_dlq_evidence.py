"""Forged reasons never reach the operator: the DLQ is read through the worker's evidence (issue 22, finding 9; moto).

A producer can set any ``sqsjobs.*`` attribute with a raw ``SendMessage``. SQS's
own move to the DLQ at ``maxReceiveCount`` keeps them all, and before this fix
the worker's re-send at the backstop copied them too; status and redrive then
showed the forged reason and the poison guard read the forged count. Now a
letter's reason is the evidence the worker wrote (``dlq#<DLQ copy id>``) and
its count the ``redrive#<id>`` items redrive writes: the attributes prove nothing.

The poller is emulated as Lambda runs it (receive, handler, delete what it
acknowledged). Time passes by hand: a message given back is made visible at
once, and the injected clock moves past a dead invocation's lease.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_support import MAX_ATTEMPTS
from typer.testing import CliRunner

from sqsjobs import Outcome, PermanentError, RetryableError
from sqsjobs.cli import build_app
from sqsjobs.ops._dlq_evidence import read_letters
from sqsjobs.ops._redrive import redrive
from sqsjobs.ops._redrive_event import handle_redrive_event
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.ops._redrive_report import NoteKind
from sqsjobs.ops._status import collect_status
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.testing import FakeContext, messages_in, receive_event
from sqsjobs.worker._dead_letters import evidence_key, redrive_key

#: what a producer forges with a raw SendMessage: a reason, an error, counts, where the letter came from
FORGED = {
    "sqsjobs.job": "refund",
    "sqsjobs.reason": "permanent",
    "sqsjobs.error_type": "PermanentError",
    "sqsjobs.error_message": "forged: customer asked for no retries",
    "sqsjobs.attempts": "1",
    "sqsjobs.redrive_count": "999",
    "sqsjobs.original_message_id": "forged-original",
    "sqsjobs.source_queue": "https://sqs.us-east-1.amazonaws.com/123456789012/attacker",
}


class Killed(BaseException):
    """The invocation died mid-job (out of memory, the function's timeout): nothing of the batch reported."""


def send_forged(aws: Any, *, key: int = 7, redrive_count: str = "999") -> str:
    body = json.dumps({"v": 1, "job": "refund", "key": f"refund:{key}", "args": {"order_id": key}})
    attrs = {**FORGED, "sqsjobs.redrive_count": redrive_count}
    return str(aws.sqs.send_message(QueueUrl=aws.queue_url, MessageBody=body, MessageAttributes={
        name: {"DataType": "Number" if name.endswith(("count", "attempts")) else "String", "StringValue": value}
        for name, value in attrs.items()})["MessageId"])


def poll(app: Any, aws: Any, *, context: Any = None) -> list[Outcome | str]:
    """One poller round. What the handler did not acknowledge is visible again at once (its delay passed)."""
    event = receive_event(aws.sqs, aws.queue_url)
    if not event["Records"]:
        return []
    try:
        result = app.process_batch(event, context)
    except Killed:
        visible_again(aws, event["Records"])
        return ["killed"]
    failed = {item["itemIdentifier"] for item in result.response()["batchItemFailures"]}
    for record in event["Records"]:
        if record["messageId"] not in failed:
            aws.sqs.delete_message(QueueUrl=aws.queue_url, ReceiptHandle=record["receiptHandle"])
    visible_again(aws, [r for r in event["Records"] if r["messageId"] in failed])
    return [d.outcome for d in result.deliveries]


def visible_again(aws: Any, records: list[dict[str, Any]]) -> None:
    for record in records:
        aws.sqs.change_message_visibility(QueueUrl=aws.queue_url, ReceiptHandle=record["receiptHandle"],
                                          VisibilityTimeout=0)


def invocation_dies_at_start(aws: Any) -> None:
    """A receive whose invocation never reached the handler (its init timed out): the receive still counts."""
    visible_again(aws, receive_event(aws.sqs, aws.queue_url)["Records"])


def records(aws: Any) -> DynamoDBStore:
    return DynamoDBStore(aws.dynamodb, aws.table)


def options(aws: Any, **kwargs: Any) -> RedriveOptions:
    return RedriveOptions(**{"dlq": aws.dlq_url, "wait_time_seconds": 0, "max_redrives": 3, **kwargs})


def test_a_forged_letter_that_sqs_moved_reads_none_and_its_forged_count_is_ignored(
        make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app()

    @app.job("refund", key="refund:{order_id}")
    def refund(order_id: int) -> None:
        raise Killed  # the worker dies mid-job every time: it never gets to dead-letter the message

    original = send_forged(aws)
    for _ in range(MAX_ATTEMPTS):
        assert poll(app, aws) == ["killed"]
        clock.advance(10_000)  # past the dead invocation's lease
    invocation_dies_at_start(aws)  # the backstop receive: MaxAttempts + 1
    assert poll(app, aws) == []  # the next receive: SQS's own redrive moved it to the DLQ, attributes and all
    (raw,) = messages_in(aws.sqs, aws.dlq_url)
    assert raw["MessageId"] == original and raw["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "permanent"

    report = collect_status(sqs_client=aws.sqs, queue=aws.queue_url, dlq=aws.dlq_url, records=records(aws))

    (group,) = report.dlq_groups
    assert (group.job, group.reason, group.error_type, group.verified) == ("refund", "none", "", True)
    (failure,) = report.recent_failures
    assert (failure.message_id, failure.attempts, failure.error_message, failure.redrive_count) == (
        original, None, "", 0)  # SQS keeps the id: the one the worker logged for every attempt
    assert report.dlq_verified and not any("unverified" in n for n in report.notes)
    (ignored,) = [n for n in report.notes if "ignored" in n]
    assert ignored.startswith(f"message {original} (refund): ignored sqsjobs.attempts, sqsjobs.error_message")
    assert "no evidence that the worker wrote this letter" in ignored

    # Trusted, the forged count (999) would keep it as poison; it is 0, so it moves, and the forgery is named.
    summary = redrive(options(aws, dry_run=True), sqs_client=aws.sqs, records=records(aws))
    (plan,) = summary.planned
    assert (plan.message_id, plan.reason, plan.redrive_count, plan.action) == (original, "none", 0, "move")
    (note,) = [n for n in summary.notes if n.kind is NoteKind.UNTRUSTED_ATTRIBUTE]
    assert note.message_id == original
    assert "sqsjobs.reason" in note.detail and "sqsjobs.redrive_count" in note.detail
    # The source queue the forgery names is never a target: the DLQ's only source queue is.
    moved = redrive(options(aws), sqs_client=aws.sqs, records=records(aws))
    assert (moved.moved, moved.ok) == (1, True)
    (back,) = messages_in(aws.sqs, aws.queue_url)
    assert sorted(n for n in back["MessageAttributes"] if n.startswith("sqsjobs.")) == [
        "sqsjobs.job", "sqsjobs.redrive_count"]
    assert records(aws).get(redrive_key(back["MessageId"])).get("redrive_count") == 1  # type: ignore[union-attr]


def test_a_forged_message_re_sent_at_the_backstop_reaches_the_dlq_with_the_workers_reason_only(
        make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app()
    runs: list[int] = []

    @app.job("refund", key="refund:{order_id}")
    def refund(order_id: int) -> None:
        runs.append(order_id)
        raise RetryableError("payment provider timed out", delay=0)

    forged_id = send_forged(aws)
    no_time = FakeContext(remaining_ms=1_000, clock=clock)  # below the deadline margin: nothing starts
    outcomes = [o for _ in range(MAX_ATTEMPTS + 1) for o in poll(app, aws, context=no_time)]
    assert outcomes == [Outcome.UNSTARTED] * (MAX_ATTEMPTS + 1) and runs == []
    # At the backstop receive the worker re-sent it as a new message, without the forged attributes.
    (resent,) = messages_in(aws.sqs, aws.queue_url)
    assert resent["MessageId"] != forged_id
    assert sorted(n for n in resent["MessageAttributes"] if n.startswith("sqsjobs.")) == [
        "sqsjobs.job", "sqsjobs.resends"]

    outcomes = [o for _ in range(MAX_ATTEMPTS) for o in poll(app, aws)]
    assert outcomes == [Outcome.RETRY, Outcome.RETRY, Outcome.DEAD_LETTERED] and len(runs) == MAX_ATTEMPTS

    (letter,) = messages_in(aws.sqs, aws.dlq_url)
    assert records(aws).get(evidence_key(letter["MessageId"])) is not None  # the worker's proof
    attrs = {n: v["StringValue"] for n, v in letter["MessageAttributes"].items()}
    assert attrs["sqsjobs.reason"] == "exhausted" and "forged" not in attrs["sqsjobs.error_message"]
    assert "sqsjobs.redrive_count" not in attrs  # the forged 999 did not travel

    report = collect_status(sqs_client=aws.sqs, queue=aws.queue_url, dlq=aws.dlq_url, records=records(aws))
    (failure,) = report.recent_failures
    assert (failure.reason, failure.error_type, failure.attempts, failure.redrive_count) == (
        "exhausted", "RetryableError", MAX_ATTEMPTS, 0)
    assert failure.message_id == resent["MessageId"]  # the id of the message the worker ran and logged
    assert "payment provider timed out" in failure.error_message


def test_redrive_counts_honestly_whatever_the_attribute_says(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("refund", key="refund:{order_id}")
    def refund(order_id: int) -> None:
        raise PermanentError("order is locked")

    send_forged(aws, redrive_count="999")  # carried onto the first letter (a well-formed count): for people only
    assert poll(app, aws) == [Outcome.DEAD_LETTERED]
    store = records(aws)

    def honest_count() -> int | None:
        (letter,) = read_letters(messages_in(aws.sqs, aws.dlq_url), records=store, now=0.0).letters
        assert letter.worker_written and letter.reason == "permanent"
        return letter.redrive_count

    assert honest_count() == 0
    for expected in (1, 2):
        summary = redrive(options(aws), sqs_client=aws.sqs, records=store)
        assert (summary.moved, summary.skipped, summary.ok) == (1, {}, True)
        assert poll(app, aws) == [Outcome.DEAD_LETTERED]
        assert honest_count() == expected

    # The poison guard reads the same count: at --max-redrives 2 the letter stays.
    stopped = redrive(options(aws, max_redrives=2, dry_run=True), sqs_client=aws.sqs, records=store)
    assert [(p.redrive_count, p.action) for p in stopped.planned] == [(2, "skip:poison")]


def test_the_cli_and_the_redrive_lambda_read_the_table(make_app: Any, aws: Any, monkeypatch: pytest.MonkeyPatch
                                                       ) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    app = make_app()

    @app.job("refund", key="refund:{order_id}")
    def refund(order_id: int) -> None:
        raise PermanentError("order is locked")

    original = send_forged(aws, redrive_count="0")
    assert poll(app, aws) == [Outcome.DEAD_LETTERED]
    # The DLQ copy's own id is another one: only actions on the letter use it.
    (letter,) = messages_in(aws.sqs, aws.dlq_url)
    assert letter["MessageId"] != original

    status = CliRunner().invoke(build_app(), ["status", "--queue", aws.queue_url, "--table", aws.table, "--json"])
    assert status.exit_code == 0, status.output
    data = json.loads(status.stdout)
    assert data["dlq_verified"] and data["recent_failures"][0]["message_id"] == original
    unverified = CliRunner().invoke(build_app(), ["status", "--queue", aws.queue_url])
    assert "permanent (unverified)" in unverified.output and "no idempotency table" in unverified.output
    assert letter["MessageId"] not in unverified.output  # one id everywhere, even unverified (the claimed one)

    dry = CliRunner().invoke(build_app(), ["redrive", "--dlq", aws.dlq_url, "--table", aws.table, "--dry-run",
                                           "--wait-time", "0", "--json"])
    assert dry.exit_code == 0, dry.output
    (plan,) = json.loads(dry.stdout)["planned"]
    assert (plan["message_id"], plan["reason"], plan["verified"]) == (original, "permanent", True)

    result = handle_redrive_event({"wait_time_seconds": 0}, None, sqs_client=aws.sqs,
                                  environ={"SQSJOBS_DLQ_URL": aws.dlq_url}, records=records(aws))
    assert (result["moved"], result["unverified"], result["counts_unrecorded"]) == (1, None, 0)
    (back,) = messages_in(aws.sqs, aws.queue_url)
    assert records(aws).get(redrive_key(back["MessageId"])).get("redrive_count") == 1  # type: ignore[union-attr]


def test_a_letter_whose_count_cannot_be_written_stays_in_the_dlq(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("refund", key="refund:{order_id}")
    def refund(order_id: int) -> None:
        raise PermanentError("order is locked")

    send_forged(aws)
    assert poll(app, aws) == [Outcome.DEAD_LETTERED]

    class NoWrites(DynamoDBStore):
        def write_many(self, ops: Any) -> Any:
            from sqsjobs.store._lease import Written

            return [Written(key=op.key, ok=False, error="DynamoDB is throttling") for op in ops]

    summary = redrive(options(aws), sqs_client=aws.sqs, records=NoWrites(aws.dynamodb, aws.table))

    assert (summary.moved, summary.counts_unrecorded, summary.ok) == (0, 1, False)
    (note,) = [n for n in summary.notes if n.kind is NoteKind.COUNT_UNRECORDED]
    assert "DynamoDB is throttling" in note.detail
    assert len(messages_in(aws.sqs, aws.dlq_url)) == 1  # still there: a re-run moves it with its count
    assert len(messages_in(aws.sqs, aws.queue_url)) == 1  # and its sent copy runs through the guard
