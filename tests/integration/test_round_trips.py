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

import itertools
import json
import threading
from typing import Any

from sqsjobs import Outcome
from sqsjobs.testing import sqs_event

#: how long a call waits for the rest of its wave before the gate gives up (a failing worker only)
HANG_BOUND = 30.0


class CallRecorder:
    def __init__(self, client: Any, wave: int) -> None:
        self.counter = itertools.count()
        self.lock = threading.Condition()
        self.calls: list[dict[str, Any]] = []
        self.wave = wave
        self.arrived = 0
        self.broken_waves: set[int] = set()
        self._open: dict[int, dict[str, Any]] = {}
        events = client.meta.events
        events.register("before-send.dynamodb.*", self._before_send)
        events.register("after-call.dynamodb.*", self._after_call)

    def _before_send(self, request: Any, **kwargs: Any) -> None:
        with self.lock:
            call = {"start": next(self.counter), "op": None}
            self._open[threading.get_ident()] = call
            wave = self.arrived // self.wave
            self.arrived += 1
            self.lock.notify_all()
            filled = self.lock.wait_for(lambda: self.arrived >= (wave + 1) * self.wave or wave in self.broken_waves,
                                        timeout=HANG_BOUND)
            if not filled:
                self.broken_waves.add(wave)  # the rest of this wave is not coming: let the others through
                self.lock.notify_all()

    def _after_call(self, model: Any, **kwargs: Any) -> None:
        with self.lock:
            call = self._open.pop(threading.get_ident())
            call["end"] = next(self.counter)
            call["op"] = model.name
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
