"""Who may see and change what: CSRF on every POST, read-only, the token, the host, headers, no secrets."""

from __future__ import annotations

import re

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient
from unit.console.conftest import Stack, csrf_of

from sqsjobs import ConsoleError
from sqsjobs.console.app import create_app
from sqsjobs.console.config import ConsoleConfig
from sqsjobs.console.security import COOKIE

PAGES = ("/", "/dlq", "/dlq?job=a", "/jobs", "/lookup?key=a:1", "/runs")
TOKEN = "t0ken-that-is-long-enough"


def post_routes(client: TestClient) -> list[str]:
    routes = [r for r in client.app.routes if isinstance(r, Route) and "POST" in (r.methods or ())]  # type: ignore[attr-defined]
    return [r.path for r in routes]


def test_there_are_post_routes_and_each_refuses_a_missing_or_wrong_csrf_token(stack: Stack) -> None:
    stack.dead_letter("a", "permanent")
    client = stack.client()
    paths = post_routes(client)

    assert paths == ["/dlq/preview", "/dlq/redrive"]
    for path in paths:
        assert client.post(path, data={"job": "a", "max": "1"}).status_code == 403
        assert client.post(path, data={"csrf": "guess", "job": "a", "max": "1"}).status_code == 403
    assert stack.sqs.get_queue_attributes(QueueUrl=stack.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])[
        "Attributes"]["ApproximateNumberOfMessages"] == "1"


def test_a_post_from_another_origin_is_refused_even_with_the_token(stack: Stack) -> None:
    client = stack.client()
    csrf = client.app.state.console.guard.csrf_token  # type: ignore[attr-defined]

    response = client.post("/dlq/preview", data={"csrf": csrf}, headers={"origin": "http://evil.example"})

    assert response.status_code == 403


def test_read_only_shows_no_buttons_or_post_forms_and_refuses_every_post(stack: Stack) -> None:
    stack.dead_letter("a", "permanent")
    client = stack.client(read_only=True)
    csrf = client.app.state.console.guard.csrf_token  # type: ignore[attr-defined]

    for path in PAGES:
        html = client.get(path).text
        assert "<button" not in html and 'method="post"' not in html, path
    for path in post_routes(client):
        assert client.post(path, data={"csrf": csrf, "job": "a", "max": "1"}).status_code == 403
    assert "read-only" in client.get("/").text


def test_a_writable_dlq_page_has_its_buttons(stack: Stack) -> None:
    stack.dead_letter("a", "permanent")

    html = stack.client().get("/dlq").text

    assert html.count("<button") == 2  # preview all shown, preview this group
    assert csrf_of(html)


def test_an_unknown_host_header_is_refused_on_loopback(stack: Stack) -> None:
    client = stack.client()

    assert client.get("/", headers={"host": "rebound.example:8765"}).status_code == 400
    assert client.get("/", headers={"host": "localhost:8765"}).status_code == 200


def test_a_public_host_needs_a_long_token() -> None:
    with pytest.raises(ConsoleError, match="pass --token"):
        ConsoleConfig(queue="jobs", host="0.0.0.0")
    with pytest.raises(ConsoleError, match="16 characters or more"):
        ConsoleConfig(queue="jobs", host="0.0.0.0", token="short")
    assert ConsoleConfig(queue="jobs", host="0.0.0.0", token=TOKEN).url(8765) == f"http://0.0.0.0:8765/?token={TOKEN}"


def test_with_a_token_every_request_carries_it(stack: Stack) -> None:
    config = ConsoleConfig(queue=stack.queue_url, host="0.0.0.0", token=TOKEN)
    client = TestClient(create_app(config, stack.sources()), base_url="http://192.0.2.10:8765")

    assert client.get("/").status_code == 401
    assert client.get("/static/console.css").status_code == 401
    assert client.get("/", headers={"authorization": "Bearer wrong-token-wrong-token"}).status_code == 401
    assert client.get("/", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200
    first = client.get(f"/dlq?job=a&token={TOKEN}", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/dlq?job=a"
    assert f"{COOKIE}={TOKEN}" in first.headers["set-cookie"]
    cookie = first.headers["set-cookie"].lower()
    assert "httponly" in cookie and "samesite=strict" in cookie
    page = client.get("/dlq?job=a")  # the cookie now
    assert page.status_code == 200 and TOKEN not in page.text


def test_every_response_carries_the_security_headers(stack: Stack) -> None:
    client = stack.client()

    for response in (client.get("/"), client.get("/static/console.js"), client.post("/dlq/preview")):
        assert "script-src 'self'" in response.headers["content-security-policy"]
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["cache-control"] == "no-store"


def test_no_page_shows_a_credential_or_an_environment_value(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {"AWS_SECRET_ACCESS_KEY": "secret-access-key-sentinel", "AWS_SESSION_TOKEN": "session-token-sentinel",
               "AWS_ACCESS_KEY_ID": "AKIASENTINEL0000", "SQSJOBS_TABLE": "records-table-sentinel",
               "SQSJOBS_QUEUE_URL": stack.queue_url, "SQSJOBS_DLQ_URL": stack.dlq_url}
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    stack.dead_letter("a", "permanent", "PermanentError", "boom")
    from sqsjobs.store._dynamodb import DynamoDBStore
    from sqsjobs.worker._job_records import cancel_marker

    DynamoDBStore(stack.dynamodb, "records").write(cancel_marker("a:1", now=1.0, expires_at=9e9, reason="x"))
    import os

    client = stack.client(token=TOKEN)
    client.cookies.set(COOKIE, TOKEN)
    csrf = client.app.state.console.guard.csrf_token  # type: ignore[attr-defined]
    pages = [client.get(path).text for path in PAGES]
    pages.append(client.post("/dlq/preview", data={"csrf": csrf, "job": "a"}).text)
    stack.dynamodb.delete_table(TableName="records")
    pages.append(client.get("/lookup?key=a:1").text)  # an AWS error on the page

    values = {v for v in os.environ.values() if len(v) >= 8} | {TOKEN}
    for html in pages:
        shown = [v for v in values if v in html]
        assert not shown, shown
    assert all(re.search(r"<h1>", html) for html in pages)
