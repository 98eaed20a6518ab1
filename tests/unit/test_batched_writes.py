"""Batched writes (store/_statements.py): what each costs in requests, and a failed statement retried alone."""

from __future__ import annotations

from botocore.stub import Stubber

from sqsjobs._clients import dynamodb_client
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._lease_ops import Acquire, Complete, Release
from sqsjobs.store._memory import InMemoryStore
from sqsjobs.worker._record_writes import write_batch_with_retries

NOW, TTL = 1_000.0, 86_400.0


def fresh(key: str, owner: str = "a") -> Acquire:
    return Acquire(key=key, owner=owner, now=NOW, lease_until=NOW + 60, expires_at=NOW + TTL, count_attempt=True,
                   fresh=True)


def test_a_batch_of_ten_claims_and_ten_completions_is_two_requests() -> None:
    store = InMemoryStore()
    assert all(w.ok for w in store.write_batch([fresh(f"k{i}") for i in range(10)]))
    assert all(w.ok for w in store.write_batch([Complete(key=f"k{i}", owner="a", expires_at=NOW + TTL)
                                                for i in range(10)]))
    assert store.calls == 2


def test_twenty_six_statements_take_two_requests() -> None:
    store = InMemoryStore()
    store.write_batch([fresh(f"k{i}") for i in range(26)])
    assert store.calls == 2


def test_duplicates_cost_the_statements_and_one_read_and_a_free_key_one_update_more() -> None:
    store = InMemoryStore()
    store.write_batch([fresh(f"k{i}") for i in range(3)])
    store.write_batch([Complete(key="k0", owner="a", expires_at=NOW + TTL),
                       Complete(key="k1", owner="a", expires_at=NOW + TTL)])
    store.write(Release(key="k2", owner="a", expires_at=NOW + TTL))
    before = store.calls
    answers = store.write_batch([fresh(f"k{i}", owner="b") for i in range(3)])
    assert [w.ok for w in answers] == [False, False, True]  # two duplicates, one released key taken
    assert store.calls - before == 3  # the statements, one read of the found items, one conditional update


def test_a_throttled_statement_is_retried_and_only_it() -> None:
    client = dynamodb_client(region_name="us-east-1")
    store = DynamoDBStore(client, "jobs", statements=True)  # the stub plays DynamoDB: no probe
    ops = [Complete(key=k, owner="a", expires_at=NOW + TTL) for k in ("a", "b")]
    pauses: list[float] = []
    with Stubber(client) as stub:
        stub.add_response("batch_execute_statement", {"Responses": [
            {}, {"Error": {"Code": "ThrottlingError", "Message": "slow down"}}]})
        stub.add_response("update_item", {})  # the retry: one operation left, sent as its UpdateItem
        answers = write_batch_with_retries(store, ops, sleep=pauses.append, time_left=lambda: 60.0)
        stub.assert_no_pending_responses()
    assert [w.ok for w in answers] == [True, True] and len(pauses) == 1
    store.close()


def test_a_throttled_call_is_every_statement_s_error_and_the_statements_stay_trusted() -> None:
    client = dynamodb_client(region_name="us-east-1")
    store = DynamoDBStore(client, "jobs", statements=True)
    with Stubber(client) as stub:
        stub.add_client_error("batch_execute_statement", "ProvisionedThroughputExceededException", "slow down")
        answers = store.write_batch([fresh("a"), fresh("b")])
    assert all(w.error is not None and "BatchExecuteStatement" in w.error for w in answers)
    assert store.statements.state.value == "trusted"
    store.close()


def test_a_call_failed_by_the_server_is_sent_as_single_requests_from_then_on() -> None:
    # store/_statement_trust.py: a whole call refused for a reason that is not throttling (a server error,
    # a validation error, a denied PartiQL action) is no answer; the single requests are, now and after.
    client = dynamodb_client(region_name="us-east-1")
    store = DynamoDBStore(client, "jobs", statements=True)
    done = [Complete(key=k, owner="a", expires_at=NOW + TTL) for k in ("a", "b")]
    with Stubber(client) as stub:
        stub.add_client_error("batch_execute_statement", "InternalServerError", "down")
        stub.add_response("update_item", {})
        stub.add_response("update_item", {})
        answers = store.write_batch(done)
        stub.add_response("update_item", {})
        stub.add_response("update_item", {})
        again = store.write_batch(done)
        stub.assert_no_pending_responses()
    assert [w.ok for w in answers + again] == [True] * 4
    assert store.statements.state.value == "untrusted" and "InternalServerError" in str(store.statements.reason)
    store.close()
