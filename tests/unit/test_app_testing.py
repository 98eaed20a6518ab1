"""``app.testing()`` / ``sqsjobs.testing.use``: an app's own jobs, in-process, put back afterwards (issue 14)."""

from __future__ import annotations

import random
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsjobs import InMemoryStore, JobApp, Outcome, PermanentError, RetryableError
from sqsjobs.testing import FakeSQS, ManualClock, given_attempts, use


def make_app(**options: Any) -> tuple[JobApp, list[tuple[str, Any]]]:
    app = JobApp(**options)
    ran: list[tuple[str, Any]] = []

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None:
        ran.append(("greet", user_id))

    @app.job("fragile", key="fragile:{n}", max_attempts=3, backoff_base=10, backoff_cap=10, jitter=False)
    def fragile(n: int) -> None:
        ran.append(("fragile", n))
        if sum(1 for name, _ in ran if name == "fragile") < 3:
            raise RetryableError("not yet")

    @app.job("poison", key="poison:{n}")
    def poison(n: int) -> None:
        raise PermanentError(f"record {n} is gone")

    @app.job("fan-out", key="fan-out:{n}")
    def fan_out(n: int) -> None:
        for i in range(n):
            app.enqueue("greet", user_id=i)

    return app, ran


def test_a_duplicate_runs_once_and_outcomes_name_job_key_and_message_id() -> None:
    app, ran = make_app()
    with app.testing() as t:
        result = t.run(app.message("greet", user_id=7), app.message("greet", user_id=7))
    assert ran == [("greet", 7)]
    assert result.response() == {"batchItemFailures": []}
    assert [(o.job, o.key, o.outcome) for o in t.outcomes] == [
        ("greet", "greet:7", Outcome.SUCCEEDED), ("greet", "greet:7", Outcome.DUPLICATE)]
    assert [o.message_id for o in t.outcomes] == ["fake-000001", "fake-000002"]
    assert t.count(Outcome.DUPLICATE, job="greet") == 1
    assert t.metrics and '"JobDuplicate"' in "".join(t.metrics)


def test_drain_follows_retries_on_the_manual_clock_without_sleeping() -> None:
    app, _ = make_app()
    with app.testing() as t:
        start = t.clock()
        app.enqueue("fragile", n=1)
        results = t.drain()
        assert [o.outcome for o in t.outcomes] == [Outcome.RETRY, Outcome.RETRY, Outcome.SUCCEEDED]
        assert [o.attempt for o in t.outcomes] == [1, 2, 3]
        # Two retries of exactly backoff_base=10 s (jitter off): the clock jumped, nobody slept.
        assert t.clock() - start == 20.0
        assert len(results) == 3 and t.sqs.messages(t.queue_url) == []
        assert [c.operation for c in t.calls] == ["SendMessage", "ChangeMessageVisibilityBatch",
                                                  "ChangeMessageVisibilityBatch"]


def test_a_dead_letter_carries_its_reason_and_the_message_id_the_outcome_showed() -> None:
    app, _ = make_app()
    with app.testing() as t:
        t.run(app.message("poison", n=3))
        (letter,) = t.dead_letters()
        (outcome,) = t.outcomes
    assert outcome.outcome is Outcome.DEAD_LETTERED
    assert (letter.job, letter.reason, letter.error_type) == ("poison", "permanent", "PermanentError")
    assert letter.error_message == "record 3 is gone"
    assert letter.original_message_id == outcome.message_id


def test_the_last_attempt_is_exhausted_and_malformed_bodies_fail_alone() -> None:
    app, _ = make_app()
    with app.testing(settings={"max_attempts": 3}) as t:
        # Attempts are counted in the job's record (docs/architecture.md), not by the receive count: two already ran.
        given_attempts(app, app.message("fragile", n=1), 2)
        t.run(app.message("fragile", n=1), attempt=3)
        t.run('{"v": 1, "job": "no-such-job"}', {"v": 1, "job": "greet", "args": {"user_id": 1}})
        reasons = sorted(letter.reason for letter in t.dead_letters())
        outcomes = [o.outcome for o in t.outcomes]
    assert reasons == ["exhausted", "malformed"]
    assert outcomes == [Outcome.DEAD_LETTERED, Outcome.DEAD_LETTERED, Outcome.SUCCEEDED]


def test_jobs_enqueued_by_jobs_are_recorded_and_run_by_drain() -> None:
    app, ran = make_app()
    with app.testing() as t:
        t.run(app.message("fan-out", n=3))
        assert [(s.job, s.key, s.args) for s in t.enqueued("greet")] == [
            ("greet", "greet:0", {"user_id": 0}), ("greet", "greet:1", {"user_id": 1}),
            ("greet", "greet:2", {"user_id": 2})]
        t.drain()
    assert sorted(n for name, n in ran if name == "greet") == [0, 1, 2]


def test_everything_the_app_had_is_put_back_and_nothing_leaks_between_blocks() -> None:
    store, sqs, clock, rng = InMemoryStore(), FakeSQS(), ManualClock(5.0), random.Random(1)
    app, ran = make_app(queue_url="https://sqs.eu-west-1.amazonaws.com/1/jobs", store=store, sqs_client=sqs,  # type: ignore[arg-type]
                        clock=clock, random=rng, max_attempts=4)
    before = app.runtime.parts
    with app.testing(settings={"max_attempts": 2}) as t:
        parts = app.runtime.parts
        assert app.runtime.store is not store and app.runtime.sqs is t.sqs is not sqs and parts.clock is t.clock
        assert app.settings.max_attempts == 2 and t.queue_url == "https://sqs.eu-west-1.amazonaws.com/1/jobs"
        t.run(app.message("greet", user_id=1))
    assert app.runtime.parts == before and app.runtime.store is store and app.runtime.sqs is sqs
    assert app.runtime.producer.client is sqs  # rebuilt from the restored client, not the fake's
    with app.testing() as second:
        second.run(app.message("greet", user_id=1))  # a fresh store: not a duplicate of the first block
        assert [o.outcome for o in second.outcomes] == [Outcome.SUCCEEDED]
    assert ran == [("greet", 1), ("greet", 1)]


def test_an_exception_in_the_block_still_restores() -> None:
    app, _ = make_app()
    with pytest.raises(RuntimeError), app.testing():
        raise RuntimeError("test failed")
    assert app.settings.queue_url is None


def test_use_takes_a_prepared_fake_that_refuses_a_batch() -> None:
    app, _ = make_app()
    sqs = FakeSQS()
    sqs.refuse("SendMessageBatch", code="ThrottlingException")
    with use(app, sqs=sqs) as t:
        report = app.enqueue_many([app.message("greet", user_id=i) for i in range(12)], progress=False)
        assert report.ok and report.sent == 12 and report.calls == 3  # the refused call was retried
        assert [c.operation for c in t.calls] == ["SendMessageBatch"] * 3
        assert len(t.enqueued()) == 12


def test_the_fake_sqs_has_what_the_runtime_reads_and_names_what_it_lacks() -> None:
    sqs = FakeSQS(region="eu-west-1")
    assert sqs.meta.endpoint_url == "https://sqs.eu-west-1.amazonaws.com" and sqs.meta.region_name == "eu-west-1"
    with pytest.raises(AttributeError, match=r"FakeSQS has no purge_queue.*moto"):
        sqs.purge_queue(QueueUrl="x")
    url = sqs.queue_url("jobs")
    with pytest.raises(ClientError, match="TooManyEntriesInBatchRequest"):
        sqs.send_message_batch(QueueUrl=url, Entries=[{"Id": str(i), "MessageBody": "x"} for i in range(11)])
    with pytest.raises(ClientError, match="DelaySeconds 901"):
        sqs.send_message(QueueUrl=url, MessageBody="x", DelaySeconds=901)
    answer = sqs.change_message_visibility_batch(QueueUrl=url, Entries=[
        {"Id": "0", "ReceiptHandle": "nope", "VisibilityTimeout": 5}])
    assert answer["Failed"][0]["Code"] == "ReceiptHandleIsInvalid"


def test_the_fake_fifo_queue_keeps_a_group_in_order() -> None:
    clock = ManualClock()
    sqs = FakeSQS(clock=clock)
    url = sqs.queue_url("jobs.fifo")
    for body, group in (("a1", "a"), ("b1", "b"), ("a2", "a")):
        sqs.send_message(QueueUrl=url, MessageBody=body, MessageGroupId=group, MessageDeduplicationId=body)
    first = sqs.receive(url, 1)
    assert [m.body for m in first] == ["a1"]
    assert [m.body for m in sqs.receive(url, 10)] == ["b1"]  # a2 waits behind the in-flight a1
    sqs.remove(first[0])
    assert [m.body for m in sqs.receive(url, 10)] == ["a2"]


def test_run_refuses_what_could_not_be_a_batch() -> None:
    app, _ = make_app()
    with app.testing() as t:
        with pytest.raises(ValueError, match="at least one message"):
            t.run()
        with pytest.raises(ValueError, match="attempt counts deliveries from 1"):
            t.run(app.message("greet", user_id=1), attempt=0)


def test_a_named_queue_known_by_name_only_gets_a_fake_url_and_drain_runs_every_queue() -> None:
    app = JobApp(queues={"critical": None})
    ran: list[str] = []

    @app.job("invoice-email", key="invoice-email:{n}")
    def invoice_email(n: int) -> None:
        ran.append(f"invoice-email:{n}")

    @app.job("password-reset", key="password-reset:{user_id}", queue="critical")
    def password_reset(user_id: int) -> None:
        ran.append(f"password-reset:{user_id}")

    with app.testing() as t:
        invoice_email.enqueue(n=1, tenant="acme")
        password_reset.enqueue(user_id=7, tenant="acme")
        assert [s.key for s in t.enqueued()] == ["invoice-email:1", "password-reset:7"]
        assert [s.group for s in t.enqueued()] == ["acme", "acme"]  # a tenant, on standard queues
        critical_url = app.runtime.router.url("critical")
        assert critical_url != t.queue_url and t.queue_urls == [t.queue_url, critical_url]
        results = t.drain()
        single = t.run(password_reset.message(user_id=8))
    assert sorted(ran) == ["invoice-email:1", "password-reset:7", "password-reset:8"]
    assert len(results) == 2  # one batch per queue, as each queue's event source mapping delivers them
    assert [d.event_source_arn.rsplit(":", 1)[-1] for d in single.deliveries] == ["sqsjobs-test-jobs-critical"]
    assert app.settings.queues == {"critical": None}  # restored
