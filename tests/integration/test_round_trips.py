"""DynamoDB round trips per batch, counted through botocore's event hooks (never timed).

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

    recorder = CallRecorder(aws.dynamodb, wave=10)
    event = sqs_event([json.loads(send.message(invoice_id=i).body) for i in range(10)])
    result = app.process_batch(event)

    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 10
    ops = sorted(c["op"] for c in recorder.calls)
    assert ops == ["UpdateItem"] * 20  # 1 claim + 1 completion per record: 2 WCU
    # Each completion is written the moment its job returns, overlapped with the next job (a crash window
    # of one job), and still the batch waits for DynamoDB only twice.
    assert recorder.sequential_round_trips() == 2 and not recorder.broken_waves


def test_duplicates_cost_one_round_trip_and_no_second_write(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    bodies = [json.loads(send.message(invoice_id=i).body) for i in range(10)]
    app.process_batch(sqs_event(bodies))
    recorder = CallRecorder(aws.dynamodb, wave=10)
    again = app.process_batch(sqs_event(bodies))

    assert [d.outcome for d in again.deliveries] == [Outcome.DUPLICATE] * 10
    assert sorted(c["op"] for c in recorder.calls) == ["UpdateItem"] * 10  # the claim fails: ALL_OLD says done
    assert recorder.sequential_round_trips() == 1 and not recorder.broken_waves
