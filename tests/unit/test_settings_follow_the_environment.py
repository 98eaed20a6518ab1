"""An app made at import follows the environment each test sets: settings and clients are resolved when used.

``APP`` below is made, and its job declared, when this module is imported, as a user's
``handlers/app.py`` is. Each test's fixture then sets ``AWS_ENDPOINT_URL``, the region, the
credentials and ``SQSJOBS_*`` for that test alone, and the requests are read where they land: a
recording HTTP server on 127.0.0.1 per configuration (SQS and DynamoDB's JSON protocols, enough to
answer a send and a read). Nothing here leaves the machine.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from botocore.stub import Stubber

from sqsjobs import ConfigurationError, InMemoryStore, JobApp
from sqsjobs._clients import sqs_client
from sqsjobs.testing import FakeContext, sqs_event

APP = JobApp()


@APP.job("invoice-email", key="invoice-email:{invoice_id}")
def send_invoice_email(invoice_id: int) -> None: ...


@dataclass
class Request:
    target: str  # X-Amz-Target: "AmazonSQS.SendMessage", "DynamoDB_20120810.GetItem"
    body: dict[str, Any]
    authorization: str

    @property
    def access_key(self) -> str:
        return self.authorization.split("Credential=")[1].split("/")[0]

    @property
    def region(self) -> str:
        return self.authorization.split("Credential=")[1].split("/")[2]


@dataclass
class Recorder:
    """An HTTP server on 127.0.0.1 that records each request and answers it as SQS or DynamoDB would."""

    url: str = ""
    requests: list[Request] = field(default_factory=list)

    def answer(self, target: str, body: dict[str, Any]) -> dict[str, Any]:
        if target.endswith(".SendMessage"):
            return {"MessageId": f"{self.url}#{len(self.requests)}"}
        if target.endswith(".SendMessageBatch"):
            return {"Successful": [{"Id": e["Id"], "MessageId": e["Id"], "MD5OfMessageBody": ""}
                                   for e in body["Entries"]], "Failed": []}
        return {}  # GetItem: no such item


@pytest.fixture
def recorders() -> Iterator[list[Recorder]]:
    """Two recording servers (the first test's configuration and the next one's)."""
    made: list[tuple[Recorder, http.server.ThreadingHTTPServer]] = []
    for _ in range(2):
        recorder = Recorder()

        class Handler(http.server.BaseHTTPRequestHandler):
            recording = recorder

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"{}")
                target = self.headers.get("X-Amz-Target", "")
                self.recording.requests.append(Request(target, body, self.headers.get("Authorization", "")))
                answer = json.dumps(self.recording.answer(target, body)).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-amz-json-1.0")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None: ...

        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        recorder.url = f"http://127.0.0.1:{server.server_address[1]}"
        threading.Thread(target=server.serve_forever, daemon=True).start()
        made.append((recorder, server))
    try:
        yield [recorder for recorder, _ in made]
    finally:
        for _, server in made:
            server.shutdown()
            server.server_close()


def configure(monkeypatch: pytest.MonkeyPatch, recorder: Recorder, name: str, region: str) -> None:
    """What a test's fixture sets: an endpoint, a region, credentials, the queue and the table."""
    for variable, value in {"AWS_ENDPOINT_URL": recorder.url, "AWS_REGION": region, "AWS_DEFAULT_REGION": region,
                            "AWS_ACCESS_KEY_ID": f"KEY-{name}", "AWS_SECRET_ACCESS_KEY": "secret",
                            "SQSJOBS_QUEUE_URL": f"{recorder.url}/123456789012/jobs-{name}",
                            "SQSJOBS_TABLE": f"records-{name}"}.items():
        monkeypatch.setenv(variable, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


@pytest.mark.parametrize(("name", "region", "server"), [("first", "eu-west-1", 0), ("next", "ap-south-1", 1)])
def test_each_test_s_calls_go_where_its_environment_says(
        monkeypatch: pytest.MonkeyPatch, recorders: list[Recorder], name: str, region: str, server: int) -> None:
    # The same module-level app in two tests, each with its own fixture's environment.
    here, elsewhere = recorders[server], recorders[1 - server]
    configure(monkeypatch, here, name, region)
    send_invoice_email.enqueue(invoice_id=7)
    assert APP.status("invoice-email:7") is None
    sent, read = here.requests
    assert (sent.target, sent.body["QueueUrl"]) == ("AmazonSQS.SendMessage", f"{here.url}/123456789012/jobs-{name}")
    assert (read.target, read.body["TableName"]) == ("DynamoDB_20120810.GetItem", f"records-{name}")
    assert {(r.access_key, r.region) for r in here.requests} == {(f"KEY-{name}", region)}
    assert elsewhere.requests == []


def test_a_change_of_endpoint_region_or_credentials_within_a_test_builds_the_right_clients(
        monkeypatch: pytest.MonkeyPatch, recorders: list[Recorder]) -> None:
    first, then = recorders
    configure(monkeypatch, first, "a", "eu-west-1")
    send_invoice_email.enqueue(invoice_id=1)
    built = APP.runtime.sqs
    assert APP.runtime.sqs is built  # the environment is the same: nothing is built again
    configure(monkeypatch, then, "b", "eu-central-1")
    send_invoice_email.enqueue(invoice_id=2)
    assert APP.runtime.sqs is not built and APP.runtime.sqs.meta.endpoint_url == then.url
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "KEY-rotated")  # the credentials alone
    send_invoice_email.enqueue(invoice_id=3)
    assert [(r.access_key, r.region, r.body["QueueUrl"].rsplit("/", 1)[1]) for r in first.requests + then.requests] \
        == [("KEY-a", "eu-west-1", "jobs-a"), ("KEY-b", "eu-central-1", "jobs-b"),
            ("KEY-rotated", "eu-central-1", "jobs-b")]


def test_arguments_given_in_code_win_over_the_environment_and_a_given_client_is_never_replaced(
        monkeypatch: pytest.MonkeyPatch) -> None:
    client = sqs_client(region_name="eu-west-1", endpoint_url="http://127.0.0.1:9")
    app = JobApp(queue_url="https://sqs.eu-west-1.amazonaws.com/1/given", sqs_client=client, max_attempts=3)
    for value in ("https://sqs.eu-west-1.amazonaws.com/1/env-a", "https://sqs.eu-west-1.amazonaws.com/1/env-b"):
        monkeypatch.setenv("SQSJOBS_QUEUE_URL", value)
        monkeypatch.setenv("SQSJOBS_MAX_ATTEMPTS", "9")
        monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:8")
        assert (app.settings.queue_url, app.settings.max_attempts) == ("https://sqs.eu-west-1.amazonaws.com/1/given", 3)
        assert app.runtime.sqs is client


def test_building_an_app_and_declaring_its_jobs_reads_no_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # A value the app would refuse: reading it at import would fail the import itself.
    monkeypatch.setenv("SQSJOBS_MAX_ATTEMPTS", "many")
    app = JobApp(queue_url="https://sqs.eu-west-1.amazonaws.com/1/jobs")

    @app.job("sync", max_attempts=8)
    def sync(account_id: int) -> None: ...
    with pytest.raises(ConfigurationError, match="SQSJOBS_MAX_ATTEMPTS must be a number, got 'many'"):
        app.settings  # noqa: B018 - the first use reads it
    monkeypatch.setenv("SQSJOBS_MAX_ATTEMPTS", "5")  # now the job's 8 cannot happen: said on first use
    with pytest.raises(ConfigurationError, match=r"job 'sync': max_attempts=8 must be within 1..5"):
        app.settings  # noqa: B018
    monkeypatch.setenv("SQSJOBS_MAX_ATTEMPTS", "8")
    assert app.settings.max_attempts == 8 and sync.options.max_attempts == 8


def test_the_environment_is_read_once_per_batch_and_once_per_enqueue(monkeypatch: pytest.MonkeyPatch) -> None:
    import sqsjobs._runtime as runtime_module

    looks: list[int] = []
    real = runtime_module.environment_key
    monkeypatch.setattr(runtime_module, "environment_key", lambda: looks.append(1) or real())
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    client = sqs_client(region_name="eu-west-1", aws_access_key_id="k", aws_secret_access_key="s")
    app = JobApp(queue_url="https://sqs.eu-west-1.amazonaws.com/1/jobs", dlq_url="https://sqs.eu-west-1.amazonaws.com/1/d",
                 store=InMemoryStore(), sqs_client=client, emit_metrics=lambda line: None)

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None: ...
    with Stubber(client) as stub:
        stub.add_response("send_message", {"MessageId": "m-1"})
        greet.enqueue(user_id=1)
        assert len(looks) == 1
        looks.clear()
        bodies = [greet.message(user_id=n).body for n in range(10)]
        looks.clear()
        for _ in range(3):
            result = app.process_batch(sqs_event(bodies), FakeContext())
            assert [d.outcome.value for d in result.deliveries].count("succeeded") + \
                [d.outcome.value for d in result.deliveries].count("duplicate") == 10
        assert len(looks) == 3  # one a batch of 10, not one a message or one an access


def test_a_job_s_client_is_shared_in_one_environment_and_follows_it_when_it_changes(
        monkeypatch: pytest.MonkeyPatch, recorders: list[Recorder]) -> None:
    # sqsjobs.client("ses") where a job uses it, as handlers/app.py does: no cache of the job's own to clear.
    import sqsjobs

    first, then = recorders
    configure(monkeypatch, first, "a", "eu-west-1")
    ses = sqsjobs.client("ses")
    assert sqsjobs.client("ses") is ses and ses.meta.endpoint_url == first.url
    assert sqsjobs.client("ses", region_name="us-east-1") is not ses  # other arguments, another client
    configure(monkeypatch, then, "b", "eu-central-1")
    moved = sqsjobs.client("ses")
    assert moved is not ses and (moved.meta.endpoint_url, moved.meta.region_name) == (then.url, "eu-central-1")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "refreshed")  # a rotating secret alone: the same source, the same client
    assert sqsjobs.client("ses") is moved
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "KEY-other")  # another credentials source: never the old client
    assert sqsjobs.client("ses") is not moved


def test_a_job_s_client_with_an_argument_that_is_no_key_is_made_each_time(monkeypatch: pytest.MonkeyPatch) -> None:
    import sqsjobs

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    tags = ["unhashable"]  # botocore takes none such, but a client of its own is the safe answer to one
    with pytest.raises(TypeError):
        hash(frozenset({"x": tags}.items()))
    assert sqsjobs.client("ses") is sqsjobs.client("ses")
    built = []
    monkeypatch.setattr("sqsjobs._clients.client", lambda service, **kwargs: built.append(kwargs) or object())
    first, second = sqsjobs.client("ses", extra=tags), sqsjobs.client("ses", extra=tags)
    assert first is not second and built == [{"extra": tags}, {"extra": tags}]


def test_a_job_s_clients_are_bounded_when_each_call_brings_new_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    # A Config made anew at each call is a new key each time (it compares by identity): the oldest client goes.
    import sqsjobs
    from sqsjobs import _job_clients

    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "KEY-bounded")  # an environment of this test's own: an empty cache
    monkeypatch.setattr(_job_clients, "MAX_SHARED", 3)
    monkeypatch.setattr("sqsjobs._clients.client", lambda service, **kwargs: object())
    configs = [object() for _ in range(5)]
    clients = [sqsjobs.client("ses", config=config) for config in configs]
    assert len(_job_clients._shared[1]) == 3
    assert sqsjobs.client("ses", config=configs[-1]) is clients[-1]  # the newest are kept...
    assert sqsjobs.client("ses", config=configs[0]) is not clients[0]  # ...the oldest was let go
