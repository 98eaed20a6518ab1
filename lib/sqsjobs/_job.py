"""A registered job: the function, its options, and how to enqueue it.

Declaring a job only records metadata and validates options
(``_job_options.py``); it never calls AWS (Chalice's rule). A job depends on
what it uses of its app's runtime (``JobRuntime``: the clock, the settings,
and the one call it hands an enqueue to), never on the app, nor on the
features an enqueue may go through (debounce, dedupe, long delays: the
runtime's ``enqueue``, ``enqueue/_dispatch.py``).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import string
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Generic, ParamSpec, Protocol, TypeVar

from sqsjobs._calls import check_function, check_sync, is_async
from sqsjobs._environment import pinned_runtime
from sqsjobs._errors import (
    ConfigurationError,
    InvalidArgumentsError,
    InvalidDelayError,
    MalformedMessageError,
    RetryableError,
)
from sqsjobs._job_options import JobOptions
from sqsjobs._tracing import current_trace_id
from sqsjobs.enqueue._arguments import Signature
from sqsjobs.enqueue._delays import plan_delay
from sqsjobs.enqueue._envelope import CallbackTo, Envelope, as_callback
from sqsjobs.enqueue._message import EnqueueRequest, JobMessage
from sqsjobs.enqueue._routing import QUEUE, check_tenant
from sqsjobs.enqueue._sizes import check_key, check_message
from sqsjobs.store._lease import RESERVED_PREFIXES, is_reserved

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from mypy_boto3_dynamodb import DynamoDBClient

    from sqsjobs._backoff import RandomSource
    from sqsjobs._settings import Settings
    from sqsjobs.enqueue._producer import EnqueueReport
    from sqsjobs.store._lease import LeaseStore

P = ParamSpec("P")
R = TypeVar("R")

#: keyword names ``enqueue``/``message`` keep for themselves
ENQUEUE_OPTIONS = ("delay", "eta", "replace", "group", "trace_id", "expires_in", "tenant", "debounce", "callback")

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]

#: Celery ``apply_async`` options people pass to ``enqueue``, and what sqsjobs takes instead.
CELERY_ENQUEUE_NAMES = {
    "countdown": "delay= (seconds or a timedelta, up to 365 days)",
    "queue": "@app.job(queue=...) (a job's queue is part of its declaration)",
    "priority": "a job on its own queue: @app.job(queue=\"critical\")",
    "headers": "trace_id= (the only message attribute a job reads)",
}


class Services(Protocol):
    """The runtime's collaborators a job and a feature read: settings, the injected clock, random and sleep, the
    store, the logger and the senders (see ``_runtime.Runtime`` for each). The features (``enqueue/``,
    ``workflows/``, ``schedules/``) and ``Job`` sit below the runtime in the layering (docs/architecture.md,
    tests/unit/test_layering.py), so they name this protocol, never ``_runtime``; ``JobRuntime`` adds what needs
    the job itself."""

    @property
    def settings(self) -> Settings: ...

    def clock(self) -> float: ...

    @property
    def random(self) -> RandomSource: ...

    def sleep(self, seconds: float) -> None: ...

    def emit_metrics(self, line: str) -> None: ...

    @property
    def store(self) -> LeaseStore: ...

    @property
    def logger(self) -> Any: ...

    @property
    def dynamodb(self) -> DynamoDBClient: ...

    def send(self, message: JobMessage) -> str: ...

    def send_many(self, messages: Sequence[JobMessage],
                  on_progress: Callable[[int], None] | None = None) -> EnqueueReport: ...

    def unschedule(self, key: str) -> bool: ...


class Registered(Protocol):
    """What an app declared, as a job's runtime shows it (``_runtime.Registry``)."""

    @property
    def jobs(self) -> Mapping[str, Job[Any, Any]]: ...

    @property
    def schedules(self) -> Mapping[str, Any]: ...

    @property
    def limiters(self) -> Mapping[str, Any]: ...


class JobRuntime(Services, Protocol):
    """What a job (and a feature that finds jobs by name) uses of its app's runtime (``_runtime.Runtime``)."""

    @property
    def registry(self) -> Registered: ...

    def job(self, name: str) -> Job[Any, Any]: ...

    def enqueue(self, job: Job[Any, Any], request: EnqueueRequest) -> str: ...


class Job(Generic[P, R]):
    """A function registered with ``@app.job``; call it directly to run it in-process.

    Example:
        >>> from sqsjobs import JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q")
        >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
        ... def send_invoice_email(invoice_id: int) -> None: ...
        >>> send_invoice_email.message(invoice_id=42).key
        'invoice-email:42'
    """

    def __init__(self, runtime: JobRuntime, name: str, fn: Callable[P, R], options: JobOptions) -> None:
        #: the app's runtime: the clock a message is stamped with, and the sender it goes through
        self.runtime = runtime
        self.name = name
        self.fn = fn
        self.options = options
        check_function(f"job {name!r}", fn)
        #: ``async def``: the worker awaits it on the invocation's event loop, beside the batch's other jobs
        self.is_async = is_async(fn)
        if self.is_async and options.threads:
            raise ConfigurationError(f"job {name!r}: threads=True is for plain functions; an async job already runs "
                                     "beside the batch's other jobs, on its event loop")
        self.signature, self._defaults = self._arguments(fn, name)
        self._upcasters: dict[int, Upcaster] = {}
        clash = set(self.signature.names) & set(ENQUEUE_OPTIONS)
        if clash:
            raise ConfigurationError(
                f"job {name!r}: parameter(s) {sorted(clash)} clash with enqueue options {ENQUEUE_OPTIONS}; rename them"
            )
        for label, template in (("key", options.key), ("group", options.group)):
            if template is not None:
                _check_template(name, label, template, self.signature.names)

    def _arguments(self, fn: Callable[..., Any], name: str) -> tuple[Signature, dict[str, Any]]:
        """What one message of the job carries, and the defaults a key template falls back on (a batch
        handler's are one item's: ``_batch_job.py``)."""
        return Signature.of(fn, job=name), _defaults(fn)

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<Job {self.name!r} -> {self.fn.__module__}.{self.fn.__qualname__}>"

    # -- producing -------------------------------------------------------
    def message(
        self,
        *,
        delay: float | timedelta = 0,
        eta: datetime | None = None,
        replace: bool = False,
        group: str | None = None,
        trace_id: str | None = None,
        expires_in: float | None = None,
        tenant: str | None = None,
        callback: CallbackTo | None = None,
        **args: Any,
    ) -> JobMessage:
        """Validate ``args`` and build the message, without sending it.

        A ``delay`` (or ``eta``) up to 900 s becomes SQS's ``DelaySeconds``;
        a longer one sets ``due_at``, and sending it creates a one-time
        schedule (docs/delays.md).

        Example:
            >>> from datetime import timedelta
            >>> from sqsjobs import JobApp
            >>> app = JobApp(queue_url="https://sqs.example/q", clock=lambda: 1_767_225_600.0)
            >>> @app.job("reminder", key="reminder:{user_id}")
            ... def reminder(user_id: int) -> None: ...
            >>> m = reminder.message(user_id=7, delay=300, trace_id="req-1")
            >>> m.delay, m.due_at, m.trace_id, m.key
            (300, None, 'req-1', 'reminder:7')
            >>> reminder.message(user_id=7, delay=timedelta(hours=2)).due_at
            1767232800.0
        """
        if "expires" in args and "expires" not in self.signature.names:
            # Celery's apply_async(expires=...) is sqsjobs' expires_in (seconds).
            expires_in = args.pop("expires") if expires_in is None else expires_in
        celery = [name for name in args if name in CELERY_ENQUEUE_NAMES and name not in self.signature.names]
        if celery:
            raise InvalidArgumentsError(
                f"job {self.name!r}: {celery[0]!r} is a Celery apply_async option; "
                f"sqsjobs takes {CELERY_ENQUEUE_NAMES[celery[0]]}"
            )
        bound = self.signature.bind(args)
        now = self.runtime.clock()
        plan = plan_delay(self.name, delay=delay, eta=eta, now=now)
        if type(replace) is not bool:
            raise InvalidArgumentsError(f"job {self.name!r}: replace must be True or False, got {replace!r}")
        key = self.key_for(bound)
        if expires_in is not None:
            expires_in = _positive_seconds(self.name, "expires_in", expires_in, InvalidArgumentsError)
        _check_due_before_expiry(self.name, plan.due_at - now if plan.due_at is not None else plan.delay_seconds,
                                 expires_in or self.options.expires_in)
        if callback is not None:
            as_callback(callback, f"job {self.name!r}", InvalidArgumentsError)
            if not self.options.sets("callbacks"):  # workflows/_callbacks.py's option
                raise InvalidArgumentsError(
                    f"job {self.name!r}: declare it with callbacks=True to enqueue it with a callback (its "
                    "function's role then needs the callback permissions, and `sqsjobs check` verifies it)")
            if plan.due_at is not None:
                raise InvalidArgumentsError(
                    f"job {self.name!r}: a job a workflow awaits (callback=) is due within SQS's 900 s; "
                    "let the workflow wait (a durable context.wait, a Step Functions Wait state), then enqueue")
        envelope = Envelope(
            job=self.name, key=key, args=bound, job_version=self.options.version, enqueued_at=now,
            expires_in=expires_in, callback=callback,
        )
        group = group or (self._format(self.options.group, bound) if self.options.group else None)
        message = JobMessage(
            job=self.name,
            key=key,
            body=envelope.encode(),
            delay=plan.delay_seconds,
            group=group,
            trace_id=trace_id or current_trace_id(),
            due_at=plan.due_at,
            replace=replace,
            queue=QUEUE.of(self.options),
            tenant=None if tenant is None else check_tenant(self.name, tenant),
            source=self,
        )
        check_message(message, bound, limit=self.runtime.settings.max_message_bytes)
        return message

    @pinned_runtime  # one configuration (and one look at the environment) for the whole enqueue
    def enqueue(
        self, *, delay: float | timedelta = 0, eta: datetime | None = None, replace: bool = False,
        group: str | None = None, trace_id: str | None = None, expires_in: float | None = None,
        tenant: str | None = None, debounce: float | None = None, callback: CallbackTo | None = None, **args: Any
    ) -> str:
        """Send one job message to the job's queue; returns the SQS message id, or for a long delay a ``ScheduledJob``.

        ``delay`` (seconds or a ``timedelta``, up to 365 days) or ``eta`` (an
        aware ``datetime``) say when it is due: up to 900 s SQS holds it back
        (``DelaySeconds``), beyond it waits in a one-time EventBridge Scheduler
        schedule and the return value is a ``ScheduledJob`` — a ``str`` (the
        schedule's ARN) that also says when it is due and whether the key was
        ``already_scheduled`` (then nothing changed, unless ``replace=True``
        moved it). ``group`` (FIFO ``MessageGroupId``, overriding the job's
        ``group`` template), ``trace_id`` (carried to the job's logs),
        ``expires_in`` (seconds; an older delivery is acknowledged without
        running) and ``tenant`` (a standard queue's ``MessageGroupId``: SQS fair
        queues keep one noisy tenant from delaying the others; refused on a FIFO
        queue) are enqueue options too, not job arguments.

        ``debounce`` (seconds) overrides the job's window: the enqueue joins
        its key's burst, which runs once, that long after its last enqueue,
        with the last arguments. A job declared with ``dedupe`` returns a
        ``Receipt`` (``duplicate=True`` when its key was already queued or
        running, ``cancelled=True`` when its key was cancelled; either way
        nothing was sent). docs/jobs.md has both.

        ``callback`` (a ``DurableCallback`` or ``TaskToken``) is the workflow
        awaiting this request: the worker answers it once the job's fate is
        final, with its stored result or its DLQ reason (docs/durable.md). A
        debounced or deduplicated enqueue may send nothing, so it takes none.

        Example:
            >>> from sqsjobs import JobApp, Outcome
            >>> app = JobApp()
            >>> @app.job("reindex", key="reindex:{product_id}", debounce=30)
            ... def reindex(product_id: int, title: str) -> None:
            ...     print("reindex", product_id, title)
            >>> with app.testing() as t:
            ...     for n in range(20):
            ...         _ = reindex.enqueue(product_id=7, title=f"edit {n}")
            ...     _ = t.drain()
            ...     t.count(Outcome.SUCCEEDED), t.count(Outcome.SUPERSEDED)
            reindex 7 edit 19
            (1, 19)
        """
        return self.runtime.enqueue(self, EnqueueRequest(
            args=args, delay=delay, eta=eta, replace=replace, group=group, trace_id=trace_id, expires_in=expires_in,
            tenant=tenant, debounce=debounce, callback=callback))

    def key_for(self, args: Mapping[str, Any]) -> str:
        """The idempotency key for these (already validated) arguments.

        Without a key template the key is the job name and a hash of the
        arguments, so no argument value (a token, an e-mail address) reaches a
        log line, a metric or a DLQ attribute unless the template names it.

        Example:
            >>> from sqsjobs import JobApp
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> @app.job("reset-password")
            ... def reset(user_id: int, token: str) -> None: ...
            >>> key = reset.key_for({"user_id": 7, "token": "tok_SECRET_123"})
            >>> key.startswith("reset-password:"), "SECRET" in key
            (True, False)
        """
        if self.options.key is None:
            key = f"{self.name}:{args_digest(self.name, args)}"
        else:
            values = {**self._defaults, **args}
            empty = [name for name in _fields(self.options.key) if values.get(name) in ("", None)]
            if empty:
                raise InvalidArgumentsError(
                    f"job {self.name!r}: key template {self.options.key!r} needs a value for {empty[0]!r}, got "
                    f"{values.get(empty[0])!r}: an empty key field would make different jobs share one key"
                )
            key = self._format(self.options.key, args)
        check_key(self.name, key, template=self.options.key, args=args)
        if is_reserved(key):
            raise InvalidArgumentsError(
                f"job {self.name!r}: the key {key[:80]!r} starts with a reserved prefix "
                f"({', '.join(RESERVED_PREFIXES)}); those keys belong to sqsjobs' own records (locks, runs...)"
            )
        return key

    def fingerprint(self, args: Mapping[str, Any]) -> str:
        """What a key's record remembers of the call: a hash of the job and its arguments (``key_conflict``).

        A debounced job's bursts of one key carry different arguments by design
        (the last enqueue's win), so its fingerprint is the job's alone.
        """
        return args_digest(self.name, {} if self.options.sets("debounce") else args)

    def _format(self, template: str, args: Mapping[str, Any]) -> str:
        return template.format_map({**self._defaults, **args})

    # -- versions ----------------------------------------------------------
    def upcaster(self, from_version: int) -> Callable[[Upcaster], Upcaster]:
        """Register how arguments of ``from_version`` become those of ``from_version + 1``.

        Example:
            >>> from sqsjobs import JobApp
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> @app.job("greet", version=2)
            ... def greet(user_id: int, loud: bool) -> None: ...
            >>> @greet.upcaster(from_version=1)
            ... def add_loud(args: dict) -> dict:
            ...     return {**args, "loud": False}
            >>> greet.upcast(1, {"user_id": 7})
            {'user_id': 7, 'loud': False}
        """
        if not 1 <= from_version < self.options.version:
            raise ConfigurationError(
                f"job {self.name!r}: an upcaster starts from a version below the job's version "
                f"{self.options.version}, got {from_version}"
            )

        def register(fn: Upcaster) -> Upcaster:
            check_sync(f"job {self.name!r}: the upcaster from version {from_version}", fn,
                       "it runs while the worker decodes the message")
            self._upcasters[from_version] = fn
            return fn

        return register

    def upcast(self, version: int, args: dict[str, Any]) -> dict[str, Any]:
        """Bring ``args`` written for ``version`` up to the job's version, step by step."""
        if version > self.options.version:
            # A newer producer raced ahead of this worker's deploy: retrying lets new code take it.
            raise RetryableError(
                f"message is job_version {version}, this worker knows up to {self.options.version}; "
                "retrying until the new version is deployed"
            )
        while version < self.options.version:
            step = self._upcasters.get(version)
            if step is None:
                raise MalformedMessageError(
                    f"job {self.name!r} has no upcaster from version {version} to {version + 1}"
                )
            args = step(dict(args))
            version += 1
        return args


def args_digest(job: str, args: Mapping[str, Any]) -> str:
    """A short, stable hash of a job call: the name and the canonical JSON of the arguments.

    Example:
        >>> args_digest("invoice-email", {"invoice_id": 42}) == args_digest("invoice-email", {"invoice_id": 42})
        True
        >>> len(args_digest("invoice-email", {"invoice_id": 42}))
        32
    """
    canonical = json.dumps(dict(args), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(f"{job}\n{canonical}".encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _check_due_before_expiry(job: str, wait: float, expires_in: float | None) -> None:
    """A job due after its own expiry would only ever be acknowledged as expired: refuse it now."""
    if expires_in is not None and wait >= expires_in:
        raise InvalidDelayError(
            f"job {job!r}: it is due in {wait:g} s but expires {expires_in:g} s after its enqueue "
            "(expires_in counts from the enqueue, not from when it is due): it would never run; "
            "raise expires_in above the delay"
        )


def _positive_seconds(job: str, label: str, value: Any, error: type[Exception]) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 or value != value:
        raise error(f"job {job!r}: {label} must be a positive number of seconds, got {value!r}")
    return float(value)


def _fields(template: str) -> list[str]:
    return [f.split(".")[0].split("[")[0] for _, f, _, _ in string.Formatter().parse(template) if f]


def _defaults(fn: Callable[..., Any]) -> dict[str, Any]:
    return {
        p.name: p.default for p in inspect.signature(fn).parameters.values() if p.default is not inspect.Parameter.empty
    }


def _check_template(job: str, label: str, template: str, names: tuple[str, ...]) -> None:
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(template) if f is not None]
    except ValueError as error:
        raise ConfigurationError(f"job {job!r}: {label} template {template!r} is invalid: {error}") from None
    unknown = [f for f in fields if f.split(".")[0].split("[")[0] not in names]
    if unknown:
        raise ConfigurationError(
            f"job {job!r}: {label} template {template!r} names {unknown}, which are not parameters of the job "
            f"({', '.join(names) or 'none'})"
        )
    if label == "group" and not fields:
        raise ConfigurationError(
            f"job {job!r}: group={template!r} is a constant, which puts every message in one FIFO group "
            "and serialises all work on one consumer; use an argument such as '{account_id}'"
        )
