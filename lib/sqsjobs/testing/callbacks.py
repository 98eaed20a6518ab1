"""Workflow callbacks in tests: a recording fake of the services, and the durable testing SDK's local runner.

``app.testing()`` answers callbacks into a ``FakeCallbacks`` (``t.callbacks``):
it behaves as Lambda's durable callbacks and Step Functions' task tokens do
(an answer closes the callback; a later answer or heartbeat is refused as
closed) and records every answer it took. ``RunnerCallbacks`` routes the
answers to a ``DurableFunctionTestRunner`` (the durable testing SDK,
``aws-durable-execution-sdk-python-testing``: installed by the test, never by
sqsjobs) through the runner's public ``send_callback_*``, so a durable function
under test receives what a deployed one would.

Example:
    >>> from sqsjobs import DurableCallback, JobApp
    >>> app = JobApp()
    >>> @app.job("resize", key="resize:{image_id}", store_result=True, callbacks=True)
    ... def resize(image_id: int) -> dict:
    ...     return {"thumb": f"s3://thumbs/{image_id}.png"}
    >>> with app.testing() as t:
    ...     _ = resize.enqueue(image_id=7, callback=DurableCallback("Y2IxMjM="))
    ...     _ = t.drain()
    ...     t.callbacks.answer_to(DurableCallback("Y2IxMjM=")).payload
    '{"thumb":"s3://thumbs/7.png"}'
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sqsjobs.enqueue._envelope import CallbackTo
from sqsjobs.workflows._callback_sender import CallbackClosed
from sqsjobs.workflows._callbacks import Answer

__all__ = ["FakeCallbacks", "RunnerCallbacks", "Told"]

#: what the durable testing SDK's runner raises for an unknown, answered or timed-out callback
CLOSED_NAMES = ("ResourceNotFoundException", "CallbackTimeoutException", "InvalidParameterValueException")


@dataclass(frozen=True)
class Told:
    """One answer a callback took."""

    callback: CallbackTo
    answer: Answer


class FakeCallbacks:
    """Durable callbacks and task tokens as the services keep them: answered once, then closed.

    ``fail_next`` makes the next sends raise (a throttled or failing
    service: the worker holds the delivery back); ``on_answer`` is called
    with each answer before it is taken (a test checks what the records say
    then).
    """

    def __init__(self, *, on_answer: Callable[[CallbackTo, Answer], None] | None = None) -> None:
        self.told: list[Told] = []
        self.heartbeats: list[CallbackTo] = []
        #: sends refused because the callback was closed already
        self.refused: list[Told] = []
        self.on_answer = on_answer
        self._failures = 0
        self._lock = threading.Lock()
        self._closed: set[tuple[str, str]] = set()

    def fail_next(self, times: int = 1) -> None:
        """The next ``times`` sends fail with a retryable error (as a throttled service's would)."""
        self._failures += times

    def clear_faults(self) -> None:
        """No more failing sends (``fail_next`` armed and not yet used)."""
        self._failures = 0

    def close(self, callback: CallbackTo) -> None:
        """Close ``callback`` as a timeout would: answers to it are refused from now on."""
        self._closed.add((callback.service, callback.id))

    def _failing(self) -> None:
        if self._failures > 0:
            self._failures -= 1
            raise ConnectionError("the callback service is unavailable (FakeCallbacks.fail_next)")

    def answer(self, callback: CallbackTo, answer: Answer) -> None:
        with self._lock:
            self._failing()
            if (callback.service, callback.id) in self._closed:
                self.refused.append(Told(callback, answer))
                code = "CallbackTimeoutException" if callback.service == "lambda" else "TaskTimedOut"
                raise CallbackClosed(code, "the callback is closed already")
            if self.on_answer is not None:
                self.on_answer(callback, answer)
            self._closed.add((callback.service, callback.id))
            self.told.append(Told(callback, answer))

    def heartbeat(self, callback: CallbackTo) -> None:
        with self._lock:
            self._failing()
            if (callback.service, callback.id) in self._closed:
                raise CallbackClosed("CallbackTimeoutException", "the callback is closed already")
            self.heartbeats.append(callback)

    def answers_to(self, callback: CallbackTo) -> list[Answer]:
        """Every answer ``callback`` took (at most one: the service closes it)."""
        return [t.answer for t in self.told if (t.callback.service, t.callback.id) == (callback.service, callback.id)]

    def answer_to(self, callback: CallbackTo) -> Answer:
        """The one answer ``callback`` took; ``AssertionError`` if it took none."""
        answers = self.answers_to(callback)
        assert len(answers) == 1, f"callback {callback.id[:40]!r} took {len(answers)} answers"
        return answers[0]


class RunnerCallbacks:
    """Answers durable callbacks into a durable testing SDK ``DurableFunctionTestRunner`` (its public API).

    The runner answers an unknown or closed callback with an error, which
    ends the callback as the service's ``CallbackTimeoutException`` does.
    A task token (Step Functions) is not the runner's: it is refused.
    """

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.told: list[Told] = []

    def answer(self, callback: CallbackTo, answer: Answer) -> None:
        if callback.service != "lambda":
            raise ValueError("RunnerCallbacks answers durable callbacks only, not Step Functions task tokens")
        from aws_durable_execution_sdk_python.lambda_service import ErrorObject

        try:
            if answer.succeeded:
                self.runner.send_callback_success(callback.id, (answer.payload or "null").encode())
            else:
                self.runner.send_callback_failure(callback.id, ErrorObject(
                    message=answer.message, type=answer.error_type, data=answer.data, stack_trace=None))
        except Exception as error:  # the runner's "not found": unknown, answered or timed out
            if type(error).__name__ in CLOSED_NAMES:
                raise CallbackClosed(type(error).__name__, str(error)) from error
            raise
        self.told.append(Told(callback, answer))

    def heartbeat(self, callback: CallbackTo) -> None:
        try:
            self.runner.send_callback_heartbeat(callback.id)
        except Exception as error:
            if type(error).__name__ in CLOSED_NAMES:
                raise CallbackClosed(type(error).__name__, str(error)) from error
            raise
