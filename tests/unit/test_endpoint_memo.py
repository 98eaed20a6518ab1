"""The endpoint memo on sqsjobs' own clients: the private botocore hook it wraps, and the same answers as botocore.

sqsjobs._endpoint_memo replaces ``client._ruleset_resolver.construct_endpoint``
on the runtime's clients. These tests fail when botocore moves or reshapes
that hook (then widen nothing in pyproject.toml's botocore pin until the memo
is adapted), and when a memoized answer differs from botocore's own.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest
from botocore.session import Session
from botocore.stub import Stubber

from sqsjobs import _clients
from sqsjobs._endpoint_memo import RESOLVER_PARAMETERS, EndpointMemo, install, memo_key

CREDENTIALS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing"}


def _plain(service: str, region: str = "eu-west-1", **kwargs: Any) -> Any:
    return Session().create_client(service, region_name=region, **CREDENTIALS, **kwargs)


def test_botocore_still_resolves_endpoints_through_the_hook_the_memo_wraps() -> None:
    client = _plain("dynamodb")
    resolver = client._ruleset_resolver
    assert tuple(inspect.signature(resolver.construct_endpoint).parameters) == RESOLVER_PARAMETERS
    # ...and the call path still goes through that attribute (botocore/client.py _resolve_endpoint_ruleset).
    source = inspect.getsource(type(client)._resolve_endpoint_ruleset)
    assert "self._ruleset_resolver.construct_endpoint(" in source


def test_a_memoized_client_resolves_each_operation_once_and_each_table_once() -> None:
    client = _plain("dynamodb")
    memo = install(client)
    assert isinstance(memo, EndpointMemo)
    with Stubber(client) as stub:
        for table in ("jobs", "jobs", "orders", "jobs"):
            stub.add_response("update_item", {})
            client.update_item(TableName=table, Key={"pk": {"S": "k"}})
        for _ in range(3):
            stub.add_response("batch_execute_statement", {"Responses": []})
            client.batch_execute_statement(Statements=[{"Statement": "SELECT * FROM jobs"}])
    # UpdateItem resolves by TableName (two tables), BatchExecuteStatement has no context parameter.
    assert (memo.resolved, memo.hits) == (3, 4)


def test_an_operation_with_jmespath_context_parameters_always_goes_to_botocore() -> None:
    client = _plain("dynamodb")
    memo = install(client)
    assert memo is not None
    item = {"Put": {"TableName": "jobs", "Item": {"pk": {"S": "k"}}}}
    with Stubber(client) as stub:
        for _ in range(2):
            stub.add_response("transact_write_items", {})
            client.transact_write_items(TransactItems=[item])
    assert (memo.resolved, memo.hits) == (2, 0)


@pytest.mark.parametrize(("service", "operation", "params"), [
    ("dynamodb", "BatchExecuteStatement", {"Statements": [{"Statement": "SELECT * FROM t"}]}),
    ("dynamodb", "UpdateItem", {"TableName": "jobs", "Key": {"pk": {"S": "k"}}}),
    ("dynamodb", "GetItem", {"TableName": "jobs", "Key": {"pk": {"S": "k"}}}),
    ("sqs", "SendMessageBatch", {"QueueUrl": "https://sqs.eu-west-1.amazonaws.com/1/q", "Entries": []}),
    ("scheduler", "CreateSchedule", {"Name": "s"}),
])
@pytest.mark.parametrize("endpoint_url", [None, "http://127.0.0.1:5000"])
def test_memoized_answers_are_botocore_s_own(service: str, operation: str, params: dict[str, Any],
                                             endpoint_url: str | None) -> None:
    extra = {"endpoint_url": endpoint_url} if endpoint_url else {}
    plain, memoized = _plain(service, **extra), _plain(service, **extra)
    install(memoized)
    model = plain.meta.service_model.operation_model(operation)
    expected = plain._ruleset_resolver.construct_endpoint(operation_model=model, call_args=params,
                                                          request_context={})
    for _ in range(2):  # the first answer is botocore's, the second the memo's
        answer = memoized._ruleset_resolver.construct_endpoint(model, params, {})
        assert (answer.url, answer.headers, answer.properties) == (expected.url, expected.headers,
                                                                   expected.properties)


def test_a_hook_of_another_shape_is_left_alone() -> None:
    class Resolver:
        def construct_endpoint(self, operation_model: Any, call_args: Any) -> None: ...

    class Client:
        _ruleset_resolver = Resolver()

    client = Client()
    original = client._ruleset_resolver.construct_endpoint
    assert install(client) is None
    assert client._ruleset_resolver.construct_endpoint == original
    assert install(object()) is None  # no resolver at all


def test_the_runtime_s_clients_carry_the_memo_and_a_job_s_client_does_not() -> None:
    memoized = [_clients.dynamodb_client(region_name="eu-west-1"), _clients.sqs_client(region_name="eu-west-1"),
                _clients.scheduler_client(region_name="eu-west-1")]
    assert all(isinstance(c._ruleset_resolver.construct_endpoint, EndpointMemo) for c in memoized)
    job_client = _clients.client("s3", region_name="eu-west-1")  # S3's endpoint hooks follow redirects
    assert not isinstance(job_client._ruleset_resolver.construct_endpoint, EndpointMemo)


def test_a_context_value_that_is_not_a_string_is_not_memoized() -> None:
    model = Session().get_service_model("dynamodb").operation_model("UpdateItem")
    assert memo_key(model, {"TableName": 7}) is None
    assert memo_key(model, {}) == ("UpdateItem", "")
