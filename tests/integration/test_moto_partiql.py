"""The local cloud's BatchExecuteStatement (``sqsjobs.local.moto_partiql``) follows DynamoDB's documented
semantics for sqsjobs' statement shapes, where moto's own PartiQL does not (store/_statements.py lists them)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_support import create_table
from moto import mock_aws

INSERT = 'INSERT INTO "t" VALUE {\'pk\': ?, \'status\': ?, \'owner\': ?}'
COMPLETE = ('UPDATE "t" SET "status" = ? SET "attempts" = "attempts" + ? REMOVE "owner" '
            'WHERE "pk" = ? AND "status" IS NOT MISSING AND ("owner" = ? AND "status" = ?)')


@pytest.fixture
def client() -> Iterator[Any]:
    with mock_aws():
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        create_table(dynamodb, "t")
        yield dynamodb


def insert(key: str, owner: str) -> dict[str, Any]:
    return {"Statement": INSERT, "Parameters": [{"S": key}, {"S": "HELD"}, {"S": owner}]}


def complete(key: str, owner: str) -> dict[str, Any]:
    return {"Statement": COMPLETE, "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
            "Parameters": [{"S": "DONE"}, {"N": "1"}, {"S": key}, {"S": owner}, {"S": "HELD"}]}


def item(client: Any, key: str) -> Any:
    return client.get_item(TableName="t", Key={"pk": {"S": key}}, ConsistentRead=True).get("Item")


def test_a_second_insert_of_a_key_fails_with_duplicate_item_and_writes_nothing(client: Any) -> None:
    first = client.batch_execute_statement(Statements=[insert("a", "me"), insert("b", "me")])["Responses"]
    assert [r.get("Error") for r in first] == [None, None] and item(client, "a")["owner"] == {"S": "me"}
    again = client.batch_execute_statement(Statements=[insert("a", "you"), insert("c", "you")])["Responses"]
    assert again[0]["Error"]["Code"] == "DuplicateItem" and "Error" not in again[1]
    assert item(client, "a")["owner"] == {"S": "me"} and item(client, "c")["owner"] == {"S": "you"}


def test_an_update_whose_condition_fails_returns_the_item_and_writes_nothing(client: Any) -> None:
    client.put_item(TableName="t", Item={"pk": {"S": "a"}, "status": {"S": "HELD"}, "owner": {"S": "me"},
                                         "attempts": {"N": "1"}})
    refused, absent = client.batch_execute_statement(Statements=[complete("a", "you"),
                                                                 complete("nobody", "you")])["Responses"]
    assert refused["Error"]["Code"] == "ConditionalCheckFailed" and refused["Error"]["Item"]["owner"] == {"S": "me"}
    assert absent["Error"]["Code"] == "ConditionalCheckFailed" and "Item" not in absent["Error"]
    assert item(client, "a")["status"] == {"S": "HELD"} and item(client, "nobody") is None  # never created

    (done,) = client.batch_execute_statement(Statements=[complete("a", "me")])["Responses"]
    assert "Error" not in done
    written = item(client, "a")
    assert written["status"] == {"S": "DONE"} and written["attempts"] == {"N": "2"} and "owner" not in written


def test_statements_of_other_shapes_still_reach_moto(client: Any) -> None:
    client.put_item(TableName="t", Item={"pk": {"S": "a"}, "status": {"S": "HELD"}})
    (read,) = client.batch_execute_statement(Statements=[{"Statement": "SELECT * FROM t WHERE pk = 'a'"}]
                                             )["Responses"]
    assert read["Item"]["status"] == {"S": "HELD"}
