"""One contract, two stores: the in-memory store must behave exactly like DynamoDB's."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_support import create_table
from moto import mock_aws

from sqsjobs.dynamodb_store import DynamoDBStore
from sqsjobs.guard import ClaimRequest, ClaimState, Finish, IdempotencyStore, InMemoryStore

NOW = 1_000_000.0


@pytest.fixture(params=["memory", "dynamodb"])
def store(request: pytest.FixtureRequest) -> Iterator[IdempotencyStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "contract")
        yield DynamoDBStore(client, "contract")


def claim(store: IdempotencyStore, key: str, owner: str, now: float = NOW, lease: float = 60) -> Any:
    (result,) = store.claim_many([ClaimRequest(key=key, job="j", owner=owner, now=now, lease_until=now + lease)])
    return result


def finish(store: IdempotencyStore, key: str, owner: str, complete: bool, expires_at: float = NOW + 3600) -> Any:
    (result,) = store.finish_many([Finish(key=key, owner=owner, complete=complete, expires_at=expires_at)])
    return result


def test_first_claim_wins_and_a_second_is_busy_until_the_lease_ends(store: IdempotencyStore) -> None:
    assert claim(store, "k", "a").state is ClaimState.CLAIMED
    busy = claim(store, "k", "b", now=NOW + 10)
    assert busy.state is ClaimState.BUSY and busy.lease_until == NOW + 60
    # The holder crashed: once its lease ran out, another invocation takes over.
    assert claim(store, "k", "b", now=NOW + 61).state is ClaimState.CLAIMED
    assert store.get("k").owner == "b"


def test_completed_is_a_duplicate_until_it_expires(store: IdempotencyStore) -> None:
    claim(store, "k", "a")
    assert finish(store, "k", "a", complete=True, expires_at=NOW + 1000).fenced
    assert claim(store, "k", "b", now=NOW + 10).state is ClaimState.COMPLETED
    assert claim(store, "k", "b", now=NOW + 500).state is ClaimState.COMPLETED  # long after the lease: still done
    # Past its TTL (DynamoDB deletes late), the record no longer guards.
    assert claim(store, "k", "c", now=NOW + 1001).state is ClaimState.CLAIMED


def test_release_lets_the_retry_claim_at_once(store: IdempotencyStore) -> None:
    claim(store, "k", "a")
    assert finish(store, "k", "a", complete=False).fenced
    assert store.get("k") is None
    assert claim(store, "k", "b", now=NOW + 1).state is ClaimState.CLAIMED


def test_completion_and_release_are_fenced_on_the_owner(store: IdempotencyStore) -> None:
    claim(store, "k", "a")
    claim(store, "k", "b", now=NOW + 61)  # a's lease expired; b took over
    assert finish(store, "k", "a", complete=True).fenced is False
    assert finish(store, "k", "a", complete=False).fenced is False
    record = store.get("k")
    assert record.owner == "b" and record.status == "IN_PROGRESS"
    assert finish(store, "k", "b", complete=True).fenced is True


def test_finishing_a_key_nobody_holds_is_a_lost_fence(store: IdempotencyStore) -> None:
    assert finish(store, "missing", "a", complete=True).fenced is False
    assert finish(store, "missing", "a", complete=False).fenced is False


def test_batch_calls_keep_request_order(store: IdempotencyStore) -> None:
    claim(store, "k2", "x")
    requests = [ClaimRequest(key=f"k{i}", job="j", owner="a", now=NOW, lease_until=NOW + 60) for i in range(5)]
    states = [r.state for r in store.claim_many(requests)]
    assert states == [ClaimState.CLAIMED, ClaimState.CLAIMED, ClaimState.BUSY, ClaimState.CLAIMED, ClaimState.CLAIMED]
    results = store.finish_many([Finish(key=f"k{i}", owner="a", complete=True, expires_at=NOW + 9) for i in range(5)])
    assert [r.fenced for r in results] == [True, True, False, True, True]


def test_a_claim_carries_its_own_ttl_so_an_abandoned_one_is_collected(store: IdempotencyStore) -> None:
    request = ClaimRequest(key="k", job="j", owner="a", now=NOW, lease_until=NOW + 60, expires_at=NOW + 3600)
    store.claim_many([request])
    assert store.get("k").expires_at == NOW + 3600
    # Past that TTL the record is free whatever its lease said (DynamoDB may not have deleted it yet).
    assert claim(store, "k", "b", now=NOW + 3601).state is ClaimState.CLAIMED
