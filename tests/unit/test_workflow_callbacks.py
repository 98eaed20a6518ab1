"""Workflow callbacks (issue 36) through ``app.testing()``: each request's callback is answered once, after its
record, with the stored result or the DLQ reason; groups answer once with their counts; enqueue refuses what
could never be answered."""

from __future__ import annotations

import json
from typing import Any, TypedDict

import pytest

from sqsjobs import (
    ConfigurationError,
    DurableCallback,
    GroupError,
    InvalidArgumentsError,
    JobApp,
    Outcome,
    PermanentError,
    RetryableError,
    TaskToken,
)
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.testing import FakeCallbacks
from sqsjobs.worker._job_records import MAX_RESULT_BYTES
from sqsjobs.workflows._callbacks import (
    LARGEST_RESULT_BYTES,
    MAX_ANSWER_BYTES,
    NOTE,
    TOLD,
    TOLD_AS,
    callback_number,
    succeeded,
)

CB = DurableCallback("Y2FsbGJhY2stMQ==")
CB2 = DurableCallback("Y2FsbGJhY2stMg==")


class Doc(TypedDict):
    doc_id: int


@pytest.fixture
def app() -> JobApp:
    app = JobApp()
    calls: dict[str, int] = {}

    @app.job("resize", key="resize:{image_id}", store_result=True, callbacks=True)
    def resize(image_id: int) -> dict[str, Any]:
        return {"thumb": f"s3://thumbs/{image_id}.png"}

    @app.job("broken", key="broken:{n}", callbacks=True)
    def broken(n: int) -> None:
        raise PermanentError(f"image {n} is not an image")

    @app.job("flaky", key="flaky:{n}", max_attempts=3, callbacks=True)
    def flaky(n: int) -> None:
        calls[f"flaky:{n}"] = calls.get(f"flaky:{n}", 0) + 1
        raise RetryableError("the printer is on fire")

    @app.job("fixed", key="fixed:{n}", store_result=True, callbacks=True)
    def fixed(n: int) -> int:
        if calls.get("fixed-broken"):
            raise PermanentError("not yet")
        return n * 2

    @app.job("index-docs", batch=10, callbacks=True)
    def index_docs(items: list[Doc]) -> None: ...

    @app.job("noisy", key="noisy:{n}", debounce=30)
    def noisy(n: int) -> None: ...

    @app.job("plain", key="plain:{n}")
    def plain(n: int) -> None: ...

    app.calls = calls  # type: ignore[attr-defined]
    return app


def _record(t: Any, key: str) -> Any:
    return t.store.get(key)


def test_a_success_answers_once_with_the_stored_result_after_the_record(app: JobApp) -> None:
    seen: list[Any] = []
    fake = FakeCallbacks(on_answer=lambda cb, a: seen.append(app.status("resize:7")))
    with app.testing(callbacks=fake) as t:
        app.jobs["resize"].enqueue(image_id=7, callback=CB)
        t.drain()
        answer = fake.answer_to(CB)
        assert json.loads(answer.payload or "") == {"thumb": "s3://thumbs/7.png"}
        assert seen[0].state == "succeeded"  # the record was final when the answer left
        record = _record(t, "resize:7")
        assert callback_number(CB) in record.get(TOLD) and record.get(TOLD_AS) == "succeeded"


def test_a_dead_letter_answers_a_failure_with_the_letters_reason(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        app.jobs["broken"].enqueue(n=3, callback=CB)
        t.drain()
        answer = fake.answer_to(CB)
        letter = t.dead_letters()[0]
        assert answer.error_type == "sqsjobs.DeadLettered"
        assert answer.message.startswith(f"{letter.reason}: ") and "image 3 is not an image" in answer.message
        assert json.loads(answer.data or "")["reason"] == letter.reason == "permanent"


def test_retries_send_heartbeats_when_asked_and_exhaustion_fails_the_callback(app: JobApp) -> None:
    fake = FakeCallbacks()
    token = TaskToken("AQB8AAAAKgAAAAMAAAAAAAAAAc6vZ", heartbeat=True)
    with app.testing(callbacks=fake) as t:
        app.jobs["flaky"].enqueue(n=1, callback=token)
        t.drain()
        assert app.calls["flaky:1"] == 3  # type: ignore[attr-defined]
        assert fake.heartbeats == [token, token]  # the two retries; the last attempt is final
        answer = fake.answer_to(token)
        assert answer.error_type == "sqsjobs.DeadLettered" and json.loads(answer.data or "")["reason"] == "exhausted"


def test_no_heartbeat_unless_asked(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        app.jobs["flaky"].enqueue(n=2, callback=CB)
        t.drain()
        assert fake.heartbeats == [] and len(fake.answers_to(CB)) == 1


def test_a_duplicate_request_of_a_completed_key_answers_its_own_callback_from_the_record(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        app.jobs["resize"].enqueue(image_id=7, callback=CB)
        t.drain()
        app.jobs["resize"].enqueue(image_id=7, callback=CB2)
        t.drain()
        assert t.count(Outcome.SUCCEEDED) == 1 and t.count(Outcome.DUPLICATE) == 1
        assert fake.answer_to(CB2).payload == fake.answer_to(CB).payload
        assert {callback_number(CB), callback_number(CB2)} <= set(_record(t, "resize:7").get(TOLD))


def test_a_redelivered_request_is_not_answered_twice(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        message = app.jobs["resize"].message(image_id=7, callback=CB)
        t.run(message)
        t.run(message)  # the same request again (a duplicate send, a lost acknowledgement)
        assert t.count(Outcome.DUPLICATE) == 1
        assert len(fake.told) == 1 and fake.refused == []  # the record said it was told: nothing sent


def test_one_callback_twice_in_one_batch_is_sent_once(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        message = app.jobs["resize"].message(image_id=7, callback=CB)
        t.run(message, message)
        assert len(fake.told) == 1 and fake.refused == []


def test_a_send_that_fails_holds_the_delivery_back_and_its_redelivery_answers(app: JobApp) -> None:
    fake = FakeCallbacks()
    fake.fail_next(2)
    with app.testing(callbacks=fake) as t:
        app.jobs["resize"].enqueue(image_id=7, callback=CB)
        t.drain()
        assert t.count(Outcome.SUCCEEDED) == 1 and t.count(Outcome.DUPLICATE) == 2
        assert [o.outcome for o in t.outcomes][-1] is Outcome.DUPLICATE
        assert len(fake.answers_to(CB)) == 1 and t.sqs.messages(t.queue_url) == []


def test_a_closed_callback_ends_it_logged_and_noted(app: JobApp) -> None:
    fake = FakeCallbacks()
    fake.close(CB)  # the workflow timed out first
    with app.testing(callbacks=fake) as t:
        app.jobs["resize"].enqueue(image_id=7, callback=CB)
        t.drain()
        assert len(fake.refused) == 1 and fake.told == []
        assert t.sqs.messages(t.queue_url) == []  # acknowledged: nothing more to tell
        assert "closed" in _record(t, "resize:7").get(NOTE)


def test_a_redriven_job_whose_workflow_was_told_of_its_failure_is_not_told_again(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        app.calls["fixed-broken"] = 1  # type: ignore[attr-defined]
        app.jobs["fixed"].enqueue(n=4, callback=CB)
        t.drain()
        assert fake.answer_to(CB).error_type == "sqsjobs.DeadLettered"
        app.calls["fixed-broken"] = 0  # type: ignore[attr-defined]
        (letter,) = t.sqs.messages(t.dlq_url)
        t.run(letter.body)  # a redrive: the letter's body, one more delivery through the guard
        assert t.count(Outcome.SUCCEEDED) == 1
        assert len(fake.told) == 1 and fake.refused == []
        record = _record(t, "fixed:4")
        assert record.get("outcome") == "succeeded" and json.loads(record.get("result")) == 8
        assert "told 'failed: sqsjobs.DeadLettered'" in record.get(NOTE)


def test_a_cancelled_key_fails_its_callback(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        app.jobs["resize"].enqueue(image_id=9, callback=CB)
        app.cancel("resize:9", reason="the user left")
        t.drain()
        answer = fake.answer_to(CB)
        assert answer.error_type == "sqsjobs.Cancelled" and "the user left" in answer.message


def test_an_expired_request_fails_its_callback(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        app.jobs["resize"].enqueue(image_id=9, callback=CB, expires_in=60)
        t.clock.advance(120)
        t.drain()
        assert t.count(Outcome.EXPIRED) == 1
        assert fake.answer_to(CB).error_type == "sqsjobs.Expired"


def test_a_batch_handler_item_answers_its_own_callback(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        app.jobs["index-docs"].enqueue(doc_id=1, callback=CB)
        app.jobs["index-docs"].enqueue(doc_id=2)
        t.drain()
        assert t.count(Outcome.SUCCEEDED) == 2
        assert fake.answer_to(CB).payload == "null" and len(fake.told) == 1


def test_a_group_answers_one_callback_with_its_counts(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        group = app.group(name="thumbs", callback=CB)
        group.add_many(app.jobs["resize"].message(image_id=i) for i in range(250))
        group.add(app.jobs["broken"].message(n=1))
        group_id = group.enqueue()
        t.drain(max_batches=200)
        answer = fake.answer_to(CB)
        counts = json.loads(answer.payload or "")
        assert counts == {"group": group_id, "name": "thumbs", "state": "completed_with_failures", "total": 251,
                          "succeeded": 250, "failed": 1, "dead_lettered": 1, "cancelled": 0, "expired": 0}
        assert len(fake.told) == 1 and fake.refused == []


def test_a_group_callback_that_failed_to_send_is_answered_by_a_members_redelivery(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        group = app.group(callback=CB)
        group.add_many(app.jobs["resize"].message(image_id=i) for i in range(3))
        group.enqueue()
        fake.fail_next(1)
        t.drain()
        assert len(fake.answers_to(CB)) == 1 and json.loads(fake.told[0].answer.payload or "")["succeeded"] == 3


def _letters_app() -> tuple[JobApp, list[int]]:
    app, runs = JobApp(), []

    @app.job("lettered", key="lettered:{n}", callbacks=True)
    def lettered(n: int) -> None:
        runs.append(n)
        raise PermanentError(f"{n} is broken")

    return app, runs


def test_a_letter_held_back_past_its_backstop_is_re_sent_as_that_letter_and_never_runs_again() -> None:
    app, runs = _letters_app()
    fake = FakeCallbacks()
    fake.fail_next(8)  # the group's answer fails until after the member's backstop receive (a re-send)
    with app.testing(callbacks=fake) as t:
        group = app.group(callback=CB)
        group.add(app.jobs["lettered"].message(n=1))
        group.enqueue()
        t.drain(max_batches=30)
        assert runs == [1] and len(t.sqs.messages(t.dlq_url)) == 1
        assert [o.outcome for o in t.outcomes].count(Outcome.DEAD_LETTERED) == 1
        assert len(fake.answers_to(CB)) == 1 and json.loads(fake.told[0].answer.payload or "")["dead_lettered"] == 1


def test_a_held_back_letter_does_not_run_after_a_redrive_lettered_its_key_again() -> None:
    app, runs = _letters_app()
    fake = FakeCallbacks()
    fake.fail_next(3)
    with app.testing(callbacks=fake) as t:
        group = app.group(callback=CB)
        group.add(app.jobs["lettered"].message(n=1))
        group.enqueue()
        (message,) = t.sqs.messages(t.queue_url)
        with pytest.raises(AssertionError, match="still hold 1 message"):
            t.drain(max_batches=1)  # dead-lettered; the group's answer fails: the member is held back
        (letter,) = t.sqs.messages(t.dlq_url)
        t.run(letter.body)  # an operator's redrive while it is held back: dead-lettered again, as another message
        assert runs == [1, 1] and t.store.get("lettered:1").get("dead_letter_of") != message.message_id
        t.drain()  # the held-back copy comes back: that letter, not a request to run
        assert runs == [1, 1] and len(fake.answers_to(CB)) == 1


def test_a_cancelled_group_fails_its_callback(app: JobApp) -> None:
    fake = FakeCallbacks()
    with app.testing(callbacks=fake) as t:
        group = app.group(callback=TaskToken("tok-1"))
        group.add_many(app.jobs["resize"].message(image_id=i) for i in range(3))
        group_id = group.enqueue()
        app.cancel_group(group_id)
        t.drain()
        answer = fake.answer_to(TaskToken("tok-1"))
        assert answer.error_type == "sqsjobs.Cancelled" and json.loads(answer.data or "")["cancelled"] == 3


# ---------------------------------------------------------------- what enqueue refuses
@pytest.mark.parametrize("bad", ["Y2FsbGJhY2s=", {"to": "lambda", "id": "x"}, None])
def test_a_callback_must_be_a_durable_callback_or_a_task_token(app: JobApp, bad: Any) -> None:
    if bad is None:
        with pytest.raises(ValueError, match="base64"):
            DurableCallback("not base64!")
        with pytest.raises(ValueError, match=r"1\.\.2048"):
            TaskToken("x" * 2049)
        return
    with pytest.raises(InvalidArgumentsError, match="DurableCallback"):
        app.jobs["resize"].enqueue(image_id=1, callback=bad)
    with pytest.raises(GroupError, match="DurableCallback"):
        app.group(callback=bad)


def test_only_a_job_declared_with_callbacks_takes_one(app: JobApp) -> None:
    with pytest.raises(InvalidArgumentsError, match="callbacks=True"):
        app.jobs["plain"].enqueue(n=1, callback=CB)
    with pytest.raises(ConfigurationError, match="does not combine with debounce"):
        app.job("bursty", key="bursty:{n}", debounce=5, callbacks=True)(lambda n: None)


def test_enqueues_that_may_send_nothing_take_no_callback(app: JobApp) -> None:
    with app.testing(), pytest.raises(InvalidArgumentsError, match="900 s"):
        app.jobs["resize"].enqueue(image_id=1, delay=3600, callback=CB)


def test_every_success_fits_the_services_answer_limit() -> None:
    largest = json.dumps("x" * (MAX_RESULT_BYTES - 2))  # the largest result a record keeps
    assert len(largest.encode()) <= MAX_RESULT_BYTES <= LARGEST_RESULT_BYTES
    assert len((succeeded(largest).payload or "").encode()) <= MAX_ANSWER_BYTES


def test_the_callback_travels_in_the_envelope_and_never_changes_the_key(app: JobApp) -> None:
    plain = app.jobs["resize"].message(image_id=7)
    awaited = app.jobs["resize"].message(image_id=7, callback=CB)
    assert plain.key == awaited.key and plain.dedup_id == awaited.dedup_id
    assert Envelope.decode(awaited.body).callback == CB
    assert json.loads(awaited.body)["callback"] == {"to": "lambda", "id": CB.id}
