"""The debounce and dedupe operations (store/_enqueue_ops.py Debounce, Rearm, Reserve) mean the same on both stores:
the in-memory store, moto in-process and the local cloud's moto server (the fixture of test_lease_contract.py)."""

from __future__ import annotations

from collections.abc import Iterator

import boto3
import pytest
from aws_support import create_table
from moto import mock_aws

from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._enqueue_ops import Debounce, Rearm, Reserve
from sqsjobs.store._lease import LeaseState, LeaseStore
from sqsjobs.store._lease_ops import Acquire, Complete
from sqsjobs.store._memory import InMemoryStore

NOW = 1_000_000.0
TTL = 86_400.0


@pytest.fixture(scope="module")
def local_endpoint() -> Iterator[str]:
    from sqsjobs.local.serial_moto import serving

    with serving() as endpoint:
        yield endpoint


@pytest.fixture(params=["memory", "dynamodb", "local cloud"])
def store(request: pytest.FixtureRequest) -> Iterator[LeaseStore]:
    """The stores of tests/integration/test_lease_contract.py."""
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "local cloud":
        client = boto3.client("dynamodb", region_name="us-east-1",
                              endpoint_url=request.getfixturevalue("local_endpoint"))
        create_table(client, "debounce-contract")
        local = DynamoDBStore(client, "debounce-contract")
        yield local
        client.delete_table(TableName="debounce-contract")
        local.close()
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "contract")
        dynamodb = DynamoDBStore(client, "contract")
        yield dynamodb
        dynamodb.close()


def arm(store: LeaseStore, token: str, job: str = "reindex", now: float = NOW) -> bool:
    return store.write(Debounce(key="reindex:7", job=job, token=token, now=now, due=now + 30,
                                expires_at=now + TTL)).ok


def test_debounce_creates_a_released_record_then_keeps_its_state_and_counts(store: LeaseStore) -> None:
    assert arm(store, "t1") and arm(store, "t2")
    item = store.get("reindex:7")
    assert item is not None and item.state is LeaseState.RELEASED
    assert (item.get("debounce_token"), item.get("debounce_count"), item.get("debounce_due")) == ("t2", 2, NOW + 30)
    assert store.write(Acquire(key="reindex:7", owner="run", now=NOW, lease_until=NOW + 60, expires_at=NOW + TTL,
                               data={"ran_token": "t2"})).ok
    assert arm(store, "t3")  # while a run holds it: the token moves, the lease stays
    held = store.get("reindex:7")
    assert held is not None and held.state is LeaseState.HELD and held.owner == "run"
    assert held.get("debounce_token") == "t3" and held.get("debounce_count") == 3
    assert not arm(store, "t4", job="other-job")  # a key names one operation


def test_rearm_frees_a_completed_key_only_for_a_later_burst(store: LeaseStore) -> None:
    arm(store, "t1")
    store.write(Acquire(key="reindex:7", owner="run", now=NOW, lease_until=NOW + 60, expires_at=NOW + TTL,
                        data={"ran_token": "t1", "outcome": "running"}))
    store.write(Complete(key="reindex:7", owner="run", expires_at=NOW + TTL,
                         data={"outcome": "succeeded", "completed_token": "t1"}))
    assert not store.write(Rearm(key="reindex:7", token="t1", now=NOW)).ok  # the burst that completed
    arm(store, "t2")
    assert not store.write(Rearm(key="reindex:7", token="t1", now=NOW)).ok  # not the latest
    assert store.write(Rearm(key="reindex:7", token="t2", now=NOW)).ok
    item = store.get("reindex:7")
    assert item is not None and item.state is LeaseState.RELEASED and item.get("outcome") == "waiting"


def test_a_completion_remembers_a_request_without_a_token_and_rearm_frees_the_key_only_for_another(
        store: LeaseStore) -> None:
    """worker/_request.py: a member's completion adds its number to ``ran_requests`` (in the completions' batch)."""
    for owner, number in (("run-1", 11), ("run-2", 22)):
        assert store.write(Acquire(key="reindex:7", owner=owner, now=NOW, lease_until=NOW + 60, expires_at=NOW + TTL,
                                   job="reindex", data={"job": "reindex", "outcome": "running"})).ok
        done = Complete(key="reindex:7", owner=owner, expires_at=NOW + TTL, data={"outcome": "succeeded"},
                        add={"ran_requests": number})
        assert store.write_batch([done])[0].ok
        if number == 11:
            assert store.write(Rearm(key="reindex:7", now=NOW, request=22, job="reindex")).ok
    item = store.get("reindex:7")
    assert item is not None and item.state is LeaseState.DONE
    assert set(item.get("ran_requests")) == {11, 22}
    for refused in (Rearm(key="reindex:7", now=NOW, request=11, job="reindex"),  # completed: its copies are duplicates
                    Rearm(key="reindex:7", now=NOW, request=33, job="other-job")):  # a key names one operation
        assert not store.write(refused).ok
    assert store.write(Rearm(key="reindex:7", now=NOW, request=33, job="reindex")).ok


def reserve(store: LeaseStore, request: str, now: float, until_done: bool = False) -> bool:
    return store.write(Reserve(key="export:1", job="export", request=request, now=now, until=now + 100,
                               expires_at=now + TTL, until_done=until_done)).ok


def test_reserve_refuses_while_a_request_holds_the_key_until_its_hold_ends(store: LeaseStore) -> None:
    assert reserve(store, "r1", NOW)
    refused = store.write(Reserve(key="export:1", job="export", request="r2", now=NOW + 99, until=NOW + 199,
                                  expires_at=NOW + TTL))
    assert not refused.ok and refused.item is not None and refused.item.get("queued_id") == "r1"
    assert reserve(store, "r3", NOW + 101)  # the lost message blocked it 100 s, no longer
    item = store.get("export:1")
    assert item is not None and item.state is LeaseState.RELEASED and item.get("queued_id") == "r3"


def test_until_done_refuses_a_running_key_and_a_finished_run_frees_it(store: LeaseStore) -> None:
    store.write(Acquire(key="export:1", owner="run", now=NOW, lease_until=NOW + 600, expires_at=NOW + TTL))
    assert not reserve(store, "r1", NOW, until_done=True)
    assert reserve(store, "r1", NOW)  # until_started: a running key may be queued again
    store.write(Complete(key="export:1", owner="run", expires_at=NOW + TTL))
    assert reserve(store, "r2", NOW + 1, until_done=True)
    item = store.get("export:1")
    assert item is not None and item.state is LeaseState.DONE


def test_a_cancelled_key_refuses_a_reservation_until_its_ttl(store: LeaseStore) -> None:
    """docs/jobs.md: a cancelled deduplicated key stays cancelled; past its TTL the record is replaced whole."""
    from sqsjobs.worker._job_records import cancel_marker

    assert store.write(cancel_marker("export:1", now=NOW, expires_at=NOW + 1000, reason=None)).ok
    refused = store.write(Reserve(key="export:1", job="export", request="r1", now=NOW + 10, until=NOW + 110,
                                  expires_at=NOW + TTL))
    assert not refused.ok and refused.item is not None and refused.item.get("outcome") == "cancelled"
    assert reserve(store, "r2", NOW + 1001)
    item = store.get("export:1")
    assert item is not None and item.state is LeaseState.RELEASED and item.get("outcome") == "queued"
