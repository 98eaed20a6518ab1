"""DynamoDB round trips per batch, counted through botocore's event hooks (never timed).

A "sequential round trip" is a link in the longest chain of calls where each
call starts only after the previous one answered. Calls are ordered by a
counter bumped in ``before-send`` and ``after-call``; a small latency injected
in ``before-send`` makes concurrent calls overlap reliably, so the count does
not depend on scheduling luck.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from typing import Any

from sqsjobs import Outcome
from sqsjobs.testing import sqs_event


class CallRecorder:
    def __init__(self, client: Any, latency: float = 0.05) -> None:
        self.counter = itertools.count()
        self.lock = threading.Lock()
        self.calls: list[dict[str, Any]] = []
        self.latency = latency
        self._open: dict[int, dict[str, Any]] = {}
        events = client.meta.events
        events.register("before-send.dynamodb.*", self._before_send)
        events.register("after-call.dynamodb.*", self._after_call)

    def _tick(self) -> int:
        with self.lock:
            return next(self.counter)

    def _before_send(self, request: Any, **kwargs: Any) -> None:
        call = {"start": self._tick(), "op": request.context.get("operation_name") if hasattr(request, "context")
                else None}
        self._open[threading.get_ident()] = call
        time.sleep(self.latency)  # models network latency so parallel calls overlap

    def _after_call(self, model: Any, **kwargs: Any) -> None:
        call = self._open.pop(threading.get_ident())
        call["end"] = self._tick()
        call["op"] = model.name
        with self.lock:
            self.calls.append(call)

    def sequential_round_trips(self) -> int:
        # Longest chain a1 -> a2 -> ... with a(i+1).start > a(i).end (interval-order longest path).
        calls = sorted(self.calls, key=lambda c: c["end"])
        depth: list[int] = []
        for i, call in enumerate(calls):
            before = [depth[j] for j in range(i) if calls[j]["end"] < call["start"]]
            depth.append(1 + max(before, default=0))
        return max(depth, default=0)


def test_a_batch_of_ten_successes_takes_two_sequential_round_trips(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    recorder = CallRecorder(aws.dynamodb)
    event = sqs_event([json.loads(send.message(invoice_id=i).body) for i in range(10)])
    result = app.process_batch(event)

    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 10
    ops = sorted(c["op"] for c in recorder.calls)
    assert ops == ["UpdateItem"] * 20  # 1 claim + 1 completion per record: 2 WCU
    # Each completion is written the moment its job returns, overlapped with the next job (a crash window
    # of one job), and still the batch waits for DynamoDB only twice.
    assert recorder.sequential_round_trips() == 2


def test_duplicates_cost_one_round_trip_and_no_second_write(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    bodies = [json.loads(send.message(invoice_id=i).body) for i in range(10)]
    app.process_batch(sqs_event(bodies))
    recorder = CallRecorder(aws.dynamodb)
    again = app.process_batch(sqs_event(bodies))

    assert [d.outcome for d in again.deliveries] == [Outcome.DUPLICATE] * 10
    assert sorted(c["op"] for c in recorder.calls) == ["UpdateItem"] * 10  # the claim fails: ALL_OLD says done
    assert recorder.sequential_round_trips() == 1
