"""A job's options: what ``@app.job(...)`` takes, validated when the job is declared, with one clear error each.

``declare_options`` turns the decorator's arguments into a frozen
``JobOptions`` (dramatiq's rule: an actor refuses options at declaration, with
an error that says what to do); Celery's names are answered with sqsjobs'
own. Declaring never calls AWS, nor reads the environment: the checks that
depend on the app's settings (``check_against_settings``) run at declaration
for what the code decided, and for the rest when the settings are resolved
(``sqsjobs._runtime``, on first use).

This module holds only what every job has. A feature declares its own
options, as a dramatiq middleware declares its actor options: a module-level
``JobOption`` (``enqueue/_debounce.py``: ``debounce``, ``dedupe``;
``enqueue/_routing.py``: ``queue``, ``tenant_metrics``; ``flow/_limits.py``:
``limits``; ``workflows/_callbacks.py``: ``callbacks``) with its check, and
reads it back with ``OPTION.of(job.options)``. ``OPTION_HOMES`` names the
module of each, as text: ``declare_options`` imports a feature's module only
for a job that sets one of its options, so an app whose jobs set none loads
no feature (tests/unit/test_feature_imports.py), and ``JobOptions.sets`` tells
the worker whether a job uses a feature without importing it. So this module
imports no feature, and a new feature adds an option with one line here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from importlib import import_module
from typing import TYPE_CHECKING, Any, Final, Generic, TypeVar, cast

from sqsjobs._backoff import BackoffPolicy
from sqsjobs._errors import ConfigurationError, PermanentError, RetryableError

if TYPE_CHECKING:
    from sqsjobs._settings import Settings

T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Declaring:
    """What a feature's option check may read: the job, the app's settings so far, the options every job has,
    and what the app declared by name before the job (``named["limiters"]``: ``app.rate_limit``...)."""

    job: str
    settings: Settings
    chunked: bool = False
    store_result: bool = False
    batch: int | None = None
    named: Mapping[str, Mapping[str, object]] = field(default_factory=dict)
    #: the features' options as the declaration gave them (unchecked): for a check that two options combine
    given: Mapping[str, Any] = field(default_factory=dict)


class JobOption(Generic[T]):
    """One option a feature declares for every job: its name, its default, and its check.

    ``check(declaring, value)`` returns what the job keeps (or raises ``ConfigurationError``, one per bad
    option); ``against_settings(job, value, settings, final)``, when given, refuses values the app's settings
    make impossible (``check_against_settings``); neither runs for a job that leaves the option at its default.
    Declaring one registers it with ``declare_options``; a feature's module is also named in ``OPTION_HOMES``, so
    the first job that sets the option imports it.

    Example:
        >>> LEVEL = JobOption("example_level", 0, lambda declaring, value: int(value))
        >>> options = declare_options("sync", __import__("sqsjobs").Settings(), example_level="3")
        >>> LEVEL.of(options), LEVEL.of(JobOptions())
        (3, 0)
        >>> del FEATURE_OPTIONS["example_level"]
    """

    def __init__(self, name: str, default: T, check: Callable[[Declaring, Any], T], *,
                 against_settings: Callable[[str, T, Settings, Collection[str]], None] | None = None) -> None:
        self.name = name
        self.default = default
        self.check = check
        self.against_settings = against_settings
        FEATURE_OPTIONS[name] = self

    def of(self, options: JobOptions) -> T:
        """The job's value of this option (its default when the job did not set it)."""
        return cast(T, options.features.get(self.name, self.default))

    def __repr__(self) -> str:
        return f"<JobOption {self.name!r}>"


#: the options features declared (``JobOption``), by name, in the order their modules were imported
FEATURE_OPTIONS: dict[str, JobOption[Any]] = {}
#: the module that declares each feature's option, imported for the first job that sets it (tests/unit/
#: test_job_options.py checks each module declares what it is named for, and every option is named here)
OPTION_HOMES: Final = {
    "callbacks": "sqsjobs.workflows._callbacks",
    "debounce": "sqsjobs.enqueue._debounce",
    "dedupe": "sqsjobs.enqueue._debounce",
    "limits": "sqsjobs.flow._limits",
    "queue": "sqsjobs.enqueue._routing",
    "tenant_metrics": "sqsjobs.enqueue._routing",
}


def feature_option(name: str) -> JobOption[Any] | None:
    """The feature's option ``name``, its module imported if no job needed it yet; None for no such option.

    Example:
        >>> feature_option("limits")
        <JobOption 'limits'>
        >>> feature_option("max_retries") is None
        True
    """
    if name not in FEATURE_OPTIONS and name in OPTION_HOMES:
        import_module(OPTION_HOMES[name])
    return FEATURE_OPTIONS.get(name)


class Classification(StrEnum):
    """What a failure of the job means."""

    RETRY = "retry"  #: run it again after a full-jitter delay
    PERMANENT = "permanent"  #: retrying cannot help: dead-letter it with the reason


class OnCrash(StrEnum):
    """What a delivery does when it finds that the previous run of its key died mid-way."""

    RETRY = "retry"  #: run it again (at-least-once: the side effect may repeat)
    DEAD_LETTER = "dead_letter"  #: never run it twice: dead-letter it with reason ``crashed``


@dataclass(frozen=True, kw_only=True)
class JobOptions:
    """The options every job has: its key, retries and time (validated when the job is declared).

    Example:
        >>> JobOptions(max_attempts=3, retry_on=(TimeoutError,)).classify(TimeoutError()).value
        'retry'
    """

    key: str | None = None
    group: str | None = None
    max_attempts: int | None = None
    backoff: BackoffPolicy = field(default_factory=BackoffPolicy)
    retry_on: tuple[type[BaseException], ...] = (Exception,)
    permanent_on: tuple[type[BaseException], ...] = ()
    time_limit: float | None = None
    version: int = 1
    #: store the return value (JSON, <= 4 KiB) with the completion; ``JobStatus.result`` shows it
    store_result: bool = False
    #: a delivery older than this (seconds since enqueue) is acknowledged without running
    expires_in: float | None = None
    on_crash: OnCrash = OnCrash.RETRY
    #: a batch handler's most items per call (worker/_batch_handler.py); None: one job per call
    batch: int | None = None
    #: the features' options the job set to other than their defaults (``JobOption.of`` reads them): name → value
    features: Mapping[str, Any] = field(default_factory=dict)
    #: a sync job that may run on a thread, beside the batch's other jobs (worker/_run_step.py); off: one at a time
    threads: bool = False

    def sets(self, option: str) -> bool:
        """Whether the job set the feature's option ``option`` (to other than its default): the worker and the
        enqueue ask this to learn that a job uses a feature, without importing the feature.

        Example:
            >>> JobOptions(features={"limits": ("ses",)}).sets("limits"), JobOptions().sets("limits")
            (True, False)
        """
        return option in self.features

    def classify(self, error: BaseException) -> Classification:
        """``'retry'`` or ``'permanent'`` for an exception the job raised.

        First match wins: ``PermanentError`` → DLQ; ``RetryableError`` (and so
        ``TimeLimitExceeded``) → retry; ``permanent_on`` → DLQ; ``retry_on`` →
        retry; anything else (only possible when ``retry_on`` was narrowed) →
        DLQ, as with Celery's ``autoretry_for``. The job's explicit
        ``PermanentError``/``RetryableError`` come first because raising one is
        a decision about this very failure; ``permanent_on`` is checked before
        ``retry_on`` so it can carve exceptions out of a broad ``retry_on``.

        Example:
            >>> from sqsjobs._errors import RetryableError
            >>> o = JobOptions(retry_on=(OSError,), permanent_on=(FileNotFoundError,))
            >>> [o.classify(e).value for e in (ConnectionError(), FileNotFoundError(), KeyError())]
            ['retry', 'permanent', 'permanent']
            >>> JobOptions(permanent_on=(Exception,)).classify(RetryableError("rate limited")).value
            'retry'
        """
        if isinstance(error, PermanentError):
            return Classification.PERMANENT
        if isinstance(error, RetryableError):
            return Classification.RETRY
        if isinstance(error, self.permanent_on):
            return Classification.PERMANENT
        if isinstance(error, self.retry_on):
            return Classification.RETRY
        return Classification.PERMANENT


#: Celery option names people bring with them, and what to write instead (docs/jobs.md has the table).
CELERY_NAMES = {
    "max_retries": "max_attempts (= max_retries + 1: sqsjobs counts the first run)",
    "retry_kwargs": "max_attempts (retry_kwargs={'max_retries': n} is max_attempts=n + 1)",
    "retry_backoff": "backoff_base (seconds; Celery's retry_backoff=True is backoff_base=1)",
    "retry_backoff_max": "backoff_cap",
    "default_retry_delay": "backoff_base (with jitter=False for a fixed delay, which the docs advise against)",
    "retry_jitter": "jitter",
    "autoretry_for": "retry_on",
    "dont_autoretry_for": "permanent_on",
    "soft_time_limit": "time_limit (it raises TimeLimitExceeded in the job, a retryable failure)",
    "bind": "nothing: jobs take their arguments only; read the current message's trace id with "
    "sqsjobs._tracing.current_trace_id()",
    "acks_late": "nothing: a message is always deleted only after its job finished",
    "ignore_result": "store_result (off by default: store_result=True keeps the return value, JSON <= 4 KiB)",
    "rate_limit": "limits=[name] with app.rate_limit(name, rate, per) declared first (docs/flow-control.md)",
    "priority": "queue= (a job on its own queue, e.g. queue=\"critical\", with its own MaximumConcurrency)",
    "countdown": "delay= on enqueue (it is an enqueue option, not a job option)",
    "eta": "eta= on enqueue (an aware datetime; beyond 900 s it waits in EventBridge Scheduler)",
}
#: what a job name may be: it travels in message bodies, attributes, log lines, metric dimensions and keys
JOB_NAME = re.compile(r"[a-z0-9][a-z0-9._-]*")
MAX_JOB_NAME = 80
#: the options every job has (``JobApp.job`` takes these and the features' ``JobOption``s), for error messages
JOB_OPTIONS = ("key", "group", "max_attempts", "backoff_base", "backoff_cap", "jitter", "retry_on", "permanent_on",
               "time_limit", "version", "chunked", "store_result", "expires_in", "on_crash", "batch",
               "threads")


def option_names() -> tuple[str, ...]:
    """Every option ``JobApp.job`` takes: those every job has, then the features', alphabetically."""
    return JOB_OPTIONS + tuple(sorted({*OPTION_HOMES, *FEATURE_OPTIONS}))


def declare_options(
    name: str,
    settings: Settings,
    named: Mapping[str, Mapping[str, object]] | None = None,
    *,
    key: str | None = None,
    group: str | None = None,
    max_attempts: int | None = None,
    backoff_base: float | None = None,
    backoff_cap: float | None = None,
    jitter: bool = True,
    retry_on: Iterable[type[BaseException]] | type[BaseException] = (Exception,),
    permanent_on: Iterable[type[BaseException]] | type[BaseException] = (),
    time_limit: float | None = None,
    version: int = 1,
    chunked: bool = False,
    store_result: bool = False,
    expires_in: float | None = None,
    on_crash: OnCrash | str = OnCrash.RETRY,
    batch: int | None = None,
    threads: bool = False,
    final: Collection[str] = ("max_attempts", "function_timeout", "queues"),
    **features: Any,
) -> JobOptions:
    """The options of job ``name``, checked against the app's settings (docs/jobs.md lists them).

    ``features`` are the features' options (``FEATURE_OPTIONS``), each checked by its own ``JobOption``;
    ``named`` is what the app declared by name that they may refer to (its limiters). ``final`` names
    the settings that are already decided (``check_against_settings``); the app passes those its code
    fixed, and checks the others once it reads the environment.

    Example:
        >>> from sqsjobs import Settings
        >>> declare_options("sync-account", Settings(), max_attempts=3).max_attempts
        3
        >>> declare_options("sync-account", Settings(), max_retries=2)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'sync-account': unknown option(s) 'max_retries' (Celery) → use \
max_attempts (= max_retries + 1: sqsjobs counts the first run). Options: key, group, max_attempts, backoff_base, \
backoff_cap, jitter, retry_on, permanent_on, time_limit, version, chunked, store_result, expires_in, on_crash, batch, \
threads, callbacks, debounce, dedupe, limits, queue, tenant_metrics
    """
    if "expires" in features and expires_in is None:
        expires_in = features.pop("expires")  # Celery's name for it
    given = {k: feature_option(k) for k in features}
    unknown = [k for k, option in given.items() if option is None]
    if unknown:
        hints = [f"{k!r} (Celery) → use {CELERY_NAMES[k]}" for k in unknown if k in CELERY_NAMES]
        others = [repr(k) for k in unknown if k not in CELERY_NAMES]
        raise ConfigurationError(
            f"job {name!r}: unknown option(s) {'; '.join(hints + others)}. Options: {', '.join(option_names())}"
        )
    options = _options(
        name, settings, key=key, group=group, max_attempts=max_attempts, backoff_base=backoff_base,
        backoff_cap=backoff_cap, jitter=jitter, retry_on=_exception_classes(name, "retry_on", retry_on),
        permanent_on=_exception_classes(name, "permanent_on", permanent_on), time_limit=time_limit,
        version=version, store_result=store_result, expires_in=expires_in, on_crash=on_crash, chunked=chunked,
    )
    if batch is not None:
        options = replace(options, batch=batch_size(name, batch, store_result=store_result, chunked=chunked))
    options = replace(options, threads=threads_option(name, threads, time_limit=time_limit))
    declaring = Declaring(job=name, settings=settings, chunked=chunked, store_result=store_result,
                          batch=options.batch, named=named or {}, given=features)
    # Only what the job set is checked and kept: an option at its default needs no check, and no feature.
    checked = {k: (option, option.check(declaring, features[k])) for k, option in given.items() if option is not None}
    options = replace(options, features={k: value for k, (option, value) in checked.items()
                                         if value != option.default})
    check_against_settings(name, options, settings, final)
    return options


def threads_option(name: str, threads: Any, *, time_limit: float | None) -> bool:
    """``threads=`` checked for job ``name``: True or False, and never with a ``time_limit``.

    A ``time_limit`` interrupts the job's own code with ``SIGALRM``, which Python delivers to the main thread
    only: nothing can stop a job on another thread, so a limit there would be a promise not kept.

    Example:
        >>> threads_option("fetch-feed", True, time_limit=30)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'fetch-feed': threads=True does not combine with time_limit: Python cannot \
stop a thread, so the limit could not be kept; make the job `async def` (its time_limit cancels it at an await) or \
leave threads off
    """
    if type(threads) is not bool:
        raise ConfigurationError(f"job {name!r}: threads must be True or False, got {threads!r}")
    if threads and time_limit is not None:
        raise ConfigurationError(
            f"job {name!r}: threads=True does not combine with time_limit: Python cannot stop a thread, so the limit "
            "could not be kept; make the job `async def` (its time_limit cancels it at an await) or leave threads off")
    return threads


def check_against_settings(name: str, options: JobOptions, settings: Settings,
                           final: Collection[str] = ("max_attempts", "function_timeout", "queues")) -> None:
    """Refuse options the app's settings make impossible; only the settings named in ``final`` are checked.

    ``max_attempts`` bounds the job's (the queue's redrive moves a message after that many receives),
    ``function_timeout`` its ``time_limit``; each feature's ``JobOption.against_settings`` checks its own
    (``queues``: the queue the job names, ``enqueue/_routing.py``).

    Example:
        >>> from sqsjobs import Settings
        >>> options = JobOptions(max_attempts=7)
        >>> check_against_settings("sync", options, Settings(), final=())  # the environment may raise the bound
        >>> check_against_settings("sync", options, Settings(max_attempts=7))
        >>> check_against_settings("sync", options, Settings())
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'sync': max_attempts=7 must be within 1..5: the queue's redrive ...
    """
    max_attempts = options.max_attempts
    if "max_attempts" in final and max_attempts is not None and max_attempts > settings.max_attempts:
        raise ConfigurationError(
            f"job {name!r}: max_attempts={max_attempts} must be within 1..{settings.max_attempts}: the "
            f"queue's redrive policy (maxReceiveCount = SQSJOBS_MAX_ATTEMPTS = {settings.max_attempts}) "
            "moves a message to the DLQ after that many receives, so more attempts can never happen. "
            "Raise MaxAttempts in the template instead."
        )
    timeout, time_limit = settings.function_timeout, options.time_limit
    if ("function_timeout" in final and timeout is not None and time_limit is not None
            and time_limit > timeout - settings.deadline_margin):
        raise ConfigurationError(
            f"job {name!r}: time_limit={time_limit} s does not fit in the function's timeout of "
            f"{timeout} s minus the {settings.deadline_margin} s deadline margin; lower the limit "
            "or raise the worker's Timeout (and the queue's visibility with it)"
        )
    for feature, value in options.features.items():  # an option left at its default fits any settings
        option = feature_option(feature)
        if option is not None and option.against_settings is not None:
            option.against_settings(name, value, settings, final)


def _options(name: str, settings: Settings, *, backoff_base: float | None, backoff_cap: float | None,
             jitter: bool, max_attempts: int | None, time_limit: float | None, version: int,
             retry_on: tuple[type[BaseException], ...], permanent_on: tuple[type[BaseException], ...],
             key: str | None, group: str | None, store_result: bool, expires_in: float | None,
             on_crash: OnCrash | str, chunked: bool) -> JobOptions:
    if not isinstance(name, str) or not JOB_NAME.fullmatch(name) or len(name) > MAX_JOB_NAME:
        raise ConfigurationError(
            f"job name {name!r} is not allowed: use lowercase letters, digits, '.', '_' and '-', starting "
            f"with a letter or digit ([a-z0-9][a-z0-9._-]*), at most {MAX_JOB_NAME} characters, "
            "e.g. 'invoice-email'"
        )
    if max_attempts is not None and (type(max_attempts) is not int or max_attempts < 1):
        raise ConfigurationError(f"job {name!r}: max_attempts must be a positive integer, got {max_attempts!r}")
    _check_exception_rules(name, retry_on, permanent_on)
    if type(jitter) is not bool:
        raise ConfigurationError(f"job {name!r}: jitter must be True or False, got {jitter!r}")
    if time_limit is not None and (isinstance(time_limit, bool) or not isinstance(time_limit, int | float)
                                   or not time_limit > 0):
        raise ConfigurationError(f"job {name!r}: time_limit must be a positive number of seconds, got {time_limit!r}")
    if type(version) is not int or version < 1:
        raise ConfigurationError(f"job {name!r}: version must be a positive integer, got {version!r}")
    base = settings.backoff_base if backoff_base is None else backoff_base
    cap = settings.backoff_cap if backoff_cap is None else backoff_cap
    for label, value in (("backoff_base", base), ("backoff_cap", cap)):
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigurationError(f"job {name!r}: {label} must be a number of seconds, got {value!r}")
    if base > cap:
        # Usually swapped arguments: every delay would be the cap, so the base means nothing.
        raise ConfigurationError(
            f"job {name!r}: backoff_base={base} s is above backoff_cap={cap} s, so every retry would wait "
            "the cap; lower backoff_base or raise backoff_cap (the cap bounds the exponential growth)"
        )
    try:
        backoff = BackoffPolicy(base=base, cap=cap, jitter=jitter)
    except ConfigurationError as error:
        raise ConfigurationError(f"job {name!r}: {error}") from None
    if type(store_result) is not bool:
        raise ConfigurationError(f"job {name!r}: store_result must be True or False, got {store_result!r}")
    if store_result and chunked:
        raise ConfigurationError(
            f"job {name!r}: store_result=True does not fit a chunked job: its pages return cursors, and the "
            "run's progress is in app.run_status(job, run_id)"
        )
    if expires_in is not None and (isinstance(expires_in, bool) or not isinstance(expires_in, int | float)
                                   or not expires_in > 0):
        raise ConfigurationError(f"job {name!r}: expires_in must be a positive number of seconds, "
                                 f"got {expires_in!r}")
    try:
        crash = OnCrash(on_crash)
    except ValueError:
        raise ConfigurationError(
            f"job {name!r}: on_crash must be one of {[c.value for c in OnCrash]}, got {on_crash!r}"
        ) from None
    return JobOptions(key=key, group=group, max_attempts=max_attempts, backoff=backoff, retry_on=retry_on,
                      permanent_on=permanent_on, time_limit=time_limit, version=version,
                      store_result=store_result, expires_in=None if expires_in is None else float(expires_in),
                      on_crash=crash)


def _exception_classes(job: str, label: str, kinds: Any) -> tuple[type[Exception], ...]:
    """``retry_on``/``permanent_on`` as a tuple of exception classes (one bare class is accepted too)."""
    if isinstance(kinds, type):
        kinds = (kinds,)
    try:
        result = tuple(kinds)
    except TypeError:
        raise ConfigurationError(f"job {job!r}: {label} must be a tuple of exception classes, got {kinds!r}") from None
    for kind in result:
        # The worker catches Exception: a BaseException-only class (KeyboardInterrupt...) would never be seen.
        if not (isinstance(kind, type) and issubclass(kind, Exception)):
            raise ConfigurationError(
                f"job {job!r}: {label} must hold exception classes (subclasses of Exception), got {kind!r}"
            )
    return result


def _check_exception_rules(job: str, retry_on: tuple[type[BaseException], ...],
                           permanent_on: tuple[type[BaseException], ...]) -> None:
    """Refuse rules that can never apply, given the order ``JobOptions.classify`` checks them in."""
    for kind in retry_on:
        if issubclass(kind, PermanentError):
            raise ConfigurationError(
                f"job {job!r}: retry_on has {kind.__name__}, a PermanentError, which is never retried; "
                "raise RetryableError for failures that should be retried, or remove it from retry_on"
            )
        shadow = next((p for p in permanent_on if issubclass(kind, p)), None)
        if shadow is not None:
            raise ConfigurationError(
                f"job {job!r}: {kind.__name__} is in retry_on but is a subclass of {shadow.__name__}, which "
                "permanent_on sends to the DLQ first, so it would never be retried; remove one of them or narrow "
                "permanent_on"
            )
    for kind in permanent_on:
        if issubclass(kind, RetryableError):
            raise ConfigurationError(
                f"job {job!r}: permanent_on has {kind.__name__}, a RetryableError, which is always retried "
                "(TimeLimitExceeded included); raise PermanentError instead, or remove it from permanent_on"
            )


#: the most items one batch handler's call may take: Lambda's largest SQS batch (a standard queue with a window)
MAX_BATCH = 10_000


def batch_size(name: str, batch: Any, *, store_result: bool, chunked: bool) -> int:
    """``batch=N`` checked for job ``name``: a positive integer up to ``MAX_BATCH``, not with a per-call result.

    Example:
        >>> batch_size("index-docs", 25, store_result=False, chunked=False)
        25
        >>> batch_size("index-docs", 0, store_result=False, chunked=False)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'index-docs': batch must be an integer in 1..10000 (items per call), got 0
    """
    if type(batch) is not int or not 1 <= batch <= MAX_BATCH:
        raise ConfigurationError(f"job {name!r}: batch must be an integer in 1..{MAX_BATCH} (items per call), "
                                 f"got {batch!r}")
    if store_result or chunked:
        what = "store_result=True (one call has no per-item return value)" if store_result else "chunked=True"
        raise ConfigurationError(f"job {name!r}: batch={batch} does not combine with {what}")
    return batch
