"""Redrive and status against letters an attacker or bad luck wrote (issue 11, findings 2, 5, 6, 10; moto).

- Finding 2: letters older than the idempotency records are counted and noted.
- Finding 5: only the DLQ's source queues are targets; a forged or unreachable
  target leaves its letters in the DLQ and the rest still move.
- Finding 6: forged counters are malformed attributes, never a traceback, and
  never defeat the poison guard.
- Finding 10: DLQ copies of one letter show and move as one (when their
  evidence in the idempotency table says they are copies: issue 22, finding 9).

Most letters here are read without a table: their attributes are claims, and
these tests check that even a claim never raises and never defeats the guard.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from aws_support import create_table, prove_letter
from botocore.exceptions import ClientError
from integration.test_redrive_moto import FlakyClient, drain, make_queues, options, sqs, visible

from sqsjobs._settings import DEFAULT_RECORD_TTL
from sqsjobs.ops._dlq_letters import ATTR_REDRIVE_COUNT
from sqsjobs.ops._redrive import Redrive, redrive
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.ops._redrive_report import NoteKind
from sqsjobs.ops._status import collect_status
from sqsjobs.store._dynamodb import DynamoDBStore

__all__ = ["sqs"]  # the fixture, shared with test_redrive_moto.py

DAY = 86400.0
FORGED_COUNTS = ["-1000000", "1e999", "abc", "NaN", "sNaN", "99999999999999999999999999", "1.5", ""]


def sent_at(sqs: Any, dlq: str) -> float:
    """SentTimestamp of the DLQ's messages (seconds), left visible."""
    (first,) = sqs.receive_message(QueueUrl=dlq, AttributeNames=["SentTimestamp"], VisibilityTimeout=0)["Messages"][:1]
    return int(first["Attributes"]["SentTimestamp"]) / 1000


def forged(sqs: Any, dlq: str, *, key: int, attrs: dict[str, str], reason: str | None = "exhausted",
           job: str = "invoice-email") -> str:
    """A dead letter carrying ``attrs`` as String attributes (what a raw SendMessage can forge)."""
    values = {"sqsjobs.job": job, **({"sqsjobs.reason": reason} if reason else {}), **attrs}
    body = json.dumps({"v": 1, "job": job, "key": f"{job}:{key}", "args": {"id": key}})
    return str(sqs.send_message(QueueUrl=dlq, MessageBody=body, MessageAttributes={
        name: {"DataType": "String", "StringValue": value} for name, value in values.items()})["MessageId"])


def dead_letter(sqs: Any, dlq: str, *, key: int, source: str | None = None, job: str = "invoice-email") -> str:
    """A dead letter as the worker writes it, first received when it was sent."""
    attrs = {"sqsjobs.original_message_id": f"orig-{key}", "sqsjobs.error_type": "TimeoutError"}
    if source is not None:
        attrs["sqsjobs.source_queue"] = source
    return forged(sqs, dlq, key=key, attrs=attrs, job=job)


@pytest.fixture
def records(sqs: Any) -> DynamoDBStore:
    """The idempotency table (in the same moto as ``sqs``), where the worker's evidence lives."""
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    create_table(dynamodb, "idempotency")
    return DynamoDBStore(dynamodb, "idempotency")


def keys(messages: list[dict[str, Any]]) -> list[str]:
    return sorted(json.loads(m["Body"])["key"] for m in messages)


# -- finding 2: letters older than the record TTL -----------------------------------------


def test_letters_older_than_the_record_ttl_are_counted_and_noted_and_still_move(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src)
    now = sent_at(sqs, dlq)
    # The worker first received key 1 just now, key 2 twenty-two days ago.
    old = forged(sqs, dlq, key=2, attrs={"sqsjobs.source_queue": src,
                                         "sqsjobs.first_receive_time": str(int((now - 22 * DAY) * 1000))})

    summary = redrive(options(dlq), sqs_client=sqs, clock=lambda: now + 60)

    assert (summary.moved, summary.older_than_record_ttl, summary.record_ttl) == (2, 1, DEFAULT_RECORD_TTL)
    (note,) = [n for n in summary.notes if n.kind is NoteKind.OLDER_THAN_RECORD_TTL]
    assert note.message_id == old
    assert "22.0 days ago" in note.detail and "(21 days)" in note.detail and "runs it again" in note.detail
    assert keys(drain(sqs, src)) == ["invoice-email:1", "invoice-email:2"]


def test_the_record_ttl_comes_from_the_options_and_a_dry_run_counts_too(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in (1, 2):
        dead_letter(sqs, dlq, key=key, source=src)
    now = sent_at(sqs, dlq)

    # SentTimestamp counts when the worker's first receive time is not there (or later).
    summary = redrive(options(dlq, dry_run=True, record_ttl=3600), sqs_client=sqs, clock=lambda: now + 2 * 3600)
    assert (summary.matched, summary.older_than_record_ttl) == (2, 2)
    assert redrive(options(dlq, dry_run=True), sqs_client=sqs, clock=lambda: now + 2 * 3600).older_than_record_ttl == 0
    assert visible(sqs, dlq) == 2


def test_skipped_letters_are_not_counted_as_replays(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src, job="sync-account")
    now = sent_at(sqs, dlq)
    summary = redrive(options(dlq, job="invoice-email", record_ttl=1), sqs_client=sqs, clock=lambda: now + 10)
    assert (summary.skipped, summary.older_than_record_ttl) == ({"filtered": 1}, 0)


# -- finding 5: targets ------------------------------------------------------------------


def test_a_source_queue_attribute_naming_another_queue_stays_and_the_rest_move(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    elsewhere = sqs.create_queue(QueueName="attacker-chosen")["QueueUrl"]
    bad = forged(sqs, dlq, key=1, attrs={"sqsjobs.source_queue": elsewhere})
    dead_letter(sqs, dlq, key=2, source=src)

    summary = redrive(options(dlq), sqs_client=sqs)

    assert (summary.moved, dict(summary.skipped), summary.ok) == (1, {"not-a-source": 1}, True)
    (note,) = summary.notes
    assert (note.message_id, note.kind) == (bad, NoteKind.NOT_A_SOURCE)
    assert "attacker-chosen" in note.detail and "sources: jobs" in note.detail and "--to QUEUE" in note.detail
    assert drain(sqs, elsewhere) == []
    assert keys(drain(sqs, src)) == ["invoice-email:2"]
    assert keys(drain(sqs, dlq)) == ["invoice-email:1"]


def test_a_source_queue_on_a_letter_the_worker_did_not_write_is_ignored(sqs: Any) -> None:
    # SQS's own redrive moved it: no sqsjobs.reason, so its sqsjobs.source_queue came from a producer.
    src, dlq = make_queues(sqs)
    elsewhere = sqs.create_queue(QueueName="attacker-chosen")["QueueUrl"]
    forged(sqs, dlq, key=1, reason=None, attrs={"sqsjobs.source_queue": elsewhere, "sqsjobs.error_type": "X"})

    summary = redrive(options(dlq), sqs_client=sqs)

    assert summary.moved == 1
    (note,) = summary.notes
    assert note.kind is NoteKind.UNTRUSTED_ATTRIBUTE
    assert "sqsjobs.error_type, sqsjobs.source_queue" in note.detail
    assert drain(sqs, elsewhere) == []
    (moved,) = drain(sqs, src)
    # Nothing of ours but the producer's two and the count goes back.
    assert sorted(moved["MessageAttributes"]) == ["sqsjobs.job", ATTR_REDRIVE_COUNT]


def test_the_dlqs_source_queue_wins_over_a_configured_default(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    other = sqs.create_queue(QueueName="lambda-default")["QueueUrl"]
    dead_letter(sqs, dlq, key=1)  # no source attribute
    assert redrive(options(dlq, default_to=other), sqs_client=sqs).moved == 1
    assert len(drain(sqs, src)) == 1 and drain(sqs, other) == []


def test_a_source_queue_named_by_arn_or_another_host_still_matches(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    arn = sqs.get_queue_attributes(QueueUrl=src, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    forged(sqs, dlq, key=1, attrs={"sqsjobs.source_queue": arn})
    forged(sqs, dlq, key=2, attrs={"sqsjobs.source_queue": "http://127.0.0.1:4566/123456789012/jobs"})
    assert redrive(options(dlq), sqs_client=sqs).moved == 2
    assert len(drain(sqs, src)) == 2


def two_sources(sqs: Any) -> tuple[str, str, str]:
    src, dlq = make_queues(sqs)
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
    locked = sqs.create_queue(QueueName="locked", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    return src, locked, dlq


def test_an_unreachable_target_neither_stops_the_run_nor_keeps_the_others(sqs: Any) -> None:
    src, locked, dlq = two_sources(sqs)
    for key in range(15):
        dead_letter(sqs, dlq, key=key, source=locked)
    for key in range(100, 105):
        dead_letter(sqs, dlq, key=key, source=src)

    class Refusing:
        """The redrive Lambda may not send to `locked` (its policy, a KMS key...)."""

        def __getattr__(self, name: str) -> Any:
            return getattr(sqs, name)

        def send_message_batch(self, QueueUrl: str, Entries: Any) -> Any:
            if QueueUrl == locked:
                raise ClientError({"Error": {"Code": "AccessDenied", "Message": "not allowed"},
                                   "ResponseMetadata": {"HTTPStatusCode": 403}}, "SendMessageBatch")
            return sqs.send_message_batch(QueueUrl=QueueUrl, Entries=Entries)

    summary = redrive(options(dlq), sqs_client=Refusing())  # type: ignore[arg-type]

    assert summary.stopped in ("drained", "scanned") and summary.error is None
    assert summary.moved == 5 and not summary.ok
    assert summary.failed + summary.skipped.get("target-unreachable", 0) == 15
    assert summary.failed >= 1
    assert set(summary.target_errors) == {locked} and "AccessDenied" in summary.target_errors[locked]
    unreachable = [n for n in summary.notes if n.kind is NoteKind.TARGET_UNREACHABLE]
    assert len(unreachable) == 15 and all("locked" in n.detail for n in unreachable)
    assert len(drain(sqs, src)) == 5
    assert len(drain(sqs, dlq)) == 15  # nothing lost, all visible again


def test_a_throttled_send_still_stops_the_run_for_a_rerun(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(12):
        dead_letter(sqs, dlq, key=key, source=src)
    error = ClientError({"Error": {"Code": "AWS.SimpleQueueService.RequestThrottled", "Message": "slow down"}},
                        "SendMessageBatch")
    summary = redrive(options(dlq), sqs_client=FlakyClient(sqs, "send_message_batch", 1, error))  # type: ignore[arg-type]
    assert (summary.moved, summary.stopped) == (0, "error")
    assert visible(sqs, dlq) == 12


# -- finding 6: forged counters ------------------------------------------------------------


@pytest.mark.parametrize("value", FORGED_COUNTS)
def test_a_forged_redrive_count_is_a_malformed_attribute_and_poison_suspect(sqs: Any, value: str) -> None:
    src, dlq = make_queues(sqs)
    bad = forged(sqs, dlq, key=1, attrs={"sqsjobs.source_queue": src, ATTR_REDRIVE_COUNT: value})
    dead_letter(sqs, dlq, key=2, source=src)

    summary = redrive(options(dlq), sqs_client=sqs)

    assert (summary.moved, dict(summary.skipped), summary.malformed_attributes) == (1, {"poison-suspect": 1}, 1)
    (note,) = summary.notes
    assert (note.message_id, note.kind) == (bad, NoteKind.MALFORMED_ATTRIBUTE)
    assert note.detail.startswith(f"sqsjobs.redrive_count {value[:40]!r}: not a whole number from 0 to 1000000")
    json.dumps(summary.to_dict())  # the Lambda's answer is still JSON
    # --force moves it, and its count restarts at the limit: the guard stops it next time.
    forced = redrive(options(dlq, force=True, max_redrives=3), sqs_client=sqs)
    assert forced.moved == 1
    counts = sorted(m["MessageAttributes"][ATTR_REDRIVE_COUNT]["StringValue"] for m in drain(sqs, src))
    assert counts == ["1", "3"]


def test_forged_attempts_and_times_are_reported_not_raised(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    forged(sqs, dlq, key=1, attrs={"sqsjobs.source_queue": src, "sqsjobs.attempts": "1e999",
                                   "sqsjobs.first_receive_time": "-5"})
    summary = redrive(options(dlq, dry_run=True), sqs_client=sqs)
    assert (summary.matched, summary.malformed_attributes) == (1, 1)
    assert sorted(n.detail.split(" ")[0] for n in summary.notes) == ["sqsjobs.attempts", "sqsjobs.first_receive_time"]


@pytest.mark.parametrize("value", FORGED_COUNTS)
def test_status_reads_forged_counters_without_raising(sqs: Any, value: str) -> None:
    src, dlq = make_queues(sqs)
    forged(sqs, dlq, key=1, attrs={ATTR_REDRIVE_COUNT: value, "sqsjobs.attempts": value})

    report = collect_status(sqs_client=sqs, queue=src, dlq=dlq)

    (failure,) = report.recent_failures
    assert (failure.redrive_count, failure.attempts) == (None, None)
    assert report.dlq_malformed_attributes == 1
    lines = [n for n in report.notes if "malformed attribute" in n]
    assert len(lines) == 2 and any("poison-suspect" in n for n in lines)
    json.dumps(report.to_dict())


# -- finding 10: copies of one dead letter -------------------------------------------------


def proven(sqs: Any, dlq: str, records: DynamoDBStore, src: str, *, key: int) -> str:
    """A dead letter of original message ``orig-<key>`` as the worker writes it: the letter and its evidence."""
    dlq_id = dead_letter(sqs, dlq, key=key, source=src)
    prove_letter(records, dlq_id, original=f"orig-{key}", key=f"invoice-email:{key}", source_queue=src)
    return dlq_id


def copies(sqs: Any, dlq: str, records: DynamoDBStore, src: str, *, key: int, count: int = 2) -> None:
    """The same dead letter ``count`` times (an acknowledgement lost after the DLQ send): one original each."""
    for _ in range(count):
        proven(sqs, dlq, records, src, key=key)


def test_copies_of_one_letter_move_once_and_the_extra_copies_are_deleted(sqs: Any, records: DynamoDBStore) -> None:
    src, dlq = make_queues(sqs)
    copies(sqs, dlq, records, src, key=1, count=3)
    proven(sqs, dlq, records, src, key=2)

    summary = redrive(options(dlq), sqs_client=sqs, records=records)

    assert (summary.moved, summary.duplicates, summary.ok, summary.left) == (2, 2, True, 0)
    assert keys(drain(sqs, src)) == ["invoice-email:1", "invoice-email:2"]


def test_a_copy_received_in_a_later_round_is_deleted_too(sqs: Any, records: DynamoDBStore) -> None:
    src, dlq = make_queues(sqs)
    for key in range(10):
        proven(sqs, dlq, records, src, key=key)
    proven(sqs, dlq, records, src, key=0)  # the copy of key 0, after a full receive

    summary = Redrive(options(dlq), sqs_client=sqs, records=records).run()

    assert (summary.moved, summary.duplicates, summary.left) == (10, 1, 0)
    assert len(drain(sqs, src)) == 10


def test_a_dry_run_shows_the_extra_copies_and_changes_nothing(sqs: Any, records: DynamoDBStore) -> None:
    src, dlq = make_queues(sqs)
    copies(sqs, dlq, records, src, key=1)

    summary = redrive(options(dlq, dry_run=True), sqs_client=sqs, records=records)

    assert (summary.matched, summary.duplicates) == (1, 1)
    assert sorted(p.action for p in summary.planned) == ["delete:duplicate", "move"]
    assert visible(sqs, dlq) == 2


def test_copies_stay_when_the_send_of_their_twin_fails(sqs: Any, records: DynamoDBStore) -> None:
    src, dlq = make_queues(sqs)
    copies(sqs, dlq, records, src, key=1)

    class RejectAll:
        def __getattr__(self, name: str) -> Any:
            return getattr(sqs, name)

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            return {"Successful": [], "Failed": [{"Id": e["Id"], "SenderFault": False, "Code": "InternalError",
                                                 "Message": "x"} for e in Entries]}

    summary = redrive(options(dlq), sqs_client=RejectAll(), records=records)  # type: ignore[arg-type]
    assert (summary.moved, summary.duplicates, summary.failed) == (0, 0, 1)
    assert visible(sqs, dlq) == 2


@pytest.mark.parametrize("with_table", [False, True])
def test_letters_no_evidence_proves_are_never_merged(sqs: Any, records: DynamoDBStore, with_table: bool) -> None:
    # The same claimed original id, even with a claimed reason: only evidence says two letters are one.
    _src, dlq = make_queues(sqs)
    for key in (1, 2):
        forged(sqs, dlq, key=key, attrs={"sqsjobs.original_message_id": "same"})
    summary = redrive(options(dlq), sqs_client=sqs, records=records if with_table else None)
    assert (summary.moved, summary.duplicates) == (2, 0)


def test_status_shows_copies_as_one_letter(sqs: Any, records: DynamoDBStore) -> None:
    src, dlq = make_queues(sqs)
    copies(sqs, dlq, records, src, key=1, count=2)
    proven(sqs, dlq, records, src, key=2)

    report = collect_status(sqs_client=sqs, queue=src, dlq=dlq, records=records)

    assert report.dlq is not None and report.dlq.depth == 3  # SQS's own count
    assert [g.count for g in report.dlq_groups] == [2]
    assert report.dlq_duplicates == 1 and len(report.recent_failures) == 2
    assert any("1 DLQ message(s) are extra copies" in n for n in report.notes)


def test_redrive_options_refuse_a_record_ttl_that_is_not_positive() -> None:
    from sqsjobs import RedriveError

    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(RedriveError, match="record_ttl must be a positive number of seconds"):
            RedriveOptions(dlq="d", record_ttl=bad)


# -- the commands an operator runs ----------------------------------------------------------


def cli(*args: str) -> Any:
    from typer.testing import CliRunner

    from sqsjobs.cli import build_app

    return CliRunner().invoke(build_app(), list(args))


@pytest.mark.parametrize("value", ["1e999", "-1000000", "abc"])
def test_cli_status_and_redrive_show_a_forged_letter_without_a_traceback(
    sqs: Any, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    src, dlq = make_queues(sqs)
    # Text from a letter is shown as written: "[/red]" is neither markup nor a crash.
    forged(sqs, dlq, key=1, job="[/red]invoice",
           attrs={ATTR_REDRIVE_COUNT: value, "sqsjobs.error_message": "[/x] boom"})

    status = cli("status", "--queue", src, "--dlq", dlq)
    assert status.exit_code == 0, status.output
    assert "[/red]invoice" in status.output and "malformed attribute" in status.output
    assert cli("status", "--queue", src, "--dlq", dlq, "--json").exit_code == 0

    dry = cli("redrive", "--dlq", dlq, "--dry-run", "--wait-time", "0")
    assert dry.exit_code == 0, dry.output
    assert "skip:poison-suspect" in dry.output and "note:" in dry.output and "Traceback" not in dry.output
    moved = cli("redrive", "--dlq", dlq, "--wait-time", "0", "--json")
    assert moved.exit_code == 0, moved.output
    data = json.loads(moved.stdout)
    assert (data["skipped"], data["malformed_attributes"]) == ({"poison-suspect": 1}, 1)
    assert data["notes"][0]["kind"] == "malformed-attribute"


def test_cli_redrive_warns_about_letters_older_than_the_record_ttl(sqs: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src)
    now = sent_at(sqs, dlq)
    first = str(int((now - 3 * DAY) * 1000))
    forged(sqs, dlq, key=2, attrs={"sqsjobs.source_queue": src, "sqsjobs.first_receive_time": first})

    # The stack's RecordTtlSeconds reaches the CLI as --record-ttl or SQSJOBS_RECORD_TTL_SECONDS.
    flag = cli("redrive", "--dlq", dlq, "--dry-run", "--wait-time", "0", "--record-ttl", str(2 * DAY))
    assert flag.exit_code == 0, flag.output
    assert "older than the record TTL" in flag.output and "warning: 1 letter(s)" in flag.output
    assert "more than 2 days ago" in flag.output
    monkeypatch.setenv("SQSJOBS_RECORD_TTL_SECONDS", str(DAY))
    env = cli("redrive", "--dlq", dlq, "--dry-run", "--wait-time", "0", "--json")
    assert json.loads(env.stdout)["older_than_record_ttl"] == 1  # the new one is younger than a day
    bad = cli("redrive", "--dlq", dlq, "--record-ttl", "-5")
    assert bad.exit_code == 2 and "record_ttl must be a positive number" in bad.output


def test_the_redrive_lambda_reads_the_record_ttl_and_caps_its_notes(sqs: Any) -> None:
    from sqsjobs import RedriveError
    from sqsjobs.ops._redrive_event import LAMBDA_PLANNED_LINES, handle_redrive_event
    from sqsjobs.ops._redrive_options import options_from_event

    src, dlq = make_queues(sqs)
    env = {"SQSJOBS_DLQ_URL": dlq, "SQSJOBS_QUEUE_URL": src, "SQSJOBS_RECORD_TTL_SECONDS": "1209600"}
    assert options_from_event({}, environ=env).record_ttl == 1209600
    assert options_from_event({"record_ttl": 60}, environ=env).record_ttl == 60
    with pytest.raises(RedriveError, match="SQSJOBS_RECORD_TTL_SECONDS must be a positive number of seconds"):
        options_from_event({}, environ={**env, "SQSJOBS_RECORD_TTL_SECONDS": "three weeks"})

    for key in range(LAMBDA_PLANNED_LINES + 5):
        forged(sqs, dlq, key=key, attrs={ATTR_REDRIVE_COUNT: "abc"})

    class Context:
        def get_remaining_time_in_millis(self) -> int:
            return 300_000

    result = handle_redrive_event({"dry_run": True, "wait_time_seconds": 0}, Context(), sqs_client=sqs, environ=env)
    assert result["notes_total"] == LAMBDA_PLANNED_LINES + 5 and len(result["notes"]) == LAMBDA_PLANNED_LINES
    assert result["skipped"] == {"poison-suspect": LAMBDA_PLANNED_LINES + 5}
    json.dumps(result)
