"""The chaos harness's own fault hooks and its generated ledger file, checked against a moto server on 127.0.0.1.

A server, as the harness uses, not ``mock_aws``: in-process moto answers from its own ``before-send`` handler,
so a write would land before the harness's hook refuses it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError
from chaos.harness import CallFailer, ChaosConfig, Ledger, Throttler, counted_retry_sleeps, moto_server
from chaos.ledger_file import HEADER, render_file

TABLE = "chaos-faults"
#: botocore's legacy retry mode gives DynamoDB max_attempts 10: 10 attempts, 9 of them retries
LEGACY_ATTEMPTS = 10


def _client(endpoint: str) -> Any:
    return boto3.client("dynamodb", region_name="us-east-1", endpoint_url=endpoint, aws_access_key_id="testing",
                        aws_secret_access_key="testing", config=Config(retries={"mode": "legacy"}))


@pytest.fixture
def dynamodb() -> Iterator[Any]:
    """A client of a fresh table; the table is dropped through a client without the tests' hooks."""
    with moto_server() as endpoint:
        # moto's backends are per process, not per server: each test gets its own table.
        _client(endpoint).create_table(TableName=TABLE, KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                                       AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                                       BillingMode="PAY_PER_REQUEST")
        try:
            yield _client(endpoint)
        finally:
            _client(endpoint).delete_table(TableName=TABLE)


def _hook(client: Any, failer: CallFailer, throttler: Throttler | None = None) -> None:
    client.meta.events.register("before-call.dynamodb", failer.before_call)
    client.meta.events.register("before-send.dynamodb", failer.before_send)
    if throttler is not None:
        client.meta.events.register("before-send.dynamodb", throttler)


def test_a_doomed_call_fails_after_every_one_of_botocores_retries(dynamodb: Any) -> None:
    failer = CallFailer(rate=1.0, seed=0)
    _hook(dynamodb, failer)
    with counted_retry_sleeps() as sleeps, pytest.raises(ClientError) as raised:
        dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": "a"}})
    assert raised.value.response["Error"]["Code"] == "ProvisionedThroughputExceededException"
    assert raised.value.response["ResponseMetadata"]["RetryAttempts"] == LEGACY_ATTEMPTS - 1
    assert failer.attempts_refused == LEGACY_ATTEMPTS and failer.doomed == {"PutItem": 1}
    # botocore asked to sleep between attempts (50 ms doubling); the harness counted it and did not wait.
    assert sleeps.count == LEGACY_ATTEMPTS - 1 and sleeps.seconds > 12


def test_only_the_stated_share_of_calls_is_doomed_and_the_rest_reach_the_table(dynamodb: Any) -> None:
    failer = CallFailer(rate=0.25, seed=3)
    throttler = Throttler(rate=0.3, seed=4)  # per attempt: botocore absorbs these
    _hook(dynamodb, failer, throttler)
    failed = 0
    with counted_retry_sleeps():
        for n in range(200):
            try:
                dynamodb.put_item(TableName=TABLE, Item={"pk": {"S": str(n)}})
            except ClientError:
                failed += 1
    assert failer.calls == 200 and failed == sum(failer.doomed.values())
    assert 30 <= failed <= 70  # 25% of 200, seeded
    failer.rate = 0.0
    with counted_retry_sleeps():
        assert dynamodb.scan(TableName=TABLE, Select="COUNT")["Count"] == 200 - failed
    assert throttler.injected > 0


def test_the_generated_file_says_it_is_generated_and_carries_both_numbers(tmp_path: Path) -> None:
    ledger = Ledger(config=ChaosConfig(fail=0.02))
    ledger.faults["killed after the side effect"], ledger.exposed_effects = 1, 3
    ledger.unrecorded, ledger.duplicate_effects, ledger.duplicate_bound = 2, 4, 5
    junit = tmp_path / "model.xml"
    junit.write_text('<testsuites><testsuite name="pytest" tests="1" failures="0" errors="0" time="201.5">'
                     "</testsuite></testsuites>")
    text = render_file(ledger, model_junit=str(junit))
    assert text.splitlines()[0] == HEADER
    assert "duplicate side effects **4** <= side effects exposed by a kill **3** + completion writes that failed " \
           "after their retries **2** = 5" in text
    assert "model: PASS" in text and "202 s" in text
    junit.write_text('<testsuite tests="1" failures="1" errors="0" time="3"></testsuite>')
    assert "model: FAIL" in render_file(ledger, model_junit=str(junit))
