"""`local_cloud.use_app()` (issue 25, finding 3): every client the app makes in the block talks to the local
cloud; a request to any other host is refused (and recorded) before it could leave the machine."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from sqsjobs.enqueue._delays import schedule_name
from sqsjobs.local.pytest_plugin import LocalCloudSession


class LeftTheMachine(RuntimeError):
    """A botocore request was about to go to a host other than 127.0.0.1."""


@pytest.fixture
def hosts(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The host of every request any botocore client sends; anything but 127.0.0.1 is refused, never sent."""
    from botocore.httpsession import URLLib3Session

    seen: list[str] = []
    send = URLLib3Session.send

    def guarded(self: Any, request: Any) -> Any:
        host = urlsplit(request.url).hostname or ""
        seen.append(host)
        if host != "127.0.0.1":
            raise LeftTheMachine(f"{request.method} {request.url}")
        return send(self, request)

    monkeypatch.setattr(URLLib3Session, "send", guarded)
    yield seen


def test_inside_use_app_no_request_leaves_127_0_0_1(local_cloud: LocalCloudSession, hosts: list[str]) -> None:
    import handlers.app as reference
    from sqsjobs._clients import client

    with local_cloud.use_app() as app:
        delayed = app.enqueue("invoice-email", invoice_id=990_001, delay=2 * 86_400)  # Scheduler
        status = app.status("invoice-email:990001")  # DynamoDB
        report = app.enqueue_many([app.message("invoice-email", invoice_id=990_100 + n) for n in range(12)])
        identities = reference.ses_client().list_identities()["Identities"]  # the job's own client, in the block
        metrics = client("cloudwatch").list_metrics()["Metrics"]  # any client of the shared session
        assert app.unschedule("invoice-email:990001")

    assert status is None and report.ok and report.sent == 12 and report.calls == 2
    assert str(delayed).startswith("arn:aws:scheduler:") and schedule_name("invoice-email:990001") in str(delayed)
    assert "billing@example.com" in identities and isinstance(metrics, list)
    assert hosts and set(hosts) == {"127.0.0.1"}, sorted(set(hosts))
    local_cloud.drain()
