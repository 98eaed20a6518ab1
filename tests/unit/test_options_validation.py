"""Job options are checked when the job is declared, with messages that say what to do."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sqsjobs import ConfigurationError, InvalidArgumentsError, JobApp, PermanentError, RetryableError
from sqsjobs._errors import MalformedMessageError, TimeLimitExceeded
from sqsjobs._job import CELERY_ENQUEUE_NAMES
from sqsjobs._job_options import CELERY_NAMES, JobOptions

QUEUE = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"


class TransientError(Exception):
    pass


def make(**settings: Any) -> JobApp:
    options: dict[str, Any] = {"queue_url": QUEUE, "max_attempts": 5}
    options.update(settings)
    return JobApp(**options)


def declare(app: JobApp, **options: Any) -> Any:
    @app.job("j", **options)
    def j(n: int) -> None: ...

    return j


def refused(app: JobApp, **options: Any) -> str:
    with pytest.raises(ConfigurationError) as caught:
        declare(app, **options)
    return str(caught.value)


# -- max_attempts -----------------------------------------------------------------------------------------------
def test_max_attempts_up_to_the_queues_limit_is_accepted() -> None:
    assert declare(make(), max_attempts=5).options.max_attempts == 5
    assert declare(make(), max_attempts=1).options.max_attempts == 1
    assert declare(make()).options.max_attempts is None  # the queue's limit applies


def test_max_attempts_above_the_queues_limit_says_why_and_what_to_do() -> None:
    message = refused(make(), max_attempts=6)
    assert "max_attempts=6" in message and "1..5" in message
    assert "maxReceiveCount" in message and "SQSJOBS_MAX_ATTEMPTS" in message
    assert "Raise MaxAttempts in the template" in message


def test_max_attempts_follows_the_environment() -> None:
    app = JobApp(queue_url=QUEUE, environ={"SQSJOBS_MAX_ATTEMPTS": "8"})
    assert declare(app, max_attempts=8).options.max_attempts == 8
    assert "1..8" in refused(JobApp(queue_url=QUEUE, environ={"SQSJOBS_MAX_ATTEMPTS": "8"}), max_attempts=9)


@pytest.mark.parametrize("value", [0, -1, True, 2.5, "3"])
def test_max_attempts_must_be_a_positive_integer(value: Any) -> None:
    assert "max_attempts must be a positive integer" in refused(make(), max_attempts=value)


# -- backoff ----------------------------------------------------------------------------------------------------
def test_backoff_options_build_the_jobs_policy() -> None:
    policy = declare(make(), backoff_base=2, backoff_cap=60, jitter=False).options.backoff
    assert (policy.base, policy.cap, policy.jitter) == (2, 60, False)
    default = declare(make(backoff_base=7, backoff_cap=70)).options.backoff
    assert (default.base, default.cap, default.jitter) == (7, 70, True)  # app defaults, full jitter


def test_backoff_base_above_the_cap_is_refused() -> None:
    message = refused(make(), backoff_base=900, backoff_cap=60)
    assert "backoff_base=900" in message and "backoff_cap=60" in message and "lower backoff_base" in message
    # Also against the app's defaults (cap 600).
    assert "above backoff_cap=600" in refused(make(), backoff_base=601)


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"backoff_base": -1}, "backoff_base must be >= 0"),
        ({"backoff_cap": 50_000}, "backoff_cap must be within 0..43200"),
        ({"backoff_base": "30"}, "backoff_base must be a number"),
        ({"backoff_cap": True}, "backoff_cap must be a number"),
        ({"jitter": "full"}, "jitter must be True or False"),
        ({"jitter": 0}, "jitter must be True or False"),
    ],
)
def test_bad_backoff_values_are_refused(options: dict[str, Any], fragment: str) -> None:
    message = refused(make(), **options)
    assert message.startswith("job 'j': ") and fragment in message


# -- retry_on / permanent_on ------------------------------------------------------------------------------------
def test_a_single_exception_class_is_taken_as_a_tuple() -> None:
    options = declare(make(), retry_on=TransientError, permanent_on=KeyError).options
    assert (options.retry_on, options.permanent_on) == ((TransientError,), (KeyError,))


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        ({"retry_on": ("TimeoutError",)}, "retry_on must hold exception classes"),
        ({"retry_on": 3}, "retry_on must be a tuple of exception classes"),
        ({"permanent_on": (KeyboardInterrupt,)}, "permanent_on must hold exception classes (subclasses of Exception)"),
        ({"retry_on": (MalformedMessageError,)}, "a PermanentError, which is never retried"),
        ({"permanent_on": (TimeLimitExceeded,)}, "a RetryableError, which is always retried"),
        ({"retry_on": (ConnectionError,), "permanent_on": (OSError,)},
         "ConnectionError is in retry_on but is a subclass of OSError, which permanent_on sends to the DLQ first"),
        ({"retry_on": (TransientError,), "permanent_on": (TransientError,)}, "would never be retried"),
    ],
)
def test_exception_rules_that_can_never_apply_are_refused(options: dict[str, Any], fragment: str) -> None:
    assert fragment in refused(make(), **options)


def test_permanent_on_may_carve_exceptions_out_of_a_broad_retry_on() -> None:
    options = declare(make(), retry_on=(OSError,), permanent_on=(FileNotFoundError,)).options
    assert options.classify(ConnectionError()) == "retry"
    assert options.classify(FileNotFoundError()) == "permanent"


CLASSIFY = [
    # (retry_on, permanent_on, raised, expected)
    ((Exception,), (), ValueError("x"), "retry"),  # the default: everything is retried
    ((TransientError,), (), TransientError(), "retry"),
    ((TransientError,), (), ValueError("in neither list"), "permanent"),  # narrowed retry_on: like autoretry_for
    ((), (), ValueError("no retry_on at all"), "permanent"),
    ((Exception,), (KeyError,), KeyError("k"), "permanent"),
    ((Exception,), (), PermanentError("explicit"), "permanent"),  # PermanentError beats retry_on
    ((), (), RetryableError("explicit"), "retry"),  # RetryableError beats an empty retry_on
    ((Exception,), (Exception,), RetryableError("explicit"), "retry"),  # ... and a broad permanent_on
    ((), (Exception,), TimeLimitExceeded("too slow"), "retry"),  # a time limit always counts as retryable
    ((), (Exception,), ValueError("x"), "permanent"),
]


@pytest.mark.parametrize(("retry_on", "permanent_on", "raised", "expected"), CLASSIFY)
def test_classification_rules(retry_on: tuple[type[Exception], ...], permanent_on: tuple[type[Exception], ...],
                              raised: Exception, expected: str) -> None:
    assert JobOptions(retry_on=retry_on, permanent_on=permanent_on).classify(raised) == expected


# -- time_limit -------------------------------------------------------------------------------------------------
def test_time_limit_must_fit_in_the_function_timeout() -> None:
    app = make(function_timeout=60, deadline_margin=5)
    assert declare(app, time_limit=55).options.time_limit == 55
    message = refused(make(function_timeout=60, deadline_margin=5), time_limit=56)
    assert "time_limit=56 s does not fit in the function's timeout of 60 s" in message
    assert "5 s deadline margin" in message and "raise the worker's Timeout" in message


def test_time_limit_reads_the_function_timeout_from_the_environment() -> None:
    app = JobApp(queue_url=QUEUE, environ={"SQSJOBS_FUNCTION_TIMEOUT": "30"})
    assert "does not fit" in refused(app, time_limit=29)


def test_time_limit_is_unchecked_without_a_known_timeout() -> None:
    assert declare(make(), time_limit=600).options.time_limit == 600


@pytest.mark.parametrize("value", [0, -3, True, "60"])
def test_time_limit_must_be_a_positive_number(value: Any) -> None:
    assert "time_limit must be a positive number of seconds" in refused(make(), time_limit=value)


# -- unknown options and Celery names ---------------------------------------------------------------------------
def test_an_unknown_option_lists_the_real_ones() -> None:
    message = refused(make(), retries=3)
    assert "unknown option(s) 'retries'" in message
    for name in ("max_attempts", "backoff_base", "retry_on", "permanent_on", "time_limit", "version"):
        assert name in message


@pytest.mark.parametrize("name", sorted(CELERY_NAMES))
def test_every_celery_name_says_what_to_use_instead(name: str) -> None:
    message = refused(make(), **{name: 1})
    assert f"{name!r} (Celery) → use {CELERY_NAMES[name]}" in message


def test_the_seeds_celery_task_translates_option_by_option() -> None:
    app = make(max_attempts=6, function_timeout=300)
    message = refused(app, bind=True, max_retries=5, retry_backoff=30, retry_backoff_max=600, retry_jitter=True,
                      autoretry_for=(TransientError,))
    for name in ("bind", "max_retries", "retry_backoff", "retry_backoff_max", "retry_jitter", "autoretry_for"):
        assert f"{name!r} (Celery)" in message
    # time_limit has the same name (and a safer meaning: it raises a retryable error in the job).
    options = declare(app, max_attempts=6, backoff_base=30, backoff_cap=600, jitter=True, retry_on=(TransientError,),
                      time_limit=120).options
    assert (options.max_attempts, options.backoff.base, options.backoff.cap, options.time_limit) == (6, 30, 600, 120)
    assert options.classify(TransientError()) == "retry" and options.classify(ValueError()) == "permanent"


# -- the rest of the declaration --------------------------------------------------------------------------------
def test_other_declaration_errors() -> None:
    app = make()
    declare(app)
    with pytest.raises(ConfigurationError, match="already registered"):
        declare(app)
    with pytest.raises(ConfigurationError, match="version must be a positive integer"):
        declare(make(), version=0)
    make().job("x" * 80)
    for name in ("x" * 81, "", "Invoice", "send email", "send\nemail", "-lead", ".hidden", "héllo", "a/b"):
        with pytest.raises(ConfigurationError, match=r"is not allowed: .*at most 80 characters"):
            make().job(name)

    with pytest.raises(ConfigurationError, match="clash with enqueue options"):
        @make().job("clash")
        def clash(delay: int) -> None: ...


# -- enqueue-time options ---------------------------------------------------------------------------------------
def test_delay_within_sqs_limits_is_kept_in_whole_seconds() -> None:
    job = declare(make())
    assert job.message(n=1, delay=900).delay == 900
    assert job.message(n=1, delay=2.9).delay == 2
    assert job.message(n=1).delay == 0


@pytest.mark.parametrize(("delay", "says"), [
    (-1, "is negative"), (True, "not a number of seconds"), ("60", "not a number of seconds"),
    (float("nan"), "not a number of seconds"), (365 * 24 * 3600 + 1, "more than 365 days"),
])
def test_an_impossible_delay_raises_clearly(delay: Any, says: str) -> None:
    job = declare(make())
    # Both kinds: bad input to the call, and what a delay outside SQS's range raised before.
    with pytest.raises(InvalidArgumentsError, match=says):
        job.message(n=1, delay=delay)
    with pytest.raises(ConfigurationError, match=says):
        job.message(n=1, delay=delay)


@pytest.mark.parametrize("name", sorted(CELERY_ENQUEUE_NAMES))
def test_celery_apply_async_names_say_what_to_use(name: str) -> None:
    job = declare(make())
    with pytest.raises(InvalidArgumentsError, match=re.escape(CELERY_ENQUEUE_NAMES[name])):
        job.message(n=1, **{name: 10})


def test_a_job_may_still_have_a_parameter_named_like_a_celery_option() -> None:
    app = make()

    @app.job("renew")
    def renew(queue: str) -> None: ...

    key = renew.message(queue="billing").key
    assert key.startswith("renew:") and "billing" not in key  # the default key hashes the arguments
