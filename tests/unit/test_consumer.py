"""The batch flow (worker/_consumer.py) without moto: FakeSQS, an in-memory store that fails chosen writes, a clock.

Each test polls the fake queue the way Lambda's SQS poller does (``Poller.poll``): it receives up to ten
messages, hands them to ``process_batch`` as one event, and deletes those not reported in
``batchItemFailures``. Nothing waits: a retry's delay passes when the test moves the clock.
The last two tests were found while building the chaos ledger (tests/chaos/harness.py).
"""

from __future__ import annotations

import json
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from sqsjobs import JobApp, Outcome, PermanentError
from sqsjobs.enqueue._message import ATTR_FINISH
from sqsjobs.store._lease import Operation
from sqsjobs.store._lease_ops import Acquire, Complete, Transact
from sqsjobs.testing.events import FakeContext, record_from_message
from sqsjobs.testing.fake_sqs import FakeSQS, QueuedMessage
from sqsjobs.testing.flaky_store import FlakyStore
from sqsjobs.testing.tester import ManualClock
from sqsjobs.worker._dead_letters import ATTR_ERROR_TYPE, ATTR_REASON, Reason
from sqsjobs.worker._delivery import BatchResult

MAX_ATTEMPTS = 3


def ops_of(op: Operation) -> tuple[Operation, ...]:
    return op.ops if isinstance(op, Transact) else (op,)


def writes(kind: type) -> Any:
    """A FlakyStore match: any write that is, or holds, an operation of ``kind`` on a job's key."""
    return lambda op: any(isinstance(o, kind) and "#" not in o.key for o in ops_of(op))


@dataclass
class Poller:
    """One app over a fake queue and DLQ, a flaky in-memory store and a manual clock; ``poll`` is one invocation."""

    fifo: bool = False
    clock: ManualClock = field(default_factory=ManualClock)
    store: FlakyStore = field(default_factory=FlakyStore)
    runs: Counter[str] = field(default_factory=Counter)
    metrics: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.sqs = FakeSQS(clock=self.clock)
        self.queue = self.sqs.queue_url("jobs.fifo" if self.fifo else "jobs")
        self.dlq = self.sqs.queue_url("jobs-dlq.fifo" if self.fifo else "jobs-dlq")
        self.app = JobApp(queue_url=self.queue, dlq_url=self.dlq, max_attempts=MAX_ATTEMPTS, backoff_base=2.0,
                          backoff_cap=60.0, store=self.store, sqs_client=self.sqs,  # type: ignore[arg-type]
                          clock=self.clock, random=random.Random(7), sleep=self.clock.advance,
                          emit_metrics=self.metrics.append, environ={})
        self.plans: dict[str, list[str]] = {}

        @self.app.job("work", key="work:{n}")
        def work(n: int) -> dict[str, int]:
            key = f"work:{n}"
            self.runs[key] += 1
            plan = self.plans.get(key, [])
            step = plan.pop(0) if plan else "ok"
            if step == "transient":
                raise ConnectionError("dependency down")
            if step == "permanent":
                raise PermanentError("invoice 42 does not exist")
            return {"n": n}

    def enqueue(self, n: int, *plan: str, group: str | None = None) -> str:
        self.plans[f"work:{n}"] = list(plan)
        extra = {"group": group} if group is not None else {}
        return self.app.enqueue("work", n=n, **extra)

    def poll(self, size: int = 10) -> tuple[BatchResult, list[QueuedMessage]]:
        taken = self.sqs.receive(self.queue, size)
        assert taken, "nothing visible to poll"
        event = {"Records": [record_from_message(m.to_wire(), self.sqs.arn(self.queue)) for m in taken]}
        result = self.app.process_batch(event, FakeContext(clock=self.clock))
        failed = {f["itemIdentifier"] for f in result.response()["batchItemFailures"]}
        for message in taken:
            if message.message_id not in failed:
                self.sqs.remove(message)
        return result, taken

    def outcomes(self, result: BatchResult) -> list[tuple[str, Outcome | None]]:
        return [(d.key, d.outcome) for d in result.deliveries]

    def counted(self, metric: str) -> float:
        """The sum of ``metric`` over the EMF documents the batch wrote (a value may be one number or a list)."""
        total = 0.0
        for doc in map(json.loads, self.metrics):
            value = doc.get(metric, 0)
            total += sum(value) if isinstance(value, list) else value
        return total


@pytest.fixture
def poller() -> Poller:
    return Poller()


def test_success_is_acknowledged_recorded_and_counted(poller: Poller) -> None:
    poller.enqueue(1)
    poller.enqueue(2)
    result, _ = poller.poll()
    assert poller.outcomes(result) == [("work:1", Outcome.SUCCEEDED), ("work:2", Outcome.SUCCEEDED)]
    assert result.response() == {"batchItemFailures": []}
    assert poller.sqs.messages(poller.queue) == [] and poller.sqs.messages(poller.dlq) == []
    status = poller.app.status("work:1")
    assert status is not None and (status.state, status.attempts) == ("succeeded", 1)
    assert poller.counted("JobSucceeded") == 2 and poller.runs == Counter({"work:1": 1, "work:2": 1})


def test_a_retryable_failure_comes_back_after_its_jittered_delay_then_succeeds(poller: Poller) -> None:
    poller.enqueue(1, "transient")
    result, (taken,) = poller.poll()
    (d,) = result.deliveries
    assert d.outcome is Outcome.RETRY and not d.acknowledged
    assert result.response() == {"batchItemFailures": [{"itemIdentifier": taken.message_id}]}
    assert 0 <= d.delay <= 2.0  # full jitter: uniform(0, min(cap, base * 2 ** 0))
    (change,) = [c for c in poller.sqs.calls if c.operation.startswith("ChangeMessageVisibility")]
    entries = change.params.get("Entries") or [change.params]
    assert [e["VisibilityTimeout"] for e in entries] == [int(d.delay)]
    status = poller.app.status("work:1")
    assert status is not None and (status.state, status.attempts) == ("retrying", 1)
    poller.clock.advance(int(d.delay) + 1)
    result, _ = poller.poll()
    assert poller.outcomes(result) == [("work:1", Outcome.SUCCEEDED)]
    assert poller.runs["work:1"] == 2 and poller.counted("JobRetried") == 1


def test_exhausted_retries_reach_the_dlq_with_the_reason_the_worker_wrote(poller: Poller) -> None:
    poller.enqueue(1, *["transient"] * MAX_ATTEMPTS)
    seen = []
    for _ in range(MAX_ATTEMPTS):
        result, _ = poller.poll()
        seen.append(result.deliveries[0].outcome)
        poller.clock.advance(61)
    assert seen == [Outcome.RETRY, Outcome.RETRY, Outcome.DEAD_LETTERED]
    assert poller.sqs.messages(poller.queue) == []
    (letter,) = poller.sqs.messages(poller.dlq)
    assert letter.attribute(ATTR_REASON) == Reason.EXHAUSTED.value
    assert letter.attribute(ATTR_ERROR_TYPE) == "ConnectionError"
    assert poller.runs["work:1"] == MAX_ATTEMPTS


def test_a_permanent_failure_is_dead_lettered_at_once_and_acknowledged(poller: Poller) -> None:
    poller.enqueue(1, "permanent")
    result, _ = poller.poll()
    (d,) = result.deliveries
    assert (d.outcome, d.reason, d.acknowledged) == (Outcome.DEAD_LETTERED, Reason.PERMANENT, True)
    assert result.response() == {"batchItemFailures": []}
    (letter,) = poller.sqs.messages(poller.dlq)
    assert letter.attribute(ATTR_REASON) == "permanent" and letter.attribute(ATTR_ERROR_TYPE) == "PermanentError"
    status = poller.app.status("work:1")
    assert status is not None and status.state == "dead_lettered"


def test_a_malformed_body_is_dead_lettered_without_running(poller: Poller) -> None:
    poller.sqs.put(poller.queue, "not a job")
    result, _ = poller.poll()
    (d,) = result.deliveries
    assert (d.outcome, d.reason) == (Outcome.DEAD_LETTERED, Reason.MALFORMED)
    assert [m.body for m in poller.sqs.messages(poller.dlq)] == ["not a job"] and not poller.runs


def test_a_duplicate_of_a_completed_key_is_acknowledged_without_running(poller: Poller) -> None:
    poller.enqueue(1)
    poller.poll()
    poller.enqueue(1)  # a re-send of the same logical operation
    result, _ = poller.poll()
    assert poller.outcomes(result) == [("work:1", Outcome.DUPLICATE)]
    assert result.response() == {"batchItemFailures": []} and poller.runs["work:1"] == 1
    assert poller.counted("JobDuplicate") == 1


def test_two_copies_of_a_key_in_one_batch_run_once(poller: Poller) -> None:
    poller.enqueue(1)
    poller.enqueue(1)
    result, _ = poller.poll()
    assert poller.outcomes(result) == [("work:1", Outcome.SUCCEEDED), ("work:1", Outcome.DUPLICATE)]
    assert poller.runs["work:1"] == 1 and poller.sqs.messages(poller.queue) == []


def test_partial_batch_failure_reports_exactly_the_records_that_go_back(poller: Poller) -> None:
    poller.enqueue(1)
    poller.enqueue(2, "transient")
    poller.enqueue(3, "permanent")
    poller.enqueue(4)
    result, taken = poller.poll()
    by_key = dict(poller.outcomes(result))
    assert by_key == {"work:1": Outcome.SUCCEEDED, "work:2": Outcome.RETRY, "work:3": Outcome.DEAD_LETTERED,
                      "work:4": Outcome.SUCCEEDED}
    assert result.response() == {"batchItemFailures": [{"itemIdentifier": taken[1].message_id}]}
    assert [m.message_id for m in poller.sqs.messages(poller.queue)] == [taken[1].message_id]


def test_a_store_error_on_claim_returns_the_record_unrun_and_uses_no_attempt(poller: Poller) -> None:
    poller.enqueue(1)
    poller.enqueue(2)
    poller.store.fail(writes(Acquire), times=100)
    result, taken = poller.poll()
    assert [d.outcome for d in result.deliveries] == [Outcome.RETRY, Outcome.RETRY]
    assert {f["itemIdentifier"] for f in result.response()["batchItemFailures"]} == {m.message_id for m in taken}
    assert not poller.runs and all("injected by FlakyStore" in str(d.error) for d in result.deliveries)
    assert poller.app.status("work:1") is None  # nothing was claimed: no attempt counted
    poller.store.clear_faults()
    poller.clock.advance(61)
    result, _ = poller.poll()
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED, Outcome.SUCCEEDED]
    status = poller.app.status("work:1")
    assert status is not None and status.attempts == 1


def test_a_store_error_on_completion_sends_a_finish_copy_and_the_job_never_runs_again(poller: Poller) -> None:
    poller.enqueue(1)
    poller.store.fail(writes(Complete), times=100)  # more than the worker's own retries
    result, (taken,) = poller.poll()
    (d,) = result.deliveries
    assert d.outcome is Outcome.SUCCEEDED and d.acknowledged and result.unrecorded == ("work:1",)
    (copy,) = poller.sqs.messages(poller.queue)
    assert copy.message_id != taken.message_id and copy.attribute(ATTR_FINISH) is not None
    poller.store.clear_faults()
    poller.clock.advance(61)
    result, _ = poller.poll()
    assert result.response() == {"batchItemFailures": []} and poller.sqs.messages(poller.queue) == []
    status = poller.app.status("work:1")
    assert status is not None and status.state == "succeeded"
    assert poller.runs["work:1"] == 1  # the finish copy wrote the completion; it did not run the job


def test_fifo_a_group_waits_behind_its_failed_message_and_other_groups_run() -> None:
    poller = Poller(fifo=True)
    poller.enqueue(1, "transient", group="a")
    poller.enqueue(2, group="a")
    poller.enqueue(3, group="b")
    result, taken = poller.poll()
    assert poller.outcomes(result) == [("work:1", Outcome.RETRY), ("work:2", Outcome.GROUP_BLOCKED),
                                       ("work:3", Outcome.SUCCEEDED)]
    assert [f["itemIdentifier"] for f in result.response()["batchItemFailures"]] == [
        taken[0].message_id, taken[1].message_id]
    assert poller.runs == Counter({"work:1": 1, "work:3": 1})  # work:2 never ran out of order
    poller.clock.advance(61)
    result, _ = poller.poll()
    assert poller.outcomes(result) == [("work:1", Outcome.SUCCEEDED), ("work:2", Outcome.SUCCEEDED)]


def _copies_app() -> tuple[Any, Any]:
    from fuzz.strategies import RecordingSQS

    from sqsjobs import JobApp
    from sqsjobs.store._memory import InMemoryStore

    sqs = RecordingSQS()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/1/q", dlq_url="https://sqs.us-east-1.amazonaws.com/1/d",
                 store=InMemoryStore(), sqs_client=sqs, max_attempts=4, backoff_base=2, backoff_cap=60,
                 emit_metrics=lambda line: None)

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise ConnectionError("dependency down")

    return app, sqs


def test_a_later_copy_of_a_key_follows_the_first_and_uses_no_attempt() -> None:
    # Two copies of one job in a batch. Attempts are the runs that started, counted in the key's record:
    # the copy never runs, so it comes back with the first copy's delay and spends nothing.
    from sqsjobs import Outcome
    from sqsjobs.testing import FakeContext, sqs_record

    app, _ = _copies_app()
    body = app.runtime.job("flaky").message(n=1).body
    for expected_attempt in (1, 2, 3):
        result = app.process_batch({"Records": [sqs_record(body, attempt=3), sqs_record(body, attempt=1)]},
                                   FakeContext(clock=lambda: 0.0))
        first, copy = result.deliveries
        assert first.outcome is copy.outcome is Outcome.RETRY
        assert copy.delay == first.delay and copy.duration_ms is None
        assert app.status("flaky:1").attempts == expected_attempt


def test_a_later_copy_at_the_queues_last_receive_is_re_sent_not_left_to_sqs() -> None:
    # Returning a record at the queue's last receive let its redrive policy move it to the DLQ without any
    # reason attributes. The worker re-sends it as a fresh message instead (it has attempts left).
    from sqsjobs import Outcome
    from sqsjobs.testing import FakeContext, sqs_record

    app, sqs = _copies_app()
    body = app.runtime.job("flaky").message(n=2).body
    last = sqs_record(body, attempt=5)  # max_attempts=4: maxReceiveCount is 5
    result = app.process_batch({"Records": [sqs_record(body, attempt=1), last]}, FakeContext(clock=lambda: 0.0))
    first, copy = result.deliveries
    assert first.outcome is copy.outcome is Outcome.RETRY
    assert copy.acknowledged and not first.acknowledged
    (resent,) = [e for e in sqs.sent if e["MessageBody"] == body]
    assert resent["MessageAttributes"]["sqsjobs.resends"]["StringValue"] == "1"
    assert sqs.dead_letters == []


def test_a_new_request_beside_a_redelivered_dead_letter_of_its_key_runs() -> None:
    """Found by the model at 20x: SQS delivers a dead-lettered message again in the same batch as a new
    request of its key; the letter's copy is acknowledged (the record says it was dead-lettered), and the new
    request must not follow it as a duplicate: it runs."""
    from model.world import World

    w = World(0)
    app = w.apps[0]
    app.enqueue(app.jobs["a"].message(n=0))
    with w.plans(["permanent"]):
        w.deliver(app=0, size=10, remaining_ms=60_000)
    (letter,) = w.deleted
    w.sqs.deliver_again(letter)
    app.enqueue(app.jobs["a"].message(n=0))
    w.deliver(app=0, size=10, remaining_ms=60_000)
    w.check()
    w.settle()
    assert w.ledger.effects["k:0"] == 1


def test_without_a_dlq_a_permanent_failure_stays_on_its_queue_and_says_why() -> None:
    # worker/_send_back.py SendBack.dead_letters: no SQSJOBS_DLQ_URL, so nothing can hold the letter. The message
    # is not acknowledged (nothing is, unless it ran, was a duplicate, or reached the DLQ with a reason): it goes
    # back, and its note names the missing setting.
    from fuzz.strategies import RecordingSQS

    from sqsjobs.store._memory import InMemoryStore
    from sqsjobs.testing import FakeContext, sqs_record

    sqs = RecordingSQS()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/1/q", store=InMemoryStore(), sqs_client=sqs,
                 max_attempts=3, emit_metrics=lambda line: None, environ={})

    @app.job("doomed", key="doomed:{n}")
    def doomed(n: int) -> None:
        raise PermanentError("invoice 42 does not exist")

    body = app.runtime.job("doomed").message(n=1).body
    result = app.process_batch({"Records": [sqs_record(body)]}, FakeContext(clock=lambda: 0.0))
    (d,) = result.deliveries
    assert d.outcome is Outcome.RETRY and not d.acknowledged and result.failures == (d.message_id,)
    assert "DLQ send failed: no DLQ configured (SQSJOBS_DLQ_URL)" in d.notes
    assert app.status("doomed:1").state == "retrying"
