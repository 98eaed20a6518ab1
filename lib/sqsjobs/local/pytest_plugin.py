"""pytest plugin: a session-scoped local cloud running the project's template.

Registered through the ``pytest11`` entry point, so any project with sqsjobs
installed gets the fixtures. Importing this module is cheap: moto and
samtranslator load only when a test asks for ``local_cloud``.

Fixtures:
    ``local_cloud``            the running :class:`LocalCloudSession` (session scope): the cloud's helpers plus
                               ``enqueue``, ``outcomes``, ``dead_letters`` and ``use_app`` for the project's app
                               (ini ``sqsjobs_app``, as the ``jobs`` fixture)
    ``local_cloud_template``   the template path (override in a conftest)
    ``local_cloud_parameters`` template parameter overrides (override in a conftest)

Example (``tests/e2e/test_invoice.py``)::

    def test_invoice_sent(local_cloud):
        local_cloud.enqueue("invoice-email", invoice_id=42)
        local_cloud.drain()
        assert [m["subject"] for m in local_cloud.emails()].count("Invoice 42") == 1
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from sqsjobs._settings import Settings
from sqsjobs.local.errors import LocalCloudError

DEFAULT_APP = "handlers.app:app"


def pytest_addoption(parser: pytest.Parser) -> None:
    """``--sqsjobs-template`` and the ``sqsjobs_template`` ini value.

    Example (``pyproject.toml``)::

        [tool.pytest.ini_options]
        sqsjobs_template = "infra/template.yaml"
    """
    parser.addoption("--sqsjobs-template", default=None, help="SAM template for the local_cloud fixture.")
    parser.addini("sqsjobs_template", "SAM template for the local_cloud fixture", default="template.yaml")


class LocalCloudSession:
    """What tests get from ``local_cloud``: the :class:`LocalCloud` plus app-level helpers.

    Attribute access falls through to the cloud (``drain``, ``emails``,
    ``queue_url``, ``alarm_state``, ``peek``, ...).
    """

    def __init__(self, cloud: Any, *, app: str = DEFAULT_APP) -> None:
        self.cloud = cloud
        self.app_spec = app
        self.logs: list[tuple[str, str]] = []
        self._app: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cloud, name)

    @property
    def app(self) -> Any:
        """The project's ``JobApp`` (imported from the template's directory), used to build messages."""
        if self._app is None:
            from sqsjobs._loading import load_app

            self._app = load_app(self.app_spec, root=self.cloud.template.path.parent)
        return self._app

    def enqueue(self, job: str, **arguments: Any) -> str:
        """Enqueue ``job`` exactly as the app's producer would, onto the local queue."""
        return str(self.cloud.send_job(self.app.message(job, **arguments)))

    @contextmanager
    def use_app(self) -> Iterator[Any]:
        """The project's app pointed at this cloud for a block: its own code (transactions, chunked runs,
        ``run_status``) then reads and writes the local queues and tables, as the deployed functions do.

        Every client it makes in the block points at the cloud (``LocalCloud.producing``): nothing leaves
        127.0.0.1.

        Example::

            with local_cloud.use_app() as app:
                run_id = reindex.start()
        """
        settings = asdict(Settings.from_env(self.cloud.app_environment()))
        with self.cloud.producing(self.app, settings=settings) as app:
            yield app

    def outcomes(self) -> list[dict[str, Any]]:
        """What the functions did with each job so far: ``{"job", "key", "outcome", "message_id", "attempt", ...}``.

        Read from the workers' ``job outcome`` log lines, oldest first (``outcome`` is ``succeeded``,
        ``duplicate``, ``retry``, ``dead_lettered``...).
        """
        from sqsjobs.worker._outcome_log import OUTCOME_MESSAGE

        found = []
        for _, line in list(self.logs):
            if OUTCOME_MESSAGE not in line:
                continue
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict) and record.get("message") == OUTCOME_MESSAGE:
                found.append(record)
        return found

    def dead_letters(self) -> list[dict[str, Any]]:
        """Every message on the DLQ of the app's queue (peeked: they stay there)."""
        queue = self.cloud.deployment.queues[self.cloud.app_queue()]
        dlq = self.cloud.deployment.queue_by_arn(queue.dead_letter_arn)
        if dlq is None:
            raise LocalCloudError(f"{queue.logical_id} has no DLQ in this template")
        return list(self.cloud.peek_all(dlq.logical_id))


def _app_spec(config: pytest.Config) -> str:
    """The app the fixtures load: ``--sqsjobs-app`` or ini ``sqsjobs_app``.

    ``sqsjobs.testing.pytest_plugin`` declares both.
    """
    try:
        return str(config.getoption("--sqsjobs-app") or config.getini("sqsjobs_app"))
    except (ValueError, KeyError):  # the other plugin is not loaded (-p no:sqsjobs-testing)
        return DEFAULT_APP


_SESSIONS: list[LocalCloudSession] = []
_SHOWN_EVENTS = 30
_SHOWN_LOGS = 60


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    """A failed test that used ``local_cloud`` shows the cloud's recent events and function logs."""
    report = yield
    if report.failed and "local_cloud" in getattr(item, "fixturenames", ()) and _SESSIONS:
        session = _SESSIONS[-1]
        events = "\n".join(f"{level:>10} {text}" for level, text in session.cloud.events[-_SHOWN_EVENTS:])
        logs = "\n".join(f"[{function}] {line}" for function, line in session.logs[-_SHOWN_LOGS:])
        report.sections.append(("local cloud events", events or "(none)"))
        report.sections.append(("local cloud function logs", logs or "(none)"))
    return report


@pytest.fixture(scope="session")
def local_cloud_template(pytestconfig: pytest.Config) -> Path:
    """The template ``local_cloud`` deploys: ``--sqsjobs-template`` or ini ``sqsjobs_template``.

    Example (``conftest.py``)::

        @pytest.fixture(scope="session")
        def local_cloud_template():
            return Path(__file__).parent / "fixtures" / "template.yaml"
    """
    chosen = pytestconfig.getoption("--sqsjobs-template") or pytestconfig.getini("sqsjobs_template")
    path = Path(str(chosen))
    return path if path.is_absolute() else Path(pytestconfig.rootpath) / path


@pytest.fixture(scope="session")
def local_cloud_parameters() -> dict[str, str]:
    """Template parameter overrides for ``local_cloud`` (none by default).

    Example (``conftest.py``)::

        @pytest.fixture(scope="session")
        def local_cloud_parameters():
            return {"SenderEmail": "billing@example.com", "WorkerTimeoutSeconds": "8"}"""
    return {}


@pytest.fixture(scope="session")
def local_cloud(local_cloud_template: Path, local_cloud_parameters: dict[str, str],
                pytestconfig: pytest.Config) -> Iterator[LocalCloudSession]:
    """A local cloud with the template deployed, shared by the session and stopped at its end.

    Example::

        def test_invoice_sent(local_cloud):
            local_cloud.enqueue("invoice-email", invoice_id=42)
            local_cloud.drain()
            assert any(m["subject"] == "Invoice 42" for m in local_cloud.emails())"""
    from sqsjobs._extras import Extra, install_hint, missing

    module = missing(Extra.LOCAL)
    if module is not None:
        raise LocalCloudError(install_hint(Extra.LOCAL, module))
    from sqsjobs.local.cloud import LocalCloud
    from sqsjobs.local.output import Output

    session_logs: list[tuple[str, str]] = []
    events: list[tuple[str, str]] = []
    output = Output(event=lambda level, text: events.append((level, text)),
                    log=lambda function, line: session_logs.append((function, line)))
    # DEBUG: the worker logs every job's outcome, which outcomes() reads.
    cloud = LocalCloud.start(local_cloud_template, parameters=local_cloud_parameters, output=output,
                             log_level="DEBUG")
    session = LocalCloudSession(cloud, app=str(_app_spec(pytestconfig)))
    session.logs = session_logs
    _SESSIONS.append(session)
    try:
        yield session
    finally:
        _SESSIONS.remove(session)
        cloud.stop()
