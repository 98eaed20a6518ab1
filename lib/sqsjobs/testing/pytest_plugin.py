"""pytest plugin: test your app's own jobs in-process (no AWS, no local cloud).

Registered through the ``pytest11`` entry point, so any project with sqsjobs
installed gets the fixtures; importing this module imports nothing but pytest.

Fixtures:
    ``sqsjobs_app``  the project's ``JobApp``, from the ini value ``sqsjobs_app``
                     (``module:attribute``, default ``handlers.app:app``) or ``--sqsjobs-app``
    ``jobs``         ``sqsjobs_app.testing()`` for one test: an in-memory store, a recording
                     fake SQS and a manual clock, all put back when the test ends
    ``sqsjobs_moto_partiql``  ``sqsjobs.testing.moto_partiql()`` for one test (opt in: in-process moto
                     carries the worker's batched writes; the worker needs nothing to pass on stock moto)

Example (``tests/test_jobs.py``)::

    from app import greet
    from sqsjobs import Outcome

    def test_greets_once(jobs):
        jobs.run(greet.message(user_id=7), greet.message(user_id=7))
        assert [o.outcome for o in jobs.outcomes] == [Outcome.SUCCEEDED, Outcome.DUPLICATE]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from sqsjobs.testing.moto import moto_partiql

if TYPE_CHECKING:
    from sqsjobs._app import JobApp
    from sqsjobs.testing import JobTester

DEFAULT_APP = "handlers.app:app"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--sqsjobs-app`` and the ``sqsjobs_app`` ini value.

    Example (``pyproject.toml``)::

        [tool.pytest.ini_options]
        pythonpath = ["handlers"]     # import the app as Lambda does: `from app import app`
        sqsjobs_app = "app:app"
    """
    parser.addoption("--sqsjobs-app", default=None, help="The JobApp as module:attribute, for the jobs fixture.")
    parser.addini("sqsjobs_app", "The JobApp as module:attribute (default handlers.app:app)", default=DEFAULT_APP)


@pytest.fixture(scope="session")
def sqsjobs_app(pytestconfig: pytest.Config) -> JobApp:
    """The project's ``JobApp``, imported once per session.

    Example (``conftest.py``, for an app built by a factory)::

        @pytest.fixture(scope="session")
        def sqsjobs_app():
            from myproject.jobs import build_app
            return build_app()
    """
    from sqsjobs._loading import load_app

    spec = pytestconfig.getoption("--sqsjobs-app") or pytestconfig.getini("sqsjobs_app")
    app: Any = load_app(str(spec))
    return app  # type: ignore[no-any-return]


@pytest.fixture
def jobs(sqsjobs_app: JobApp) -> Iterator[JobTester]:
    """``sqsjobs_app.testing()`` for the test: run batches, drain the queue, read outcomes and SQS calls.

    Example::

        def test_retried_then_done(jobs):
            sync.enqueue(account_id=7)
            jobs.drain()
            assert [o.outcome.value for o in jobs.outcomes] == ["retry", "succeeded"]
    """
    with sqsjobs_app.testing() as tester:
        yield tester


@pytest.fixture
def sqsjobs_moto_partiql() -> Iterator[None]:
    """In-process moto answers the worker's batched writes as DynamoDB documents, for this test only.

    Example::

        @pytest.mark.usefixtures("sqsjobs_moto_partiql")
        def test_a_batch_is_two_calls(...): ...
    """
    with moto_partiql():
        yield
