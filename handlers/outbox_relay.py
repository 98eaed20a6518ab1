"""Lambda entry point for the outbox table's stream: send the committed enqueues to the jobs queue.

The event source mapping reports partial failures (``ReportBatchItemFailures``):
only the records not sent are retried. The jobs queue comes from
``SQSJOBS_QUEUE_URL``; the relay never runs job code, so it does not import
the reference app.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from sqsjobs import OutboxRelay


@lru_cache(maxsize=1)
def _relay() -> OutboxRelay:
    # Built on the first invocation, then reused for the life of the container.
    return OutboxRelay.from_env()


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``{"batchItemFailures": [...]}`` naming the stream records that were not sent."""
    return _relay().handle(event, context)
