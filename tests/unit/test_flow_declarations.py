"""Flow control's bad input: each is a clear one-line error at registration (or at enqueue), nothing sent.

Also runs the docstring examples of the flow-control modules."""

from __future__ import annotations

import doctest
import importlib
from typing import Any

import pytest

from sqsjobs import ConfigurationError, InMemoryStore, InvalidArgumentsError, JobApp
from sqsjobs.flow._limits import LIMITS, ConcurrencyLimit, RateLimit


@pytest.fixture
def app() -> JobApp:
    return JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs", store=InMemoryStore())


def one_line(error: pytest.ExceptionInfo[BaseException]) -> str:
    text = str(error.value)
    assert "\n" not in text
    return text


@pytest.mark.parametrize("rate", [0, -1, 1.5, True, "10", None])
def test_a_rate_must_be_a_whole_number_of_starts(app: JobApp, rate: Any) -> None:
    with pytest.raises(ConfigurationError) as refused:
        app.rate_limit("ses", rate)
    assert one_line(refused).startswith("rate_limit('ses'): rate must be a whole number of starts >= 1, got ")
    assert app.runtime.registry.limiters == {}


@pytest.mark.parametrize("per", [0, -1.0, float("inf"), float("nan"), 86_401, True, "1"])
def test_a_window_must_be_positive_and_at_most_a_day(app: JobApp, per: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"per must be a number of seconds in \(0, 86400\]") as refused:
        app.rate_limit("ses", 10, per=per)
    one_line(refused)


@pytest.mark.parametrize("limit", [0, -3, 2.0, False])
def test_a_concurrency_limit_must_be_a_whole_number_of_jobs(app: JobApp, limit: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"limit must be a whole number of jobs >= 1") as refused:
        app.concurrency_limit("pdf", limit)
    one_line(refused)


@pytest.mark.parametrize("name", ["", "a#b", "with space", "x" * 65, 7])
def test_a_limiter_name_becomes_part_of_a_key_so_it_is_checked(app: JobApp, name: Any) -> None:
    with pytest.raises(ConfigurationError, match=r"a limiter name is 1\.\.64 letters"):
        app.rate_limit(name, 1)


def test_limiters_are_declared_once(app: JobApp) -> None:
    assert app.rate_limit("ses", 14) == RateLimit(name="ses", rate=14, per=1.0)
    assert app.rate_limit("ses", 14) is app.runtime.registry.limiters["ses"]  # the same declaration again is harmless
    with pytest.raises(ConfigurationError, match="limiter 'ses' is already declared as RateLimit"):
        app.concurrency_limit("ses", 2)
    assert app.concurrency_limit("pdf", 2) == ConcurrencyLimit(name="pdf", limit=2)


def test_a_job_naming_an_unknown_limiter_is_refused_at_registration(app: JobApp) -> None:
    app.rate_limit("ses", 14)
    with pytest.raises(ConfigurationError) as refused:
        @app.job("sms", limits=["sms-gateway"])
        def sms(n: int) -> None: ...
    assert one_line(refused) == (
        "job 'sms': unknown limiter 'sms-gateway' (declared: ses); declare it first with "
        "app.rate_limit('sms-gateway', rate, per) or app.concurrency_limit('sms-gateway', limit)")
    assert "sms" not in app.jobs


@pytest.mark.parametrize(("limits", "message"), [
    ("ses", "limits takes a list of limiter names, got the string 'ses' (write limits=['ses'])"),
    (7, "limits takes a list of limiter names, got 7"),
    (["ses", "ses"], "limits names a limiter twice"),
])
def test_limits_must_be_a_list_of_distinct_names(app: JobApp, limits: Any, message: str) -> None:
    app.rate_limit("ses", 14)
    with pytest.raises(ConfigurationError, match=message.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        app.job("mail", limits=limits)


def test_a_job_naming_an_unknown_queue_is_refused_when_the_app_reads_its_environment(
        app: JobApp, monkeypatch: pytest.MonkeyPatch) -> None:
    # SQSJOBS_QUEUE_URL_CRITICAL may still name it when the app is first used (a test's fixture sets it then):
    # the declaration reads no environment, the first use refuses it, and every use after until it is set.
    monkeypatch.delenv("SQSJOBS_QUEUE_URL_CRITICAL", raising=False)

    @app.job("reset", queue="critical")
    def reset(user_id: int) -> None: ...
    for _ in range(2):
        with pytest.raises(ConfigurationError) as refused:
            app.settings  # noqa: B018 - the first use
        assert one_line(refused) == ("job 'reset': unknown queue 'critical' (known: default); pass "
                                     "JobApp(queues={'critical': url}) or set SQSJOBS_QUEUE_URL_CRITICAL")
    monkeypatch.setenv("SQSJOBS_QUEUE_URL_CRITICAL", "https://sqs.us-east-1.amazonaws.com/123456789012/critical")
    assert app.settings.queues == {"critical": "https://sqs.us-east-1.amazonaws.com/123456789012/critical"}


def test_a_job_naming_no_queue_at_all_or_an_unknown_one_of_a_fixed_configuration_is_refused_at_registration(
        app: JobApp) -> None:
    with pytest.raises(ConfigurationError, match=r"unknown queue 'Critical' \(known: default\)$"):
        app.job("reset", queue="Critical")
    fixed = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs", environ={})
    with pytest.raises(ConfigurationError, match=r"unknown queue 'critical' \(known: default\); pass"):
        fixed.job("reset", queue="critical")


def test_queues_come_from_the_constructor_or_the_environment() -> None:
    env = {"SQSJOBS_QUEUE_URL": "https://q/1/jobs", "SQSJOBS_QUEUE_URL_CRITICAL": "https://q/1/critical",
           "SQSJOBS_QUEUE_URL_BULK_EMAIL": "https://q/1/bulk"}
    app = JobApp(environ=env)
    assert app.settings.queue_urls() == {"default": "https://q/1/jobs", "bulk_email": "https://q/1/bulk",
                                         "critical": "https://q/1/critical"}
    given = JobApp(queues={"default": "https://q/1/a", "critical": "https://q/1/b"}, environ={})
    assert given.settings.queue_url == "https://q/1/a" and given.settings.queues == {"critical": "https://q/1/b"}

    @given.job("reset", queue="critical")
    def reset(user_id: int) -> None: ...

    assert reset.message(user_id=1).queue == "critical"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"queue_url": "https://q/1/a", "queues": {"default": "https://q/1/b"}}, "two default queues"),
    ({"queues": {"Critical": "https://q/1/b"}}, "queue name 'Critical': use 1..40 lower-case letters"),
    ({"queues": {"critical": ""}}, "queue 'critical': its URL must be non-empty text"),
])
def test_bad_queue_maps_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        JobApp(environ={}, **kwargs)


def test_a_bad_queue_variable_is_refused_when_the_settings_are_read() -> None:
    with pytest.raises(ConfigurationError, match="queue name 'bulk-email'"):
        JobApp(environ={"SQSJOBS_QUEUE_URL_BULK-EMAIL": "https://q/1/bulk"})


def test_a_tenant_must_be_a_valid_group_id_and_is_not_a_job_parameter(app: JobApp) -> None:
    @app.job("sync", key="sync:{n}")
    def sync(n: int) -> None: ...

    assert sync.message(n=1, tenant="acme").tenant == "acme"
    with pytest.raises(InvalidArgumentsError, match="tenant 'acme corp' is not a valid MessageGroupId"):
        sync.message(n=1, tenant="acme corp")
    with pytest.raises(ConfigurationError, match=r"parameter\(s\) \['tenant'\] clash with enqueue options"):
        @app.job("per-tenant")
        def per_tenant(tenant: str) -> None: ...


def test_tenant_metrics_is_a_flag(app: JobApp) -> None:
    with pytest.raises(ConfigurationError, match="tenant_metrics must be True or False, got 'yes'"):
        app.job("sync", tenant_metrics="yes")


def test_a_scheduled_job_that_runs_in_the_scheduler_cannot_be_limited(app: JobApp) -> None:
    app.rate_limit("warehouse", 1, per=60)
    with pytest.raises(ConfigurationError, match="limits apply to jobs the worker takes from a queue; pass enqueue"):
        app.scheduled("nightly", schedule="cron(0 2 * * ? *)", limits=["warehouse"])

    @app.scheduled("nightly", schedule="cron(0 2 * * ? *)", limits=["warehouse"], enqueue=True)
    def nightly(period: str) -> None: ...

    assert LIMITS.of(nightly.options) == ("warehouse",)


def test_celerys_rate_limit_and_priority_point_to_flow_control(app: JobApp) -> None:
    with pytest.raises(ConfigurationError, match=r"'rate_limit' \(Celery\) → use limits=\[name\] with app.rate_limit"):
        app.job("mail", rate_limit="10/s")
    with pytest.raises(ConfigurationError, match=r"'priority' \(Celery\) → use queue="):
        app.job("mail", priority=9)


@pytest.mark.parametrize("name", ["sqsjobs.flow._limits", "sqsjobs.flow._permits", "sqsjobs.flow._limiter_memory",
                                  "sqsjobs.enqueue._routing",
                                  "sqsjobs.local.timeline"])
def test_docstring_examples(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0 and result.failed == 0
