"""Shared by the e2e tests: the template parameters that keep waits short, and a condition wait.

The worker's timeout must leave the core's 5 s deadline margin room to start
records: 15 s leaves 10 s between an invocation's start and its first job's,
room enough for a machine with both cores busy (8 s left 3 s). The visibility
timeout must exceed the lease (timeout + 5 s margin), so a lost invocation's
messages return only after its lease ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

E2E_PARAMETERS = {
    "SenderEmail": "billing@example.com",
    "WorkerTimeoutSeconds": "15",
    "QueueVisibilityTimeoutSeconds": "25",
    "MaximumBatchingWindowSeconds": "0",
    "MaxAttempts": "3",
}


def wait_for(probe: Callable[[], T | None], what: str, *, ceiling: float = 180.0) -> T:
    """Poll ``probe`` until it returns something; ``ceiling`` seconds only bound a hang (never decide a pass)."""
    give_up = time.monotonic() + ceiling
    while True:
        found = probe()
        if found is not None:
            return found
        if time.monotonic() > give_up:
            raise AssertionError(f"still waiting for {what} after {ceiling:.0f} s")
        time.sleep(0.2)
