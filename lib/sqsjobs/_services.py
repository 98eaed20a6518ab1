"""What jobs and features use of their app's runtime, as a protocol: they depend on it, never on ``_runtime``.

``_runtime.Runtime`` is the one implementation; the features (``enqueue/``,
``workflows/``, ``schedules/``) and ``Job`` sit below it in the layering
(docs/architecture.md, tests/unit/test_layering.py), so they name only this
protocol, and ``_job.JobRuntime`` adds what needs the job itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from sqsjobs._backoff import RandomSource
    from sqsjobs._settings import Settings
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport
    from sqsjobs.store._lease import LeaseStore


class Services(Protocol):
    """The runtime's collaborators a feature reads: settings, the injected clock, random and sleep, the store,
    the logger and the senders (see ``_runtime.Runtime`` for each)."""

    @property
    def settings(self) -> Settings: ...

    def clock(self) -> float: ...

    @property
    def random(self) -> RandomSource: ...

    def sleep(self, seconds: float) -> None: ...

    def emit_metrics(self, line: str) -> None: ...

    @property
    def store(self) -> LeaseStore: ...

    @property
    def logger(self) -> Any: ...

    @property
    def dynamodb(self) -> DynamoDBClient: ...

    def send(self, message: JobMessage) -> str: ...

    def send_many(self, messages: Sequence[JobMessage],
                  on_progress: Callable[[int], None] | None = None) -> EnqueueReport: ...

    def unschedule(self, key: str) -> bool: ...
