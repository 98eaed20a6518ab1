"""The local cloud's own integration tests: a fixture template, no sqsjobs core involved."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from integration.local.local_support import FIXTURE, Recorder

from sqsjobs.local.cloud import LocalCloud


@pytest.fixture(scope="module")
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture(scope="module")
def cloud(recorder: Recorder) -> Iterator[LocalCloud]:
    """The fixture template running for one test module."""
    with LocalCloud.start(FIXTURE, output=recorder.output(), stack_name="fixture") as running:
        yield running
