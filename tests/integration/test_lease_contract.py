"""One contract, two stores: the in-memory store behaves exactly like DynamoDB's (moto), for every
operation of the lease and for its three users: job records, scheduler locks and chunked runs.

The DynamoDB store runs twice: on moto in-process, and on the local cloud's moto server (its DynamoDB
requests serialized, its transactions checked before they write: ``sqsjobs.local``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_support import create_table
from moto import mock_aws

from sqsjobs.schedules._period_locks import PeriodLocks
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._lease import LeaseState, LeaseStore
from sqsjobs.store._lease_ops import (
    Acquire,
    Amend,
    Annotate,
    Close,
    Complete,
    HandOver,
    Release,
    Renew,
    Transact,
)
from sqsjobs.store._memory import InMemoryStore
from sqsjobs.worker import _job_records as guard
from sqsjobs.worker._decision import Ending
from sqsjobs.worker._job_records import Claim, ClaimResult, JobState
from sqsjobs.workflows._chunked import RunStore

NOW = 1_000_000.0
TTL = 86_400.0


@pytest.fixture(scope="module")
def local_endpoint() -> Iterator[str]:
    from sqsjobs.local.serial_moto import serving

    with serving() as endpoint:
        yield endpoint


@pytest.fixture(params=["memory", "dynamodb", "local cloud"])
def store(request: pytest.FixtureRequest) -> Iterator[LeaseStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    if request.param == "local cloud":
        import uuid

        client = boto3.client("dynamodb", region_name="us-east-1",
                              endpoint_url=request.getfixturevalue("local_endpoint"))
        table = f"contract-{uuid.uuid4().hex[:8]}"
        create_table(client, table)
        local = DynamoDBStore(client, table)
        yield local
        local.close()
        return
    with mock_aws():
        client = boto3.client("dynamodb", region_name="us-east-1")
        create_table(client, "contract")
        dynamodb = DynamoDBStore(client, "contract")
        yield dynamodb
        dynamodb.close()


def acquire(store: LeaseStore, key: str, owner: str, now: float = NOW, lease: float | None = 60, **more: Any) -> Any:
    return store.write(Acquire(key=key, owner=owner, now=now, lease_until=None if lease is None else now + lease,
                               expires_at=now + TTL, **more))


# ---------------------------------------------------------------- the lease itself
def test_first_acquire_wins_and_a_second_is_refused_until_the_lease_ends(store: LeaseStore) -> None:
    assert acquire(store, "k", "a").ok
    refused = acquire(store, "k", "b", now=NOW + 10)
    assert refused.refused and refused.item.owner == "a" and refused.item.lease_until == NOW + 60
    # The holder died: once its lease ran out, another owner takes it over, and learns whose it was.
    taken = acquire(store, "k", "b", now=NOW + 61)
    assert taken.ok and taken.item.owner == "a" and taken.item.state is LeaseState.HELD
    assert store.get("k").owner == "b"


def test_complete_makes_it_done_until_its_ttl(store: LeaseStore) -> None:
    acquire(store, "k", "a")
    assert store.write(Complete(key="k", owner="a", expires_at=NOW + 1000, data={"outcome": "x"})).ok
    item = store.get("k")
    assert item.state is LeaseState.DONE and item.get("outcome") == "x" and item.expires_at == NOW + 1000
    refused = acquire(store, "k", "b", now=NOW + 500)
    assert refused.refused and refused.item.state is LeaseState.DONE
    # Past its TTL (DynamoDB deletes late) it is free again, and nothing of the old item is left.
    fresh = acquire(store, "k", "c", now=NOW + 1001, count_attempt=True)
    assert fresh.ok and fresh.item is None
    item = store.get("k")
    assert item.owner == "c" and item.attempts == 1 and item.get("outcome") is None


def test_release_frees_it_and_keeps_its_history(store: LeaseStore) -> None:
    acquire(store, "k", "a", count_attempt=True)
    assert store.write(Release(key="k", owner="a", expires_at=NOW + TTL, data={"last_error": "E: x"})).ok
    item = store.get("k")
    assert item.state is LeaseState.RELEASED and item.attempts == 1 and item.get("last_error") == "E: x"
    again = acquire(store, "k", "b", now=NOW + 1, count_attempt=True)
    assert again.ok and again.item.state is LeaseState.RELEASED and again.item.attempts == 1
    assert store.get("k").attempts == 2


def test_a_release_can_give_the_attempt_back(store: LeaseStore) -> None:
    acquire(store, "k", "a", count_attempt=True)
    assert store.write(Release(key="k", owner="a", expires_at=NOW + TTL, attempts_delta=-1)).ok
    assert store.get("k").attempts == 0


def test_complete_release_and_hand_over_are_fenced_on_the_owner(store: LeaseStore) -> None:
    acquire(store, "k", "a")
    acquire(store, "k", "b", now=NOW + 61)  # a's lease ran out; b took over
    for op in (Complete(key="k", owner="a", expires_at=NOW), Release(key="k", owner="a", expires_at=NOW),
               HandOver(key="k", owner="a", to_owner="x", expires_at=NOW)):
        refused = store.write(op)
        assert refused.refused and refused.item.owner == "b"
    item = store.get("k")
    assert item.owner == "b" and item.state is LeaseState.HELD
    assert store.write(HandOver(key="k", owner="b", to_owner="c", expires_at=NOW, data={"cursor": "7"})).ok
    assert store.get("k").owner == "c" and store.get("k").get("cursor") == "7"
    assert store.write(Complete(key="k", owner="c", expires_at=NOW + TTL)).ok


def test_renew_moves_the_end_of_a_held_lease_fenced_on_the_owner(store: LeaseStore) -> None:
    acquire(store, "k", "a")  # held until NOW + 60
    assert store.write(Renew(key="k", owner="a", lease_until=NOW + 5, expires_at=NOW + TTL)).ok
    item = store.get("k")
    assert item.state is LeaseState.HELD and item.owner == "a" and item.lease_until == NOW + 5
    assert acquire(store, "k", "b", now=NOW + 6).ok  # the shorter lease ran out: taken over
    assert store.write(Renew(key="k", owner="a", lease_until=NOW + 100, expires_at=NOW + TTL)).refused
    assert store.get("k").lease_until == NOW + 66  # b's, untouched by a's late renew
    assert store.write(Renew(key="missing", owner="a", lease_until=NOW, expires_at=NOW)).refused


def test_finishing_what_nobody_holds_is_refused(store: LeaseStore) -> None:
    assert store.write(Complete(key="missing", owner="a", expires_at=NOW)).refused
    assert store.write(Release(key="missing", owner="a", expires_at=NOW)).refused
    acquire(store, "k", "a")
    store.write(Complete(key="k", owner="a", expires_at=NOW + TTL))
    assert store.write(Release(key="k", owner="a", expires_at=NOW)).refused  # DONE is not HELD


def test_a_lease_without_an_end_is_never_taken_over(store: LeaseStore) -> None:
    assert acquire(store, "run", "page:0", lease=None).ok
    assert acquire(store, "run", "page:0", now=NOW + 10 * TTL / 100).refused


def test_close_settles_what_nobody_holds(store: LeaseStore) -> None:
    closed = store.write(Close(key="new", now=NOW, expires_at=NOW + TTL, data={"outcome": "cancelled"}))
    assert closed.ok and closed.item is None and store.get("new").state is LeaseState.DONE
    acquire(store, "live", "a")
    refused = store.write(Close(key="live", now=NOW + 1, expires_at=NOW + TTL))
    assert refused.refused and refused.item.owner == "a"
    dead = store.write(Close(key="live", now=NOW + 61, expires_at=NOW + TTL, state=LeaseState.RELEASED))
    assert dead.ok and dead.item.owner == "a"
    item = store.get("live")
    assert item.state is LeaseState.RELEASED and item.owner is None
    assert store.write(Close(key="new", now=NOW, expires_at=NOW + TTL)).refused  # DONE stays DONE


def test_annotate_writes_only_to_a_live_lease(store: LeaseStore) -> None:
    assert store.write(Annotate(key="none", now=NOW, data={"cancel_requested": True})).refused
    acquire(store, "k", "a")
    assert store.write(Annotate(key="k", now=NOW + 1, data={"cancel_requested": True})).ok
    assert store.get("k").get("cancel_requested") is True
    assert store.write(Annotate(key="k", now=NOW + 61, data={"cancel_requested": True})).refused


def test_a_fingerprint_of_the_same_version_must_match(store: LeaseStore) -> None:
    acquire(store, "k", "a", fingerprint="f1", fp_version=1)
    store.write(Release(key="k", owner="a", expires_at=NOW + TTL))
    assert acquire(store, "k", "b", fingerprint="f2", fp_version=1).refused
    assert acquire(store, "k", "b", fingerprint="f2", fp_version=2).ok  # another version: not compared
    store.write(Release(key="k", owner="b", expires_at=NOW + TTL))
    assert store.get("k").fingerprint == "f2"


def test_a_record_of_another_job_refuses_the_acquire_whatever_the_versions(store: LeaseStore) -> None:
    acquire(store, "k", "a", job="charge-card", fingerprint="f1", fp_version=1, data={"job": "charge-card"})
    store.write(Release(key="k", owner="a", expires_at=NOW + TTL))
    refused = acquire(store, "k", "b", job="ship-order", fingerprint="f2", fp_version=2)
    assert refused.refused and refused.item.get("job") == "charge-card"
    assert acquire(store, "k", "b", job="charge-card", fingerprint="f1", fp_version=2).ok


def test_a_message_that_was_dead_lettered_is_not_acquired_again(store: LeaseStore) -> None:
    acquire(store, "k", "a")
    store.write(Release(key="k", owner="a", expires_at=NOW + TTL, data={"dead_letter_of": "m-1"}))
    assert acquire(store, "k", "b", not_for_message="m-1").refused
    assert acquire(store, "k", "b", not_for_message="m-2").ok  # a redrive sends a new message


def test_write_many_keeps_request_order(store: LeaseStore) -> None:
    acquire(store, "k2", "x")
    ops = [Acquire(key=f"k{i}", owner="a", now=NOW, lease_until=NOW + 60, expires_at=NOW + TTL) for i in range(5)]
    assert [w.ok for w in store.write_many(ops)] == [True, True, False, True, True]
    done = store.write_many([Complete(key=f"k{i}", owner="a", expires_at=NOW + 9) for i in range(5)])
    assert [w.ok for w in done] == [True, True, False, True, True]


def test_submit_returns_at_once_and_its_future_tells_the_answer(store: LeaseStore) -> None:
    acquire(store, "k", "a")
    future = store.submit(Complete(key="k", owner="a", expires_at=NOW + TTL))
    assert future.result().ok and store.get("k").state is LeaseState.DONE


def test_close_can_expect_fields(store: LeaseStore) -> None:
    counted = {"counted_as": "expired"}
    assert store.write(Close(key="new", now=NOW, expires_at=NOW + TTL, state=LeaseState.RELEASED, data=counted,
                             expect={"counted_as": None})).ok
    refused = store.write(Close(key="new", now=NOW, expires_at=NOW + TTL, state=LeaseState.RELEASED,
                                data={"counted_as": "dead_lettered"}, expect={"counted_as": None}))
    assert refused.refused and refused.item.get("counted_as") == "expired"
    assert store.write(Close(key="new", now=NOW, expires_at=NOW + TTL, state=LeaseState.RELEASED,
                             data={"outcome": "x"}, expect={"counted_as": "expired"})).ok
    assert store.get("new").get("outcome") == "x"


def test_amend_adds_to_counters_and_sets_fields_when_its_expectations_hold(store: LeaseStore) -> None:
    assert store.write(Amend(key="shard", add={"members_pending": -1})).refused  # absent: refused, not created
    store.write(Close(key="shard", now=NOW, expires_at=NOW + TTL, data={"members_pending": 2}))
    assert store.write(Amend(key="shard", add={"members_pending": -1, "members_succeeded": 1},
                             above={"members_pending": 1})).ok
    refused = store.write(Amend(key="shard", add={"members_pending": -1}, above={"members_pending": 1}))
    assert refused.refused and refused.item.get("members_pending") == 1
    assert store.write(Amend(key="shard", add={"members_pending": -1}, data={"finished_at": NOW},
                             expect={"members_pending": 1, "status": "DONE"})).ok
    item = store.get("shard")
    assert (item.get("members_pending"), item.get("members_succeeded"), item.get("finished_at")) == (0, 1, NOW)
    assert store.write(Amend(key="shard", data={"name": "x"}, expect={"group_state": None})).ok
    assert store.write(Amend(key="shard", data={"name": "y"}, expect={"status": "HELD"})).refused
    assert store.write(Amend(key="shard", data={"name": "y"}, above={"members_cancelled": 0})).refused  # absent
    assert store.get("shard").get("name") == "x"
    assert store.write(Amend(key="shard", data={"name": None})).ok  # only removes a field
    assert store.get("shard").get("name") is None


def test_amend_counts_a_number_once_with_sets_and_answers_the_item_it_made(store: LeaseStore) -> None:
    store.write(Close(key="shard", now=NOW, expires_at=NOW + TTL, data={"members_pending": 2}))
    once = Amend(key="shard", add={"members_pending": -1, "members_dead_lettered": 1}, not_in_set={"counted": 7},
                 add_to_set={"counted": 7, "failed": 7})
    made = store.write(once)
    assert made.ok and made.item.get("members_pending") == 1 and made.item.get("counted") == frozenset({7})
    again = store.write(once)
    assert again.refused and again.item.get("counted") == frozenset({7}) and again.item.get("members_pending") == 1
    moved = store.write(Amend(key="shard", add={"members_dead_lettered": -1, "members_succeeded": 1},
                              in_set={"failed": 7}, delete_from_set={"failed": 7}))
    assert moved.ok and moved.item.get("failed") is None and moved.item.get("members_succeeded") == 1
    assert store.write(Amend(key="shard", add={"members_succeeded": 1}, in_set={"failed": 7},
                             delete_from_set={"failed": 7})).refused  # moved once only
    assert store.get("shard").get("counted") == frozenset({7})


def test_a_transaction_writes_everything_or_nothing(store: LeaseStore) -> None:
    acquire(store, "job", "a")
    store.write(Close(key="shard", now=NOW, expires_at=NOW + TTL, data={"members_pending": 1}))
    count = Amend(key="shard", add={"members_pending": -1, "members_succeeded": 1}, above={"members_pending": 1})
    done = Complete(key="job", owner="a", expires_at=NOW + TTL, data={"outcome": "succeeded", "counted_as": "s"})
    refused = store.write(Transact(ops=(done, count)))
    assert refused.refused and refused.refused_at == 1 and refused.item.get("members_pending") == 1
    assert store.get("job").state is LeaseState.HELD and store.get("shard").get("members_succeeded") is None
    last = Amend(key="shard", add={"members_pending": -1, "members_succeeded": 1}, expect={"members_pending": 1})
    assert store.write(Transact(ops=(done, last))).ok
    assert store.get("job").get("counted_as") == "s" and store.get("job").state is LeaseState.DONE
    assert store.get("shard").get("members_pending") == 0
    # The completion is fenced: a repeat is refused by the job's record, and counts nothing.
    again = store.write(Transact(ops=(done, Amend(key="shard", add={"members_succeeded": 1}))))
    assert again.refused and again.refused_at == 0 and again.item.state is LeaseState.DONE
    assert store.get("shard").get("members_succeeded") == 1


def test_a_transaction_settles_what_nobody_holds_and_refuses_an_item_past_its_ttl(store: LeaseStore) -> None:
    store.write(Close(key="shard", now=NOW, expires_at=NOW + TTL, data={"members_pending": 5}))
    settle = Close(key="job", now=NOW, expires_at=NOW + TTL, state=LeaseState.RELEASED,
                   data={"outcome": "expired", "counted_as": "expired"}, expect={"counted_as": None})
    count = Amend(key="shard", add={"members_pending": -1, "members_expired": 1})
    assert store.write(Transact(ops=(settle, count))).ok
    assert store.write(Transact(ops=(settle, count))).refused_at == 0  # counted once
    assert store.get("shard").get("members_pending") == 4
    store.write(Close(key="old", now=NOW, expires_at=NOW + 10))
    stale = Close(key="old", now=NOW + 11, expires_at=NOW + TTL, state=LeaseState.RELEASED)
    assert store.write(Transact(ops=(stale, count))).refused_at == 0
    assert store.get("shard").get("members_pending") == 4


def test_get_many_reads_the_items_that_exist(store: LeaseStore) -> None:
    for i in range(3):
        store.write(Close(key=f"k{i}", now=NOW, expires_at=NOW + TTL, data={"members_pending": i}))
    keys = [f"k{i}" for i in range(130)] + ["k1"]  # more than one BatchGetItem call
    found = store.get_many(keys)
    assert sorted(found) == ["k0", "k1", "k2"] and found["k2"].get("members_pending") == 2


# ---------------------------------------------------------------- user 1: job records (sqsjobs.worker._job_records)
def claim(store: LeaseStore, key: str, owner: str, *, now: float = NOW, fingerprint: str = "f",
          message_id: str = "m-1", version: int = 1) -> ClaimResult:
    request = Claim(key=key, job="invoice-email", owner=owner, now=now, lease_until=now + 60, expires_at=now + TTL,
                    fingerprint=fingerprint, fp_version=version, message_id=message_id, enqueued_at=now - 1)
    (answer,) = store.write_many([request.operation()])
    return ClaimResult.of(request, answer)


def test_job_record_claim_endings(store: LeaseStore) -> None:
    first = claim(store, "k", "a")
    assert first.claimed and first.attempt == 1 and not first.took_over
    assert guard.status(store, "k").state == JobState.RUNNING
    busy = claim(store, "k", "b", now=NOW + 1)
    assert busy.ending is Ending.BUSY and busy.lease_until == NOW + 60
    assert claim(store, "k", "b", now=NOW + 1, fingerprint="other").ending is Ending.KEY_CONFLICT
    store.write(guard.succeeded("k", "a", now=NOW + 2, expires_at=NOW + TTL, result='{"ok":1}'))
    assert claim(store, "k", "b", now=NOW + 3).ending is Ending.DUPLICATE
    assert claim(store, "k", "b", now=NOW + 3, fingerprint="other").ending is Ending.KEY_CONFLICT
    status = guard.status(store, "k")
    assert (status.state, status.attempts, status.result, status.job) == ("succeeded", 1, {"ok": 1}, "invoice-email")
    assert status.started_at == NOW and status.finished_at == NOW + 2 and status.enqueued_at == NOW - 1


def test_job_record_retry_takeover_and_attempts(store: LeaseStore) -> None:
    claim(store, "k", "a")
    store.write(guard.retrying("k", "a", now=NOW + 1, expires_at=NOW + TTL, error=ConnectionError("down")))
    status = guard.status(store, "k")
    assert (status.state, status.attempts, status.last_error) == ("retrying", 1, "ConnectionError: down")
    second = claim(store, "k", "b", now=NOW + 2, message_id="m-1")
    assert second.claimed and second.attempt == 2 and not second.took_over
    # b dies: the next claim takes over and is told.
    third = claim(store, "k", "c", now=NOW + 63)
    assert third.claimed and third.attempt == 3 and third.took_over
    assert third.previous.get("last_error") == "ConnectionError: down"


def test_job_record_not_started_gives_the_attempt_back(store: LeaseStore) -> None:
    first = claim(store, "k", "a")
    store.write(guard.not_started("k", "a", now=NOW, expires_at=NOW + TTL, previous=first.previous))
    assert guard.status(store, "k").attempts == 0
    assert claim(store, "k", "b", now=NOW + 1).attempt == 1


def test_job_record_dead_lettered_then_a_redelivery_and_a_redrive(store: LeaseStore) -> None:
    claim(store, "k", "a", message_id="m-1")
    store.write(guard.dead_lettered("k", "a", now=NOW + 1, expires_at=NOW + TTL, error=ValueError("bad"),
                                    reason="permanent", message_id="m-1", ran=True, previous=None))
    assert guard.status(store, "k").state == JobState.DEAD_LETTERED
    # The same message again (its acknowledgement was lost): not run again.
    assert claim(store, "k", "b", now=NOW + 2, message_id="m-1").ending is Ending.ALREADY_DEAD_LETTERED
    # A redrive sends a new message: it runs, with fresh attempts; the status still counts every run.
    redriven = claim(store, "k", "b", now=NOW + 3, message_id="m-2")
    assert redriven.claimed and redriven.attempt == 1
    assert guard.status(store, "k").attempts == 2


def test_job_record_cancel_expire(store: LeaseStore) -> None:
    assert store.write(guard.cancel_marker("k", now=NOW, expires_at=NOW + TTL, reason="closed")).ok
    assert claim(store, "k", "a").ending is Ending.CANCELLED
    assert guard.status(store, "k").state == JobState.CANCELLED
    store.write(guard.expired("e", job="invoice-email", now=NOW, expires_at=NOW + TTL))
    assert guard.status(store, "e").state == JobState.EXPIRED
    assert claim(store, "e", "a").claimed  # a later enqueue of an expired key may still run
    claim(store, "r", "a")
    assert store.write(guard.cancel_request("r", now=NOW + 1)).ok
    assert store.get("r").get("cancel_requested") is True


def test_status_of_a_key_never_claimed_is_none(store: LeaseStore) -> None:
    assert guard.status(store, "never") is None


# ---------------------------------------------------------------- user 2: period locks (schedules/_period_locks.py)
def test_period_locks(store: LeaseStore) -> None:
    locks = PeriodLocks(store)
    key = "nightly-report:2026-08-05"  # the period's lock is the job's own record
    take = {"expires_at": NOW + TTL, "job": "r", "fingerprint": "f", "fp_version": 1}
    assert locks.acquire(key, owner="a", now=NOW, lease_until=NOW + 300, **take).ok
    held = locks.acquire(key, owner="b", now=NOW + 1, lease_until=NOW + 301, **take)
    assert not held.ok and not held.done and held.reason == f"held by a until {NOW + 300}"
    assert locks.release(key, owner="a", now=NOW + 1, expires_at=NOW + TTL, error=RuntimeError("down"))
    assert locks.acquire(key, owner="b", now=NOW + 2, lease_until=NOW + 302, **take).ok
    assert not locks.complete(key, owner="a", now=NOW + 3, expires_at=NOW + TTL)
    assert locks.complete(key, owner="b", now=NOW + 3, expires_at=NOW + TTL)
    done = locks.acquire(key, owner="c", now=NOW + 1000, lease_until=NOW + 1300, **take)
    assert done.done and done.reason == "already done by b"


# ---------------------------------------------------------------- user 3: chunked runs (sqsjobs.workflows._chunked)
def test_run_records_are_handed_from_page_to_page(store: LeaseStore) -> None:
    runs = RunStore(store, ttl=TTL)
    assert runs.begin("reindex", "r1", cursor="0", now=NOW)
    assert not runs.begin("reindex", "r1", cursor="0", now=NOW)
    assert runs.advance("reindex", "r1", page="0", following="500", now=NOW + 1)
    assert not runs.advance("reindex", "r1", page="0", following="500", now=NOW + 2)  # a duplicate page
    assert runs.advance("reindex", "r1", page="500", following=None, now=NOW + 3, pages_done=1)
    status = runs.status("reindex", "r1")
    assert (status.status, status.pages_done, status.cursor, status.finished_at) == ("FINISHED", 2, None, NOW + 3)
    assert store.get("run#reindex:r1").expires_at == NOW + 3 + TTL  # finding 11: every run expires


# ---------------------------------------------------------------- batched writes (store/_statements.py)
def fresh(key: str, owner: str, now: float = NOW, **more: Any) -> Acquire:
    return Acquire(key=key, owner=owner, now=now, lease_until=now + 60, expires_at=now + TTL, count_attempt=True,
                   fresh=True, **more)


def test_a_batch_of_fresh_acquires_answers_each_as_a_single_acquire_would(store: LeaseStore) -> None:
    acquire(store, "held", "x")                                      # a live holder
    acquire(store, "released", "x", count_attempt=True)
    store.write(Release(key="released", owner="x", expires_at=NOW + TTL, data={"last_error": "E: x"}))
    acquire(store, "done", "x")
    store.write(Complete(key="done", owner="x", expires_at=NOW + 5, data={"outcome": "succeeded"}))
    acquire(store, "died", "x", lease=1)                             # its lease ran out: a takeover
    acquire(store, "other-job", "x", data={"job": "refund"})          # free, but another job's record
    store.write(Release(key="other-job", owner="x", expires_at=NOW + TTL))

    keys = ["new", "held", "released", "done", "died", "other-job"]
    answers = store.write_batch([fresh(k, "b", now=NOW + 10, job="invoice-email") for k in keys])

    assert [a.key for a in answers] == keys and all(a.error is None for a in answers)
    assert [a.ok for a in answers] == [True, False, True, True, True, False]
    new, held, released, done, died, other = answers
    assert new.item is None and store.get("new").owner == "b" and store.get("new").attempts == 1
    assert held.item.owner == "x" and store.get("held").owner == "x"
    assert released.item.get("last_error") == "E: x" and store.get("released").attempts == 2
    assert done.item is None and store.get("done").get("outcome") is None  # past its TTL: replaced whole
    assert died.item.owner == "x" and died.item.state is LeaseState.HELD
    assert other.item.get("job") == "refund" and store.get("other-job").state is LeaseState.RELEASED


def test_a_batch_of_completions_and_releases_is_fenced_statement_by_statement(store: LeaseStore) -> None:
    for key in ("a", "b", "c"):
        acquire(store, key, "me", count_attempt=True)
    acquire(store, "theirs", "them")
    acquire(store, "uncounted", "me")                                 # no attempts stored: the guard sends it alone

    answers = store.write_batch([
        Complete(key="a", owner="me", expires_at=NOW + TTL, data={"outcome": "succeeded", "result": "7"}),
        Release(key="b", owner="me", expires_at=NOW + TTL, attempts_delta=-1, data={"last_error": None}),
        HandOver(key="c", owner="me", to_owner="next", expires_at=NOW + TTL),
        Complete(key="theirs", owner="me", expires_at=NOW + TTL),
        Complete(key="absent", owner="me", expires_at=NOW + TTL),
        Release(key="uncounted", owner="me", expires_at=NOW + TTL, attempts_delta=1),
    ])

    assert [(a.ok, a.error) for a in answers] == [(True, None)] * 3 + [(False, None)] * 2 + [(True, None)]
    assert answers[3].item.owner == "them" and answers[4].item is None
    assert store.get("a").state is LeaseState.DONE and store.get("a").get("result") == "7"
    assert store.get("b").state is LeaseState.RELEASED and store.get("b").attempts == 0
    assert store.get("c").owner == "next" and store.get("c").state is LeaseState.HELD
    assert store.get("theirs").state is LeaseState.HELD and store.get("absent") is None
    assert store.get("uncounted").attempts == 1


def test_more_than_twenty_five_statements_are_all_answered_in_order(store: LeaseStore) -> None:
    keys = [f"k{i}" for i in range(30)]
    assert all(a.ok for a in store.write_batch([fresh(k, "a") for k in keys]))
    answers = store.write_batch([Complete(key=k, owner="a" if i % 2 else "z", expires_at=NOW + TTL)
                                 for i, k in enumerate(keys)])
    assert [a.key for a in answers] == keys and [a.ok for a in answers] == [bool(i % 2) for i in range(30)]
    assert [store.get(k).state for k in keys] == [LeaseState.DONE if i % 2 else LeaseState.HELD for i in range(30)]


def test_a_batch_mixes_statements_with_single_requests(store: LeaseStore) -> None:
    acquire(store, "held", "a")
    answers = store.write_batch([fresh("x", "a"), Close(key="marker", now=NOW, expires_at=NOW + TTL),
                                 Amend(key="held", add={"total": 1}),
                                 Complete(key="held", owner="a", expires_at=NOW + 9)])
    assert [a.ok for a in answers] == [True, True, True, True]
    assert answers[2].item.get("total") == 1 and store.get("held").state is LeaseState.DONE
