"""A delivery is a duplicate only of the same request (worker/_request.py, docs/jobs.md "Keys"; issue 31 item 1).

A debounced key's requests differ by design: each enqueue is a burst (its own
token), and a group's member or a chain's step of the job runs undebounced, as
a request of its own. A later request is never swallowed by an earlier one,
whatever batch they share; a copy of a request that completed is a duplicate.
"""

from __future__ import annotations

import pytest

from sqsjobs import JobApp, Outcome
from sqsjobs.worker._request import RAN_REQUESTS


def reindexing() -> tuple[JobApp, list[int]]:
    app = JobApp()
    ran: list[int] = []

    @app.job("reindex", key="reindex:{pid}", debounce=30)
    def reindex(pid: int, v: int) -> None:
        ran.append(v)

    return app, ran


def test_a_member_and_a_later_burst_in_one_batch_both_run_the_burst_last() -> None:
    """The audit's reproduction: only v=1 ran, v=2 was acknowledged as a duplicate."""
    app, ran = reindexing()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        group = app.group()
        group.add(reindex.message(pid=1, v=1))
        group_id = group.enqueue()
        reindex.enqueue(pid=1, v=2)  # the key's last request
        t.clock.advance(31)
        first = t.drain()[0]
        assert len(first.deliveries) == 2  # one batch held both
        assert ran == [1, 2]
        assert t.count(Outcome.DUPLICATE) == 0 and t.count(Outcome.SUCCEEDED) == 2
        status = app.group_status(group_id)
        assert status is not None and status.succeeded == 1 and status.pending == 0


def test_a_burst_and_a_member_in_one_batch_both_run() -> None:
    app, ran = reindexing()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        reindex.enqueue(pid=1, v=1)
        t.clock.advance(31)
        app.chain(reindex.message(pid=1, v=2), reindex.message(pid=2, v=3)).enqueue()
        first = t.drain()[0]
        assert [d.job_name for d in first.deliveries] == ["reindex", "reindex"]  # the burst, the first step
        assert first.deliveries[0].key == first.deliveries[1].key == "reindex:1"
        assert sorted(ran) == [1, 2, 3] and len(ran) == 3


def test_a_member_enqueued_after_a_burst_ran_runs_and_its_copies_are_duplicates() -> None:
    app, ran = reindexing()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        reindex.enqueue(pid=1, v=1)
        t.clock.advance(31)
        t.drain()
        group = app.group()
        group.add(reindex.message(pid=1, v=2))
        group.enqueue()
        member = t.sqs.sent_to(t.queue_url)[-1].body
        t.drain()
        assert ran == [1, 2]  # before: the member was a "duplicate" of the burst and never ran
        record = t.store.get("reindex:1")
        assert record is not None and len(record.get(RAN_REQUESTS)) == 1
        reindex.enqueue(pid=1, v=3)  # a later burst runs, then the member's copy comes again
        t.clock.advance(31)
        t.drain()
        t.run(member)
        assert ran == [1, 2, 3]
        assert t.outcomes[-1].outcome is Outcome.DUPLICATE


def test_two_copies_of_one_request_in_one_batch_run_once() -> None:
    app, ran = reindexing()
    reindex = app.runtime.job("reindex")
    with app.testing() as t:
        reindex.enqueue(pid=1, v=1)
        body = t.sqs.sent_to(t.queue_url)[0].body
        t.clock.advance(31)
        t.run(body, body)
        assert ran == [1]
        assert [o.outcome for o in t.outcomes] == [Outcome.SUCCEEDED, Outcome.DUPLICATE]


@pytest.mark.parametrize("twice", [False, True])
def test_another_call_of_a_plain_job_on_one_key_in_one_batch_is_still_a_key_conflict(twice: bool) -> None:
    app = JobApp()

    @app.job("email", key="email:{user}")
    def email(user: int, text: str) -> None: ...

    with app.testing() as t:
        t.run(email.message(user=1, text="a"), email.message(user=1, text="a" if twice else "b"))
        expected = Outcome.DUPLICATE if twice else Outcome.DEAD_LETTERED
        assert [o.outcome for o in t.outcomes] == [Outcome.SUCCEEDED, expected]


def test_a_burst_dead_lettered_then_redriven_after_a_member_completed_the_key_still_runs() -> None:
    """Found by tests/model: the claim wrote the burst's token as the one that ran, so once a member completed the
    key, the redriven burst (which never completed) was taken for a duplicate of it."""
    from sqsjobs import PermanentError
    from sqsjobs.ops._redrive import redrive
    from sqsjobs.ops._redrive_options import RedriveOptions

    app = JobApp()
    ran: list[int] = []
    broken = [True]

    @app.job("reindex", key="reindex:{pid}", debounce=30)
    def reindex(pid: int, v: int) -> None:
        if broken[0] and v == 1:
            raise PermanentError("index down")
        ran.append(v)

    with app.testing() as t:
        reindex.enqueue(pid=1, v=1)
        t.clock.advance(31)
        t.drain()
        assert len(t.dead_letters()) == 1
        group = app.group()
        group.add(reindex.message(pid=1, v=2))  # a member completes the key meanwhile
        group.enqueue()
        t.drain()
        broken[0] = False
        redrive(RedriveOptions(dlq=t.dlq_url, to=t.queue_url, wait_time_seconds=0), sqs_client=t.sqs,
                clock=t.clock, sleep=t.clock.advance, records=t.store)  # type: ignore[arg-type]
        t.drain()
        assert ran == [2, 1] and t.outcomes[-1].outcome is Outcome.SUCCEEDED


def test_a_claim_tells_a_copy_from_another_request_whatever_the_records_state() -> None:
    """worker/_job_records.py ClaimResult.of, the one rule at the claim: a completed key is a duplicate only of the
    request it completed; another request comes back to claim it once re-armed (a read raced by another run)."""
    from sqsjobs.store._lease import LeaseItem, LeaseState, Written
    from sqsjobs.worker._decision import Ending
    from sqsjobs.worker._job_records import Claim, ClaimResult
    from sqsjobs.worker._request import Request

    burst = Request(job="reindex", args="ab" * 16, token="t2", coalesces=True)
    member = Request(job="reindex", args="cd" * 16, coalesces=True)

    def found(request: Request, state: LeaseState, **data: object) -> Ending | None:
        claim = Claim(key="reindex:1", job="reindex", owner="o", now=0.0, lease_until=60.0, expires_at=99.0,
                      fingerprint="f", fp_version=1, message_id="m", request=request)
        item = LeaseItem(key="reindex:1", state=state, data={"job": "reindex", "outcome": "succeeded", **data})
        return ClaimResult.of(claim, Written(key="reindex:1", ok=False, item=item)).ending

    assert found(burst, LeaseState.DONE, completed_token="t1") is Ending.ANOTHER_REQUEST
    assert found(burst, LeaseState.DONE, completed_token="t2") is Ending.DUPLICATE
    assert found(member, LeaseState.DONE, completed_token="t2") is Ending.ANOTHER_REQUEST
    assert found(member, LeaseState.DONE, ran_requests=frozenset({member.number})) is Ending.DUPLICATE
    # Released since (another request failed): a request it completed is still a duplicate, not run again.
    assert found(member, LeaseState.RELEASED, ran_requests=frozenset({member.number})) is Ending.DUPLICATE
