"""A letter's reason is the worker's evidence, never its attributes (issue 22, finding 9; issue 25, finding 9).

The reader (``ops/_dlq_evidence.py``) against an in-memory table, and the
worker's side under ``app.testing()``: the evidence it writes once the DLQ
send succeeded, the attributes its re-send keeps, and the message ids
``send_entries`` returns.
"""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest
from aws_support import create_table, prove_letter
from moto import mock_aws

from sqsjobs import JobApp, Outcome, PermanentError
from sqsjobs._errors import StoreError
from sqsjobs.enqueue._batching import send_entries
from sqsjobs.ops._dlq_evidence import UNCHECKED_NOTE, read_letters
from sqsjobs.ops._dlq_letters import Provenance
from sqsjobs.ops._status import _one_per_original
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._lease import LeaseStore, Operation, Written, is_reserved
from sqsjobs.store._lease_ops import Close
from sqsjobs.store._memory import InMemoryStore
from sqsjobs.testing import FakeSQS
from sqsjobs.worker._dead_letters import (
    MAX_ERROR_MESSAGE,
    DeadLetter,
    Reason,
    carry_redrive_counts,
    evidence_key,
    evidence_of,
    redrive_key,
    redrive_record,
)
from sqsjobs.worker._delivery import Delivery
from sqsjobs.worker._send_back import resend_entry

FORGED = {"sqsjobs.reason": "permanent", "sqsjobs.error_type": "PermanentError",
          "sqsjobs.error_message": "forged", "sqsjobs.attempts": "1", "sqsjobs.redrive_count": "0",
          "sqsjobs.original_message_id": "someone-else", "sqsjobs.source_queue": "https://evil/q"}


def letter(message_id: str, attrs: dict[str, str] | None = None, job: str = "refund") -> dict[str, Any]:
    """A DLQ message as ReceiveMessage returns it."""
    return {"MessageId": message_id, "Body": json.dumps({"v": 1, "job": job, "key": f"{job}:1", "args": {}}),
            "Attributes": {"SentTimestamp": "1000"},
            "MessageAttributes": {n: {"DataType": "String", "StringValue": v} for n, v in (attrs or {}).items()}}


def test_forged_reason_attributes_on_a_letter_without_evidence_are_ignored_and_named() -> None:
    (read,) = read_letters([letter("d-1", FORGED)], records=InMemoryStore(), now=61.0).letters

    assert (read.reason, read.provenance, read.verified) == ("none", Provenance.UNPROVEN, True)
    assert (read.error_type, read.error_message, read.attempts, read.source_queue) == ("", "", None, None)
    assert read.redrive_count == 0 and not read.bad_attributes
    # SQS's own move keeps the id: it is the original, and nothing groups it with "someone-else".
    assert (read.original_message_id, read.copy_of) == ("d-1", "d-1")
    assert read.ignored_attributes == tuple(sorted(FORGED))


def test_a_worker_letter_reads_its_evidence_whatever_its_attributes_say() -> None:
    app = JobApp()

    @app.job("refund", key="refund:{order_id}")
    def refund(order_id: int) -> None:
        raise PermanentError("order 7 is locked")

    with app.testing() as t:
        t.run(refund.message(order_id=7))
        (dlq_message,) = t.sqs.messages(t.dlq_url)
        assert t.store.get(evidence_key(dlq_message.message_id)) is not None
        # Whoever rewrites the letter's attributes changes what people see in raw SQS, not what sqsjobs reads.
        for name, value in FORGED.items():
            dlq_message.attributes[name] = {"DataType": "String", "StringValue": value}
        (read,) = t.dead_letters()
        queue_url = t.queue_url

    assert read.provenance is Provenance.WORKER
    assert (read.reason, read.error_type, read.error_message) == ("permanent", "PermanentError", "order 7 is locked")
    assert (read.attempts, read.key, read.redrive_count) == (1, "refund:7", 0)
    # One id everywhere: the message the worker ran and logged, not the DLQ copy's.
    assert read.original_message_id == t.outcomes[0].message_id != read.message_id
    assert read.source_queue == queue_url


def test_copies_are_one_letter_only_when_their_evidence_says_so() -> None:
    store = InMemoryStore()
    for copy in ("d-1", "d-2"):  # an acknowledgement lost after the DLQ send: two copies of message m-1
        prove_letter(store, copy, original="m-1")
    messages = [letter("d-1"), letter("d-2"), letter("d-3", {**FORGED, "sqsjobs.original_message_id": "m-1"}),
                letter("m-1", FORGED)]  # d-3 only claims m-1; "m-1" is m-1 itself, moved by SQS (same id)

    letters = list(read_letters(messages, records=store, now=0.0).letters)

    assert [read.copy_of for read in letters] == ["m-1", "m-1", "d-3", "m-1"]
    assert [read.message_id for read in _one_per_original(letters)] == ["d-1", "d-3"]
    # Without the table nothing is grouped: a claim is no evidence.
    unchecked = list(read_letters(messages, records=None, now=0.0).letters)
    assert len(_one_per_original(unchecked)) == 4


@pytest.mark.parametrize(("claimed", "kept", "honest"), [("0", 3, 3), ("999", 0, 0), ("abc", 2, 2)])
def test_a_forged_redrive_count_low_or_high_is_never_read(claimed: str, kept: int, honest: int) -> None:
    store = InMemoryStore()
    prove_letter(store, "d-1", original="m-1", redrives=kept)
    attrs = {"sqsjobs.reason": "exhausted", "sqsjobs.redrive_count": claimed}

    (read,) = read_letters([letter("d-1", attrs)], records=store, now=0.0).letters

    assert (read.redrive_count, read.poison_suspect, read.bad_attributes) == (honest, False, ())


def test_a_redrive_count_item_that_holds_garbage_is_poison_suspect() -> None:
    store = InMemoryStore()
    store.write(Close(key=redrive_key("d-1"), now=0.0, expires_at=9e9, data={"redrive_count": -4}))
    (read,) = read_letters([letter("d-1")], records=store, now=0.0).letters
    assert read.redrive_count is None and read.poison_suspect


def test_without_a_table_the_claims_show_marked_unverified_and_one_note_says_why() -> None:
    reading = read_letters([letter("d-1", FORGED), letter("d-2", FORGED)], records=None, now=0.0)

    assert reading.note == UNCHECKED_NOTE and not reading.checked
    assert [(r.reason, r.verified, r.provenance) for r in reading.letters] == [
        ("permanent", False, Provenance.UNCHECKED)] * 2
    assert reading.letters[0].original_message_id == "someone-else"  # the claim, shown as one


def test_a_table_that_cannot_be_read_leaves_every_letter_unverified_with_the_error() -> None:
    class Down(InMemoryStore):
        def get(self, key: str) -> Any:
            raise StoreError("DynamoDB BatchGetItem on table jobs failed: throttled")

    reading = read_letters([letter("d-1", FORGED)], records=Down(), now=0.0)

    assert reading.note is not None and "throttled" in reading.note and "unverified" in reading.note
    assert not reading.letters[0].verified


@pytest.mark.moto
def test_a_hundred_letters_cost_two_batch_gets() -> None:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(dynamodb, "records")
        store = DynamoDBStore(dynamodb, "records")
        for i in range(0, 100, 2):
            prove_letter(store, f"d-{i}", original=f"m-{i}", redrives=1)
        calls: list[str] = []
        dynamodb.meta.events.register("before-call.dynamodb.*", lambda model, **_: calls.append(model.name))

        letters = read_letters([letter(f"d-{i}") for i in range(100)], records=store, now=0.0).letters

    assert calls == ["BatchGetItem", "BatchGetItem"]  # the evidence, then the counts of what it names
    assert [r.redrive_count for r in letters[:4]] == [1, 0, 1, 0]
    assert sum(r.worker_written for r in letters) == 50


# -- the worker's side ---------------------------------------------------------------------------


def test_send_entries_returns_the_id_sqs_gave_each_message() -> None:
    sqs = FakeSQS()
    url = sqs.queue_url("dlq")
    entries = [{"Id": str(i), "MessageBody": f"m{i}"} for i in range(12)] + [{"Id": "bad", "MessageBody": ""}]

    sent = send_entries(sqs, url, entries)  # type: ignore[arg-type]

    ids = {entry_id: answer.message_id for entry_id, answer in sent.items() if answer.ok}
    assert sorted(ids.values()) == sorted(m.message_id for m in sqs.messages(url)) and len(ids) == 12
    assert not sent["bad"].ok and sent["bad"].message_id is None and sent["bad"].error


def dead_letter(**changes: Any) -> DeadLetter:
    fields: dict[str, Any] = dict(message_id="m-1", body="{}", reason=Reason.EXHAUSTED, error_type="TimeoutError",
                                  error_message="slow", job="refund", attempts=3, first_receive_time=1000,
                                  source_queue="https://sqs/q", source_attributes={}, key="refund:7")
    return DeadLetter(**{**fields, **changes})


def test_the_evidence_holds_what_the_reason_attributes_say_and_is_a_reserved_key() -> None:
    op = evidence_of(dead_letter(error_message="x" * 5000 + "\udc80", job="j\udc80"), "d-9", now=0.0,
                     expires_at=100.0)

    assert op.key == "dlq#d-9" and is_reserved(op.key) and is_reserved(redrive_key("n"))
    assert len(str(op.data["error_message"])) == MAX_ERROR_MESSAGE  # truncated, as the attribute is
    assert op.data["job"] == "j\ufffd"  # DynamoDB takes only UTF-8: a lone surrogate from a body is replaced
    assert (op.data["original_message_id"], op.data["reason"], op.data["attempts_made"]) == ("m-1", "exhausted", 3)
    assert op.expires_at == 100.0


@pytest.mark.moto
def test_the_evidence_fields_are_the_tables_own() -> None:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(dynamodb, "records")
        store = DynamoDBStore(dynamodb, "records")
        ops: list[Operation] = [evidence_of(dead_letter(), "d-1", now=0.0, expires_at=9e9),
                                redrive_record("n-1", count=2, redriven_from="m-1", job="refund", now=0.0,
                                               expires_at=9e9)]
        assert all(w.ok for w in store.write_many(ops))
        (read,) = read_letters([letter("d-1")], records=store, now=0.0).letters
    assert (read.reason, read.attempts, read.key, read.source_queue) == ("exhausted", 3, "refund:7", "https://sqs/q")


def test_a_failed_evidence_write_leaves_the_letter_unproven_and_the_job_dead_lettered() -> None:
    class NoEvidence(InMemoryStore):
        def _apply(self, op: Operation) -> Written:
            if op.key.startswith("dlq#"):
                raise StoreError("DynamoDB UpdateItem on table jobs failed: throttled")
            return super()._apply(op)

    app = JobApp()

    @app.job("refund", key="refund:{order_id}")
    def refund(order_id: int) -> None:
        raise PermanentError("order 7 is locked")

    with app.testing(store=NoEvidence()) as t:
        t.run(refund.message(order_id=7))
        (read,) = t.dead_letters()
    assert t.outcomes[0].outcome is Outcome.DEAD_LETTERED
    assert (read.reason, read.provenance) == ("none", Provenance.UNPROVEN)  # unproven, never the attributes' word


def record(attrs: dict[str, str]) -> Delivery:
    return Delivery.parse({"messageId": "m", "receiptHandle": "r", "body": "{}", "messageAttributes": {
        n: {"stringValue": v, "dataType": "String"} for n, v in attrs.items()}}, 0)


def test_a_re_send_keeps_only_the_producers_two_sqsjobs_attributes() -> None:
    attrs = {**FORGED, "SQSJobs.Reason": "key_conflict", "sqsjobs.job": "refund", "sqsjobs.trace_id": "t-1",
             "sqsjobs.resends": "2", "tenant": "acme"}

    sent = resend_entry(record(attrs), "0", fifo=False)["MessageAttributes"]

    assert sorted(sent) == ["sqsjobs.job", "sqsjobs.resends", "sqsjobs.trace_id", "tenant"]
    assert sent["sqsjobs.resends"]["StringValue"] == "3"


def test_a_re_sent_message_keeps_its_redrive_count_in_the_table() -> None:
    store = InMemoryStore()
    store.write(redrive_record("old-1", count=2, redriven_from="m-0", job="refund", now=0.0, expires_at=9e9))

    errors = carry_redrive_counts(store, {"old-1": "new-1", "old-2": "new-2"}, now=0.0, expires_at=9e9)

    assert errors == []
    carried = store.get(redrive_key("new-1"))
    assert carried is not None and (carried.get("redrive_count"), carried.get("redriven_from")) == (2, "m-0")
    assert store.get(redrive_key("new-2")) is None  # never redriven: nothing to carry


def test_carrying_counts_never_raises_when_the_table_fails() -> None:
    class Down(InMemoryStore):
        def get(self, key: str) -> Any:
            raise StoreError("throttled")

    store: LeaseStore = Down()
    assert carry_redrive_counts(store, {"old": "new"}, now=0.0, expires_at=9e9) == [
        "could not read the redrive counts of re-sent messages: throttled"]
