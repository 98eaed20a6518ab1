"""Shared by the e2e tests: the template parameters that keep waits short.

The worker's timeout must leave the core's 5 s deadline margin room to start
records, and the visibility timeout must exceed the lease (timeout + 5 s
margin), so a lost invocation's messages return only after its lease ended.
"""

from __future__ import annotations

E2E_PARAMETERS = {
    "SenderEmail": "billing@example.com",
    "WorkerTimeoutSeconds": "8",
    "QueueVisibilityTimeoutSeconds": "15",
    "MaximumBatchingWindowSeconds": "0",
    "MaxAttempts": "3",
}
