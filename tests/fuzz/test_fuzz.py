"""Hostile records beside valid ones through ``JobApp.process_batch``: nothing escapes, nothing is silently dropped.

Two runs of the same property:

- ``test_hostile_records_never_escape_or_vanish``: the in-memory store and a
  recording SQS stand-in that refuses what SQS refuses (speed: this is the one
  ``make fuzz`` runs 10,000+ times);
- ``test_hostile_records_through_the_dynamodb_store``: the real DynamoDB store
  on in-process moto (``mock_aws``), fewer examples, so hostile keys also go
  through pynamodb and botocore serialization.

``SQSJOBS_FUZZ_EXAMPLES`` sets the example count (``make fuzz``: 10,000);
``make test`` runs a few hundred.
"""

from __future__ import annotations

import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from fuzz.strategies import (
    OK_JOB,
    POISON_JOB,
    V2_JOB,
    Case,
    RecordingSQS,
    dead_letter_for,
    hostile_record,
    valid_record,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sqsjobs import JobApp, Outcome, PermanentError, RetryableError
from sqsjobs.store._lease import LeaseState, LeaseStore
from sqsjobs.store._memory import InMemoryStore
from sqsjobs.testing import FakeContext
from sqsjobs.worker._dead_letters import Reason

EXAMPLES = int(os.environ.get("SQSJOBS_FUZZ_EXAMPLES", "200"))
REASONS = {reason.value for reason in Reason}
QUEUE_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/fuzz-jobs"
DLQ_URL = "https://sqs.us-east-1.amazonaws.com/123456789012/fuzz-dlq"
#: valid records use n from here up, so no hostile record can share their key
_valid_ids = itertools.count(10**12)
_message_ids = itertools.count()


@dataclass
class Worker:
    """A fuzzed app and what its jobs did."""

    app: JobApp
    sqs: RecordingSQS
    store: LeaseStore
    runs_ok: int = 0


def build_worker(store: LeaseStore) -> Worker:
    from aws_lambda_powertools import Logger

    sqs = RecordingSQS()
    app = JobApp(queue_url=QUEUE_URL, dlq_url=DLQ_URL, max_attempts=3, sqs_client=sqs,  # type: ignore[arg-type]
                 store=store, random=random.Random(0), emit_metrics=lambda line: None,
                 logger=Logger(service="fuzz", level="CRITICAL"))
    worker = Worker(app=app, sqs=sqs, store=store)

    @app.job(OK_JOB, key="fuzz-ok:{n}")
    def ok(n: int, label: str = "") -> None:
        worker.runs_ok += 1

    @app.job(V2_JOB, version=2)
    def v2(n: int, text: str, length: int) -> None:
        worker.runs_ok += 1

    @v2.upcaster(from_version=1)
    def add_length(args: dict[str, Any]) -> dict[str, Any]:
        # User code that trusts its input: hostile args make it raise, which must not crash the batch.
        return {**args, "length": len(args["text"]) + args["n"]}

    @app.job(POISON_JOB)
    def poison(n: int) -> None:
        raise PermanentError(f"record {n} is gone")

    return worker


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[Case], bool]:
    """1-10 records, at least one hostile, in any order; and whether SQS is down for this batch."""
    valid = draw(st.integers(0, 4))
    hostile = draw(st.integers(1, 10 - valid))
    cases = [valid_record(_valid_body(), f"valid-{next(_message_ids)}") for _ in range(valid)]
    cases += [draw(hostile_record(f"hostile-{next(_message_ids)}")) for _ in range(hostile)]
    return draw(st.permutations(cases)), draw(st.integers(0, 19)) == 0


_body_app = JobApp(queue_url=QUEUE_URL)


@_body_app.job(OK_JOB, key="fuzz-ok:{n}")
def _ok(n: int, label: str = "") -> None: ...


def _valid_body() -> str:
    return _ok.message(n=next(_valid_ids), label="valid").body


def check_batch(worker: Worker, cases: list[Case], sqs_down: bool) -> None:
    """Run one batch and check every record's fate against what it may become."""
    sqs = worker.sqs
    sqs.down = sqs_down
    sqs.dead_letters.clear()
    sqs.refused.clear()
    sqs.visibility.clear()
    worker.runs_ok = 0
    # The property itself: process_batch raises nothing for any record (an exception fails the example).
    # A stopped clock: every record starts, however slow the machine (the deadline is not under test).
    context = FakeContext(remaining_ms=60_000, clock=lambda: 0.0)
    result = worker.app.process_batch({"Records": [c.record for c in cases]}, context)

    by_id = {d.message_id: d for d in result.deliveries}
    assert len(by_id) == len(cases)
    failures = {item["itemIdentifier"] for item in result.response()["batchItemFailures"]}
    assert failures == {d.message_id for d in result.deliveries if not d.acknowledged}
    assert worker.runs_ok == result.count(Outcome.SUCCEEDED)
    for case in cases:
        d = by_id[case.record["messageId"]]
        where = f"{case.kind} record ({case.note}) → {d.outcome}: {d.error!r} {d.notes}"
        assert d.outcome is not None, where
        # An earlier copy of the same key in this batch was dead-lettered: the job itself is in the
        # DLQ with its reason, and the worker acknowledges this copy as its duplicate (docs/reliability.md).
        dead_copy = bool(d.key) and any(o.key == d.key and o.outcome is Outcome.DEAD_LETTERED and o.index < d.index
                        for o in result.deliveries)
        if d.outcome is Outcome.DEAD_LETTERED:
            entry = dead_letter_for(sqs, d.message_id)
            assert entry is not None, where
            attributes = entry["MessageAttributes"]
            assert attributes["sqsjobs.reason"]["StringValue"] in REASONS, where
            assert attributes["sqsjobs.error_type"]["StringValue"], where
        elif d.outcome is Outcome.DUPLICATE:
            record = worker.store.get(d.key)
            # Either the job completed (now or before), or it is in the DLQ through an earlier copy.
            assert (record is not None and record.state is LeaseState.DONE) or dead_copy, where
        elif not d.acknowledged:
            assert d.outcome in (Outcome.RETRY, Outcome.UNSTARTED, Outcome.GROUP_BLOCKED), where
            if not sqs_down:
                assert any(v["ReceiptHandle"] == d.receipt_handle for v in sqs.visibility), where
        if case.kind == "valid":
            assert d.outcome is Outcome.SUCCEEDED, where
        elif case.kind == "bad":
            assert d.outcome in (Outcome.DEAD_LETTERED, Outcome.RETRY) or dead_copy, where
            if d.outcome is Outcome.RETRY:
                # Not dead-lettered only because the DLQ refused it (or was down): reported failed, kept.
                # (A later copy of the same key shares the first copy's outcome, and its note.)
                assert any("DLQ send failed" in note for o in result.deliveries
                           if o is d or (d.key and o.key == d.key) for note in o.notes), where
                assert not isinstance(d.error, RetryableError) or sqs_down or sqs.refused, where
                # A body SQS delivered always fits back into the DLQ with its reasons: only an outage may stop it.
                assert sqs_down or not case.deliverable, where


def _run(worker: Worker, examples: int) -> int:
    count = 0

    @settings(max_examples=examples, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck))
    @given(batch=batches())
    def check(batch: tuple[list[Case], bool]) -> None:
        nonlocal count
        count += 1
        check_batch(worker, *batch)

    check()
    return count


@pytest.mark.slow
def test_hostile_records_never_escape_or_vanish() -> None:
    count = _run(build_worker(InMemoryStore()), EXAMPLES)
    print(f"fuzz (in-memory store, recording SQS): {count} examples")
    assert count >= EXAMPLES


@pytest.fixture
def dynamodb_store() -> Iterator[LeaseStore]:
    import boto3
    from moto import mock_aws

    from sqsjobs.store._dynamodb import DynamoDBStore

    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        client.create_table(TableName="fuzz", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                            AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                            BillingMode="PAY_PER_REQUEST")
        yield DynamoDBStore(client, "fuzz")


def test_hostile_records_through_the_dynamodb_store(dynamodb_store: LeaseStore) -> None:
    examples = max(50, EXAMPLES // 10)
    count = _run(build_worker(dynamodb_store), examples)
    print(f"fuzz (DynamoDB store on mock_aws): {count} examples")
    assert count >= examples
