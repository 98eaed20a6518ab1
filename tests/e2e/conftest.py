"""End-to-end tests: template.yaml deployed on the local cloud, the real worker handler.

Parameters keep waits short: the worker's timeout must leave the core's
5 s deadline margin room to start records, and the visibility timeout must
exceed the lease (timeout + 5 s margin) so a lost invocation's messages
return only after its lease ended.
"""

from __future__ import annotations

import pytest

E2E_PARAMETERS = {
    "SenderEmail": "billing@example.com",
    "WorkerTimeoutSeconds": "8",
    "QueueVisibilityTimeoutSeconds": "15",
    "MaximumBatchingWindowSeconds": "0",
    "MaxAttempts": "3",
}


@pytest.fixture(scope="session")
def local_cloud_parameters() -> dict[str, str]:
    """Short timeouts so lost invocations come back within seconds."""
    return dict(E2E_PARAMETERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is an e2e test."""
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
