"""End-to-end tests: template.yaml deployed on the local cloud, the real worker handler."""

from __future__ import annotations

import pytest
from e2e.e2e_support import E2E_PARAMETERS


@pytest.fixture(scope="session")
def local_cloud_parameters() -> dict[str, str]:
    """Short timeouts so lost invocations come back within seconds."""
    return dict(E2E_PARAMETERS)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here is an e2e test."""
    for item in items:
        if "tests/e2e/" in str(item.fspath):
            item.add_marker(pytest.mark.e2e)
