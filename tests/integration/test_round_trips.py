"""DynamoDB calls and round trips per batch, counted through botocore's event hooks (never timed).

A "sequential round trip" is a link in the longest chain of calls where each
call starts only after the previous one answered. Calls are ordered by a
counter bumped in ``before-send`` and ``after-call``. To make calls the worker
issues concurrently overlap whatever the scheduler does, ``before-send`` holds
each call at a gate until a whole wave (``wave`` calls) is in flight: calls
that were sent together are then all open at once. A worker that sends them
one after another never fills the wave; the gate then opens after
``HANG_BOUND`` seconds, which only bounds that failure, and the count shows
the chain.
"""

from __future__ import annotations

import json
from typing import Any

from aws_support import CallRecorder

from sqsjobs import Outcome
from sqsjobs.testing import sqs_event


def test_a_batch_of_ten_successes_takes_two_sequential_round_trips(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    recorder = CallRecorder(aws.dynamodb)
    event = sqs_event([json.loads(send.message(invoice_id=i).body) for i in range(10)])
    result = app.process_batch(event)

    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 10
    # The ten claims are INSERTs in one BatchExecuteStatement (first deliveries: receive count 1), the ten
    # completions fenced UPDATEs in one more, written together once the jobs ran (store/_statements.py).
    assert [c["op"] for c in recorder.calls] == ["BatchExecuteStatement"] * 2
    assert recorder.sequential_round_trips() == 2


def test_twenty_six_records_go_in_two_statement_calls_each_sent_together(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    recorder = CallRecorder(aws.dynamodb, wave=2)
    result = app.process_batch(sqs_event([json.loads(send.message(invoice_id=i).body) for i in range(26)]))

    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 26
    assert [c["op"] for c in recorder.calls] == ["BatchExecuteStatement"] * 4  # 25 + 1 claims, 25 + 1 completions
    assert recorder.sequential_round_trips() == 2 and not recorder.broken_waves


def test_duplicates_cost_one_round_trip_and_no_second_write(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    bodies = [json.loads(send.message(invoice_id=i).body) for i in range(10)]
    app.process_batch(sqs_event(bodies))
    recorder = CallRecorder(aws.dynamodb)
    again = app.process_batch(sqs_event(bodies))

    assert [d.outcome for d in again.deliveries] == [Outcome.DUPLICATE] * 10
    # The INSERTs meet the items (DuplicateItem); one consistent read of them shows each DONE: no second write.
    assert [c["op"] for c in recorder.calls] == ["BatchExecuteStatement", "BatchGetItem"]
    assert recorder.sequential_round_trips() == 2


def test_redeliveries_claim_with_one_conditional_update_each_at_once(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    bodies = [json.loads(send.message(invoice_id=i).body) for i in range(10)]
    app.process_batch(sqs_event(bodies))
    recorder = CallRecorder(aws.dynamodb, wave=10)
    again = app.process_batch(sqs_event(bodies, attempt=2))

    assert [d.outcome for d in again.deliveries] == [Outcome.DUPLICATE] * 10
    assert [c["op"] for c in recorder.calls] == ["UpdateItem"] * 10  # a takeover needs ALL_OLD on success
    assert recorder.sequential_round_trips() == 1 and not recorder.broken_waves
