"""Async and threaded jobs against DynamoDB on moto (issue 32): the calls a batch costs, and the crash window.

The DynamoDB store writes on its own thread pool, so a record the flush timer started is on the wire when
the process dies; ``store.close()`` waits for it, as the dying Lambda's network already delivered it.
"""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from aws_support import CallRecorder

from sqsjobs import Outcome
from sqsjobs.store._lease import LeaseState
from sqsjobs.testing import sqs_event


class Killed(BaseException):
    """The invocation dies (a Lambda timeout): nothing after it runs."""


def test_ten_async_jobs_run_at_once_for_two_statement_calls(make_app: Any, aws: Any) -> None:
    app = make_app()
    running = {"now": 0, "most": 0}

    @app.job("receipt", key="receipt:{n}")
    async def receipt(n: int) -> None:
        running["now"] += 1
        running["most"] = max(running["most"], running["now"])
        await asyncio.sleep(0)
        running["now"] -= 1

    recorder = CallRecorder(aws.dynamodb)
    result = app.process_batch(sqs_event([json.loads(receipt.message(n=n).body) for n in range(10)]))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 10
    assert [c["op"] for c in recorder.calls] == ["BatchExecuteStatement"] * 2 and running["most"] == 10
    assert all(app.status(f"receipt:{n}").state == "succeeded" for n in range(10))


def test_threaded_jobs_run_at_once_and_their_records_are_written(make_app: Any, aws: Any) -> None:
    app = make_app()
    barrier = threading.Barrier(4, timeout=30)

    @app.job("thumbnail", key="thumbnail:{n}", threads=True)
    def thumbnail(n: int) -> None:
        barrier.wait()

    result = app.process_batch(sqs_event([json.loads(thumbnail.message(n=n).body) for n in range(4)]))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED] * 4
    assert all(app.status(f"thumbnail:{n}").state == "succeeded" for n in range(4))


def test_a_quick_job_then_one_killed_after_600_s_leaves_the_quick_job_recorded(make_app: Any, aws: Any,
                                                                              clock: Any) -> None:
    app = make_app()

    @app.job("quick", key="quick:{n}")
    def quick(n: int) -> None: ...

    @app.job("slow", key="slow:{n}")
    def slow(n: int) -> None:
        clock.advance(600)  # the flush timer fires one second in
        raise Killed

    event = sqs_event([json.loads(quick.message(n=0).body), json.loads(slow.message(n=1).body)])
    with pytest.raises(Killed):
        app.process_batch(event)
    app.runtime.store.close()
    assert app.runtime.store.get("quick:0").state is LeaseState.DONE
    assert app.runtime.store.get("slow:1").state is LeaseState.HELD
