"""Testing a user's own app: the reference app's jobs through ``app.testing()``, and the ``jobs`` fixture (issue 14)."""

from __future__ import annotations

import importlib
import textwrap
from typing import Any

import boto3
import pytest
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ses.models import ses_backends

from sqsjobs import Outcome

pytest_plugins = ["pytester"]


def test_the_reference_apps_own_jobs_with_moto_ses_and_nothing_private(
    handlers_on_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SQSJOBS_SENDER", "billing@example.com")
    app_module = importlib.import_module("app")
    app = app_module.app
    with mock_aws():
        boto3.client("ses", region_name="us-east-1").verify_email_identity(EmailAddress="billing@example.com")
        # The job's sqsjobs.client("ses") follows the environment: mock_aws sets its own keys, so it is built here.
        with app.testing() as t:
            app_module.send_invoice_email.enqueue(invoice_id=42)
            app_module.send_invoice_email.enqueue(invoice_id=42)
            app.enqueue("invoice-email", invoice_id=-1)
            t.drain()
            outcomes = [(o.key, o.outcome) for o in t.outcomes]
            letters = [(d.job, d.reason) for d in t.dead_letters()]
        sent = list(ses_backends[DEFAULT_ACCOUNT_ID]["us-east-1"].sent_messages)
    assert outcomes == [("invoice-email:42", Outcome.SUCCEEDED), ("invoice-email:42", Outcome.DUPLICATE),
                        ("invoice-email:-1", Outcome.DEAD_LETTERED)]
    assert letters == [("invoice-email", "permanent")]
    assert [m.destinations["ToAddresses"] for m in sent] == [["customer-42@example.com"]]
    assert app.settings.queue_url is None  # the environment had none; the block's fake queue is gone


def test_the_jobs_fixture_drives_the_configured_app_and_restores_it(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shop=textwrap.dedent('''
        from sqsjobs import JobApp, PermanentError

        app = JobApp()
        charged = []

        @app.job("charge", key="charge:{order_id}")
        def charge(order_id: int) -> None:
            if order_id < 0:
                raise PermanentError("no such order")
            charged.append(order_id)
    '''))
    pytester.makeini("[pytest]\nsqsjobs_app = shop:app\npythonpath = .\n")
    pytester.makepyfile(test_shop=textwrap.dedent('''
        from sqsjobs import Outcome
        from shop import app, charge, charged

        def test_once(jobs):
            jobs.run(charge.message(order_id=1), charge.message(order_id=1), charge.message(order_id=-1))
            assert [o.outcome for o in jobs.outcomes] == [Outcome.SUCCEEDED, Outcome.DUPLICATE,
                                                          Outcome.DEAD_LETTERED]
            assert charged == [1]
            assert jobs.dead_letters()[0].error_message == "no such order"

        def test_a_fresh_store_each_test(jobs, sqsjobs_app):
            assert sqsjobs_app is app
            jobs.run(charge.message(order_id=1))
            assert jobs.count(Outcome.SUCCEEDED) == 1 and charged == [1, 1]

        def test_restored_after_the_tests():
            assert app.settings.queue_url is None
    '''))
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-q")
    result.assert_outcomes(passed=3)
