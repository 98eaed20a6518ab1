"""A Lambda durable function awaits sqsjobs jobs, run by the durable testing SDK's local runner (issue 36).

The durable function (``wait_for_callback``) hands its callback id to a job or a group; the sqsjobs side runs
in ``app.testing()``; ``RunnerCallbacks`` routes the worker's answers to the runner through its public
``send_callback_*``. Nothing leaves the process: the runner calls the handler in-process, with no AWS client.
Each test waits on what happened (the submitter's queue, the runner's result), never on wall-clock time.
"""

from __future__ import annotations

import json
import queue
import socket
from collections.abc import Iterator
from typing import Any

import pytest
from aws_durable_execution_sdk_python import CallbackError, DurableContext, durable_execution
from aws_durable_execution_sdk_python.config import Duration, WaitForCallbackConfig
from aws_durable_execution_sdk_python.serdes import JsonSerDes
from aws_durable_execution_sdk_python_testing import DurableFunctionTestRunner

from sqsjobs import DurableCallback, JobApp, PermanentError
from sqsjobs.testing import RunnerCallbacks

#: the callback ids the durable functions' submitters handed over, with what to enqueue
SUBMITTED: queue.Queue[tuple[str, dict[str, Any]]] = queue.Queue()
CONFIG = WaitForCallbackConfig(timeout=Duration.from_hours(2), serdes=JsonSerDes())


def submitter(request: dict[str, Any]) -> Any:
    def submit(callback_id: str, _context: Any) -> None:
        SUBMITTED.put((callback_id, request))
    return submit


@durable_execution
def await_job(event: dict[str, Any], context: DurableContext) -> dict[str, Any]:
    try:
        result = context.wait_for_callback(submitter(event), name="await-job", config=CONFIG)
        return {"outcome": "succeeded", "result": result}
    except CallbackError as error:
        return {"outcome": "failed", "message": error.message, "data": json.loads(error.data or "{}")}


@pytest.fixture(autouse=True)
def loopback_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Any connection beyond 127.0.0.1 fails the test (the runner and the app under test need none)."""
    connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        assert isinstance(address, str) or address[0] in ("127.0.0.1", "::1"), f"connect to {address}"
        return connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture
def app() -> JobApp:
    app = JobApp()

    @app.job("resize", key="resize:{image_id}", store_result=True, callbacks=True)
    def resize(image_id: int) -> dict[str, Any]:
        if image_id < 0:
            raise PermanentError(f"image {image_id} does not exist")
        return {"thumb": f"s3://thumbs/{image_id}.png"}

    return app


@pytest.fixture
def runner() -> Iterator[DurableFunctionTestRunner]:
    with DurableFunctionTestRunner(handler=await_job) as runner:
        yield runner


def enqueue_from_the_submitter(app: JobApp) -> None:
    """What the submitter handed over, enqueued with its callback (a deployed submitter calls enqueue itself)."""
    callback_id, request = SUBMITTED.get(timeout=60)
    if "group" in request:
        group = app.group(name="thumbs", callback=DurableCallback(callback_id))
        group.add_many(app.jobs["resize"].message(image_id=i) for i in request["group"])
        group.enqueue()
    else:
        app.jobs["resize"].enqueue(image_id=request["image_id"], callback=DurableCallback(callback_id))


def test_a_durable_function_receives_the_jobs_result(app: JobApp, runner: DurableFunctionTestRunner) -> None:
    with app.testing(callbacks=RunnerCallbacks(runner)) as t:
        arn = runner.run_async(input=json.dumps({"image_id": 7}), execution_name="ok")
        enqueue_from_the_submitter(app)
        t.drain()
        result = runner.wait_for_result(arn, timeout=60)
    assert result.status.name == "SUCCEEDED"
    assert json.loads(result.result) == {"outcome": "succeeded", "result": {"thumb": "s3://thumbs/7.png"}}


def test_a_durable_function_receives_a_dead_letters_reason(app: JobApp, runner: DurableFunctionTestRunner) -> None:
    with app.testing(callbacks=RunnerCallbacks(runner)) as t:
        arn = runner.run_async(input=json.dumps({"image_id": -1}), execution_name="dead")
        enqueue_from_the_submitter(app)
        t.drain()
        (letter,) = t.dead_letters()
        result = runner.wait_for_result(arn, timeout=60)
    outcome = json.loads(result.result)
    assert outcome["outcome"] == "failed" and letter.reason == "permanent"
    assert outcome["message"] == "permanent: PermanentError: image -1 does not exist"
    assert outcome["data"] == {"key": "resize:-1", "job": "resize", "reason": "permanent",
                               "last_error": "PermanentError: image -1 does not exist"}


def test_a_durable_function_awaits_a_group_of_1000_with_one_callback(
        app: JobApp, runner: DurableFunctionTestRunner) -> None:
    callbacks = RunnerCallbacks(runner)
    with app.testing(callbacks=callbacks) as t:
        arn = runner.run_async(input=json.dumps({"group": [*range(999), -5]}), execution_name="group")
        enqueue_from_the_submitter(app)
        t.drain(max_batches=200)
        result = runner.wait_for_result(arn, timeout=120)
    outcome = json.loads(result.result)
    assert outcome["outcome"] == "succeeded" and len(callbacks.told) == 1
    counts = outcome["result"]
    assert {k: counts[k] for k in ("total", "succeeded", "dead_lettered", "failed", "state")} == {
        "total": 1000, "succeeded": 999, "dead_lettered": 1, "failed": 1, "state": "completed_with_failures"}
    # One callback for the whole group: the workflow's history holds 3 operations, not one per member.
    assert len(result.get_all_operations()) == 3
