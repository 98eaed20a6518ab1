"""A job's lifecycle by its key (moto): status, stored results, cancel, expiry, argument conflicts, on_crash."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_support import MAX_ATTEMPTS
from typer.testing import CliRunner

from sqsjobs import ConfigurationError, InvalidArgumentsError, Outcome, cancel_requested
from sqsjobs import _metrics as m
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.testing import FakeContext, given_attempts, messages_in, receive_event, sqs_event


def reason_of(aws: Any) -> list[str]:
    return [msg["MessageAttributes"]["sqsjobs.reason"]["StringValue"] for msg in messages_in(aws.sqs, aws.dlq_url)]


def test_status_follows_a_job_from_first_failure_to_success(make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app(backoff_base=0, backoff_cap=0)
    attempts: list[int] = []

    @app.job("invoice-email", key="invoice-email:{invoice_id}", store_result=True)
    def send(invoice_id: int) -> dict[str, Any]:
        attempts.append(invoice_id)
        if len(attempts) == 1:
            raise ConnectionError("mail server down")
        return {"message_id": "ses-1"}

    assert app.status("invoice-email:42") is None  # enqueue writes nothing to the table
    enqueued_at = clock()
    send.enqueue(invoice_id=42)
    assert app.status("invoice-email:42") is None
    clock.advance(5)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    first = app.status("invoice-email:42")
    assert (first.state, first.attempts, first.last_error) == ("retrying", 1, "ConnectionError: mail server down")
    clock.advance(5)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    done = app.status("invoice-email:42")
    assert (done.state, done.attempts, done.result, done.last_error) == ("succeeded", 2, {"message_id": "ses-1"},
                                                                         None)
    assert done.enqueued_at == enqueued_at and done.started_at == enqueued_at + 10
    assert done.finished_at == done.updated_at == enqueued_at + 10


@pytest.mark.parametrize(("value", "reason"), [("x" * 5000, "result_too_large"), (object(), "result_not_json"),
                                               (float("nan"), "result_not_json")])
def test_a_result_that_cannot_be_stored_fails_the_job_for_good(make_app: Any, aws: Any, value: Any,
                                                              reason: str) -> None:
    app = make_app()

    @app.job("report", key="report:{n}", store_result=True)
    def report(n: int) -> Any:
        return value

    report.enqueue(n=1)
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and reason_of(aws) == [reason]
    assert app.status("report:1").state == "dead_lettered"


def test_results_are_not_stored_unless_asked(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("plain", key="plain:{n}")
    def plain(n: int) -> int:
        return n * 2

    plain.enqueue(n=4)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert app.status("plain:4").result is None


def test_cancel_before_any_delivery_then_the_delivery_is_acknowledged_without_running(make_app: Any,
                                                                                    aws: Any) -> None:
    lines: list[str] = []
    app = make_app(emit_metrics=lines.append)
    ran: list[int] = []

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None:
        ran.append(invoice_id)

    assert app.cancel("invoice-email:7", reason="customer closed the account") == "not_found_but_cancelled"
    send.enqueue(invoice_id=7)
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    assert delivery.outcome is Outcome.CANCELLED and delivery.acknowledged and ran == []
    assert app.status("invoice-email:7").state == "cancelled"
    assert app.cancel("invoice-email:7") == "already_finished"
    (emf,) = (doc for doc in map(json.loads, lines) if m.DIMENSION_JOB in doc)  # the batch's own line aside
    assert emf[m.CANCELLED] == [1.0]


def test_cancel_of_a_retrying_job_and_of_a_finished_one(make_app: Any, aws: Any) -> None:
    app = make_app(backoff_base=0, backoff_cap=0)

    @app.job("sync", key="sync:{n}")
    def sync(n: int) -> None:
        if n == 1:
            raise ConnectionError("down")

    sync.enqueue(n=1)
    sync.enqueue(n=2)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert app.cancel("sync:1") == "cancelled"
    assert app.cancel("sync:2") == "already_finished"
    (retry,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    assert retry.outcome is Outcome.CANCELLED


def test_a_running_job_is_only_flagged_and_may_stop_by_polling(make_app: Any, aws: Any) -> None:
    app = make_app()
    seen: list[bool] = []

    @app.job("export", key="export:{n}")
    def export(n: int) -> None:
        seen.append(cancel_requested())
        seen.append(app.cancel("export:1") == "running")
        seen.append(cancel_requested())

    export.enqueue(n=1)
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    assert seen == [False, True, True] and delivery.outcome is Outcome.SUCCEEDED  # never killed
    assert cancel_requested() is False  # outside a job


def test_a_delivery_older_than_expires_in_is_acknowledged_without_running(make_app: Any, aws: Any,
                                                                         clock: Any) -> None:
    lines: list[str] = []
    app = make_app(emit_metrics=lines.append)
    ran: list[int] = []

    @app.job("otp-sms", key="otp-sms:{user_id}", expires_in=60)
    def otp(user_id: int) -> None:
        ran.append(user_id)

    otp.enqueue(user_id=1)
    otp.enqueue(user_id=2, expires_in=600)  # the enqueue's own expires_in wins
    otp.enqueue(user_id=3, expires=600)  # Celery's name maps to it
    clock.advance(120)
    result = app.process_batch(receive_event(aws.sqs, aws.queue_url))
    outcomes = {d.args["user_id"]: d.outcome for d in result.deliveries if d.args}
    assert outcomes == {1: Outcome.EXPIRED, 2: Outcome.SUCCEEDED, 3: Outcome.SUCCEEDED}
    assert sorted(ran) == [2, 3] and result.failures == ()
    assert app.status("otp-sms:1").state == "expired"
    assert json.loads(lines[0])[m.EXPIRED] == [1.0]
    # An expired key may still run when it is enqueued again later.
    otp.enqueue(user_id=1)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert ran[-1] == 1 and app.status("otp-sms:1").state == "succeeded"


def test_the_same_key_with_other_arguments_is_never_run_nor_acknowledged(make_app: Any, aws: Any) -> None:
    app = make_app()
    charged: list[int] = []

    @app.job("charge", key="charge:{order_id}")
    def charge(order_id: int, cents: int) -> None:
        charged.append(cents)

    charge.enqueue(order_id=1, cents=500)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    charge.enqueue(order_id=1, cents=50_000)  # a bug upstream reused the key
    (delivery,) = app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and charged == [500]
    (dead,) = messages_in(aws.sqs, aws.dlq_url)
    assert dead["MessageAttributes"]["sqsjobs.reason"]["StringValue"] == "key_conflict"
    assert "this message's hash is" in dead["MessageAttributes"]["sqsjobs.error_message"]["StringValue"]
    charge.enqueue(order_id=1, cents=500)  # the same call again: a plain duplicate
    assert [d.outcome for d in app.process_batch(receive_event(aws.sqs, aws.queue_url)).deliveries] == [
        Outcome.DUPLICATE]


def test_on_crash_dead_letter_never_runs_a_job_twice(make_app: Any, aws: Any, clock: Any) -> None:
    app = make_app()
    ran: list[int] = []

    @app.job("wire-transfer", key="wire:{n}", on_crash="dead_letter")
    def wire(n: int) -> None:
        ran.append(n)

    message = wire.message(n=1)
    app.runtime.store.write(Acquire(key=message.key, owner="died", now=clock(), lease_until=clock() + 60,
                            expires_at=clock() + 9999, count_attempt=True))
    clock.advance(61)
    (delivery,) = app.process_batch(sqs_event([json.loads(message.body)], attempt=2)).deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and ran == []
    assert reason_of(aws) == ["crashed"]


def test_retrying_jobs_keep_within_max_attempts_by_the_record(make_app: Any, aws: Any) -> None:
    app = make_app()

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise ConnectionError("down")

    given_attempts(app, flaky.message(n=1), MAX_ATTEMPTS - 1)
    (delivery,) = app.process_batch(sqs_event([json.loads(flaky.message(n=1).body)])).deliveries
    assert delivery.outcome is Outcome.DEAD_LETTERED and app.status("flaky:1").attempts == MAX_ATTEMPTS


def test_bad_input_gets_clear_errors(make_app: Any) -> None:
    app = make_app()
    for key, match in (("", "non-empty"), ("k" * 3000, "at most 2048 bytes"), ("lock#r:2026-01-01", "reserved"),
                       ("run#x:1", "reserved")):
        with pytest.raises(InvalidArgumentsError, match=match):
            app.cancel(key)
        with pytest.raises(InvalidArgumentsError, match=match):
            app.status(key)
    with pytest.raises(ConfigurationError, match="expires_in must be a positive number"):
        app.job("a", expires_in=0)
    with pytest.raises(ConfigurationError, match="store_result=True does not fit a chunked job"):
        app.job("b", key="b:{run_id}:{cursor}", chunked=True, store_result=True)
    with pytest.raises(ConfigurationError, match="on_crash must be one of"):
        app.job("c", on_crash="explode")

    @app.job("d", key="d:{n}")
    def d(n: int) -> None: ...

    with pytest.raises(InvalidArgumentsError, match="expires_in must be a positive number"):
        d.message(n=1, expires_in=-5)


def test_the_cli_shows_and_cancels_a_job_by_key(make_app: Any, aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from sqsjobs.cli import build_app, lifecycle

    app = make_app()

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send(invoice_id: int) -> None: ...

    send.enqueue(invoice_id=1)
    app.process_batch(receive_event(aws.sqs, aws.queue_url), FakeContext())
    cli = build_app()
    runner = CliRunner()
    no_table = runner.invoke(cli, ["job", "k"], env={"SQSJOBS_TABLE": ""})
    assert no_table.exit_code == 2 and "--table" in no_table.output
    monkeypatch.setattr(lifecycle, "table_app", lambda table, endpoint, region: app)
    shown = runner.invoke(cli, ["job", "invoice-email:1", "--json", "--table", "t"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.stdout)["state"] == "succeeded"
    missing = runner.invoke(cli, ["job", "invoice-email:2", "--table", "t"])
    assert missing.exit_code == 3 and "no record for 'invoice-email:2'" in missing.output
    cancelled = runner.invoke(cli, ["cancel", "invoice-email:2", "--reason", "duplicate order", "--table", "t"])
    assert cancelled.exit_code == 0 and "not_found_but_cancelled" in cancelled.output
    reserved = runner.invoke(cli, ["cancel", "lock#x", "--table", "t"])
    assert reserved.exit_code == 2 and "reserved prefix" in reserved.output


def test_redrive_skips_and_counts_letters_whose_key_was_cancelled_after_the_dlq(make_app: Any, aws: Any) -> None:
    from sqsjobs import PermanentError
    from sqsjobs.ops._redrive import redrive
    from sqsjobs.ops._redrive_options import RedriveOptions

    app = make_app()

    @app.job("refund", key="refund:{n}")
    def refund(n: int) -> None:
        raise PermanentError("card expired")

    for n in (1, 2):
        refund.enqueue(n=n)
    app.process_batch(receive_event(aws.sqs, aws.queue_url))
    assert app.cancel("refund:1", reason="refunded by hand") == "cancelled"
    options = RedriveOptions(dlq=aws.dlq_url, wait_time_seconds=0)
    summary = redrive(options, sqs_client=aws.sqs, records=app.runtime.store)
    assert summary.moved == 1 and summary.skipped == {"cancelled": 1}
    (left,) = messages_in(aws.sqs, aws.dlq_url)
    assert json.loads(left["Body"])["args"] == {"n": 1}
