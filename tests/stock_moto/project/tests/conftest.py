"""A user's own moto fixtures: stock moto, the resources made from template.yaml's own Properties.

Three ways users run moto, each a ``cloud`` fixture parameter: in-process ``mock_aws``, a
``ThreadedMotoServer`` (in-process, on a thread), and ``python -m moto.server`` in a process of its own.
Nothing of sqsjobs' local cloud is imported and moto is not patched: ``stock`` checks both before and after
every test (the package's pytest plugins are loaded, as in every project with sqsjobs installed).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

TEMPLATE = Path(__file__).resolve().parents[1] / "template.yaml"
REGION = "us-east-1"
#: what the package's pytest plugins may import of sqsjobs.local: the local_cloud fixture's own module
PLUGIN_MODULES = {"sqsjobs.local", "sqsjobs.local.errors", "sqsjobs.local.pytest_plugin"}


# ---------------------------------------------------------------- stock moto, checked
def assert_stock(*, nothing_imported: bool = True) -> None:
    from moto.dynamodb.models import DynamoDBBackend

    method = DynamoDBBackend.batch_execute_statement
    assert method.__module__ == "moto.dynamodb.models" and not hasattr(method, "moto_original"), method
    loaded = {name for name in sys.modules if name == "sqsjobs.local" or name.startswith("sqsjobs.local.")}
    assert loaded <= PLUGIN_MODULES or not nothing_imported, sorted(loaded - PLUGIN_MODULES)


@pytest.fixture(autouse=True)
def stock(pytestconfig: pytest.Config, request: pytest.FixtureRequest) -> Iterator[None]:
    """moto unpatched and nothing of the local cloud imported, before and after each test.

    A test that opts in to the statement emulation (the ``sqsjobs_moto_partiql`` fixture) has it imported;
    those come last in their module, and moto must be unpatched again after them.
    """
    stock_test = "sqsjobs_moto_partiql" not in request.fixturenames
    assert pytestconfig.pluginmanager.has_plugin("sqsjobs")  # the entry points are loaded...
    assert pytestconfig.pluginmanager.has_plugin("sqsjobs-testing")
    assert_stock(nothing_imported=stock_test)  # ...and install nothing
    yield
    assert_stock(nothing_imported=stock_test)  # nor does the worker, whatever it met


# ---------------------------------------------------------------- template.yaml, as a user reads it
class _Loader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (``!Ref x`` → ``{"Ref": "x"}``)."""


def _tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    if suffix == "GetAtt" and isinstance(value, str):
        value = value.split(".", 1)
    return {"Ref" if suffix == "Ref" else f"Fn::{suffix}": value}


_Loader.add_multi_constructor("!", _tag)


class Template:
    """The resources a test needs, with the intrinsics it meets resolved (parameters at their defaults)."""

    def __init__(self, path: Path, stack: str) -> None:
        self.doc = yaml.load(path.read_text(), Loader=_Loader)  # a SafeLoader, with the short tags
        self.stack = stack
        self.arns: dict[str, str] = {}

    def parameter(self, name: str) -> Any:
        return self.doc["Parameters"][name]["Default"]

    def properties(self, logical_id: str) -> dict[str, Any]:
        return dict(self.resolve(self.doc["Resources"][logical_id]["Properties"]))

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if list(value) == ["Ref"]:
            return self.stack if value["Ref"] == "AWS::StackName" else self.parameter(value["Ref"])
        if list(value) == ["Fn::GetAtt"]:
            return self.arns[value["Fn::GetAtt"][0]]
        if list(value) == ["Fn::FindInMap"]:
            name, first, second = (str(self.resolve(v)) for v in value["Fn::FindInMap"])
            return self.doc["Mappings"][name][first][second]
        if list(value) == ["Fn::Sub"]:
            text = str(value["Fn::Sub"])
            for name, known in (("AWS::StackName", self.stack), ("AWS::Region", REGION),
                                ("AWS::AccountId", "123456789012"), ("AWS::Partition", "aws")):
                text = text.replace("${" + name + "}", known)
            return text
        return {k: self.resolve(v) for k, v in value.items()}


QUEUE_ATTRIBUTES = ("VisibilityTimeout", "MessageRetentionPeriod", "MaximumMessageSize", "SqsManagedSseEnabled")


def create_queue(sqs: Any, template: Template, logical_id: str) -> str:
    props = template.properties(logical_id)
    attributes = {name: str(props[name]).lower() if isinstance(props[name], bool) else str(props[name])
                  for name in QUEUE_ATTRIBUTES if name in props}
    if "RedrivePolicy" in props:
        attributes["RedrivePolicy"] = json.dumps(props["RedrivePolicy"])
    url: str = sqs.create_queue(QueueName=props.get("QueueName", f"{template.stack}-{logical_id}"),
                                Attributes=attributes)["QueueUrl"]
    template.arns[logical_id] = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]
    return url


def create_table(dynamodb: Any, template: Template, logical_id: str) -> str:
    props = template.properties(logical_id)
    name = f"{template.stack}-{logical_id}"
    dynamodb.create_table(TableName=name, BillingMode=props["BillingMode"], KeySchema=props["KeySchema"],
                          AttributeDefinitions=props["AttributeDefinitions"])
    dynamodb.update_time_to_live(TableName=name, TimeToLiveSpecification=props["TimeToLiveSpecification"])
    return name


# ---------------------------------------------------------------- moto, three ways
def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.fixture(scope="session")
def moto_server_process() -> Iterator[str]:
    """``python -m moto.server`` on a free port of 127.0.0.1, in a process of its own."""
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    probe = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)
    deadline = time.monotonic() + 120  # how long a loaded machine may take to start it: a bound, not a pace
    while True:
        try:
            probe.list_queues()
            break
        except Exception:
            assert server.poll() is None, "moto.server exited"
            assert time.monotonic() < deadline, "moto.server did not answer"
            time.sleep(0.1)
    yield endpoint
    server.terminate()
    server.wait(timeout=30)


@pytest.fixture(scope="session")
def threaded_moto_server() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture(params=["mock_aws", "ThreadedMotoServer", "moto.server process"])
def endpoint(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str | None]:
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing"),
                        ("AWS_DEFAULT_REGION", REGION)):
        monkeypatch.setenv(name, value)
    if request.param == "mock_aws":
        from moto import mock_aws

        with mock_aws():
            yield None
    elif request.param == "ThreadedMotoServer":
        yield request.getfixturevalue("threaded_moto_server")
    else:
        yield request.getfixturevalue("moto_server_process")


class Clock:
    def __init__(self) -> None:
        self.now = 1_767_225_600.0

    def __call__(self) -> float:
        return self.now


@dataclass
class Cloud:
    sqs: Any
    dynamodb: Any
    queue_url: str
    queue_arn: str
    dlq_url: str
    table: str
    settings: dict[str, Any]
    clock: Clock

    def receive(self, url: str | None = None) -> list[dict[str, Any]]:
        return list(self.sqs.receive_message(QueueUrl=url or self.queue_url, MaxNumberOfMessages=10,
                                             AttributeNames=["All"], MessageAttributeNames=["All"],
                                             ).get("Messages", []))

    def event(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """The event Lambda's SQS poller would give the worker for ``messages``."""
        return {"Records": [{
            "messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
            "attributes": m["Attributes"], "md5OfBody": m["MD5OfBody"], "eventSource": "aws:sqs",
            "eventSourceARN": self.queue_arn, "awsRegion": REGION,
            "messageAttributes": {name: {"dataType": a["DataType"], "stringValue": a.get("StringValue")}
                                  for name, a in m.get("MessageAttributes", {}).items()},
        } for m in messages]}

    def use(self, app: Any) -> Any:
        """``app`` pointed at this cloud, explicitly: settings as the template gives the worker, these clients."""
        return app.use(settings=self.settings, sqs_client=self.sqs, dynamodb_client=self.dynamodb,
                       clock=self.clock, emit_metrics=lambda line: None)


@pytest.fixture
def cloud(endpoint: str | None) -> Iterator[Cloud]:
    import app as shop

    def client(service: str) -> Any:
        return boto3.client(service, region_name=REGION, endpoint_url=endpoint) if endpoint else \
            boto3.client(service, region_name=REGION)

    sqs, dynamodb = client("sqs"), client("dynamodb")
    template = Template(TEMPLATE, stack=f"shop-{uuid.uuid4().hex[:8]}")
    dlq_url = create_queue(sqs, template, "DeadLetterQueue")
    queue_url = create_queue(sqs, template, "JobsQueue")
    table = create_table(dynamodb, template, "IdempotencyTable")
    settings = {"queue_url": queue_url, "dlq_url": dlq_url, "table_name": table,
                "max_attempts": int(template.parameter("MaxAttempts")),
                "function_timeout": float(template.parameter("WorkerTimeoutSeconds"))}
    shop.sent.clear()
    shop.during.clear()
    cloud = Cloud(sqs=sqs, dynamodb=dynamodb, queue_url=queue_url, queue_arn=template.arns["JobsQueue"],
                  dlq_url=dlq_url, table=table, settings=settings, clock=Clock())
    with cloud.use(shop.app):
        yield cloud
    assert os.environ.get("SQSJOBS_TABLE") is None  # the configuration was explicit, not the environment's
