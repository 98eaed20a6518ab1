"""Test helpers shipped with sqsjobs: test your app's own jobs without AWS.

``with app.testing() as t:`` (or ``sqsjobs.testing.use(app)``) runs the app's
jobs in-process behind an in-memory idempotency store, a recording fake SQS
and a manual clock, and restores the app afterwards (``tester``). The rest are
building blocks: ``FakeSQS`` (``fake_sqs``), Lambda-shaped SQS events and a
Lambda context, and reading a real (moto) queue as Lambda's poller would
(``events``); ``given_attempts`` writes the record of a job that already
failed (``records``); ``moto_partiql()`` lets in-process moto carry the
worker's batched writes, for a block (``moto``: the worker passes on stock
moto without it).

    >>> from sqsjobs import JobApp, Outcome
    >>> app = JobApp()
    >>> @app.job("greet", key="greet:{user_id}")
    ... def greet(user_id: int) -> None: ...
    >>> with app.testing() as t:
    ...     _ = t.run(greet.message(user_id=7))
    ...     t.count(Outcome.SUCCEEDED)
    1

This package must not import moto or pytest at import time: it is part of the
installed package. The pytest fixtures are in ``sqsjobs.testing.pytest_plugin``
(``jobs``, ``sqsjobs_app``) and ``sqsjobs.local.pytest_plugin``
(``local_cloud``); pytest loads both through the package's entry points.
"""

from sqsjobs.testing.callbacks import FakeCallbacks, RunnerCallbacks, Told
from sqsjobs.testing.events import (
    DEFAULT_ARN,
    DEFAULT_FIFO_ARN,
    FakeContext,
    drain_queue,
    messages_in,
    queue_arn,
    receive_event,
    record_from_message,
    sqs_event,
    sqs_record,
)
from sqsjobs.testing.fake_sqs import FakeSQS, QueuedMessage, SqsCall
from sqsjobs.testing.moto import moto_partiql
from sqsjobs.testing.records import given_attempts
from sqsjobs.testing.tester import JobOutcome, JobTester, ManualClock, SentJob, use

__all__ = [
    "DEFAULT_ARN",
    "DEFAULT_FIFO_ARN",
    "FakeCallbacks",
    "FakeContext",
    "FakeSQS",
    "JobOutcome",
    "JobTester",
    "ManualClock",
    "QueuedMessage",
    "RunnerCallbacks",
    "SentJob",
    "SqsCall",
    "Told",
    "drain_queue",
    "given_attempts",
    "messages_in",
    "moto_partiql",
    "queue_arn",
    "receive_event",
    "record_from_message",
    "sqs_event",
    "sqs_record",
    "use",
]
