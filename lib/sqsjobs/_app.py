"""``JobApp``: the façade users meet — register jobs, enqueue them, handle batches.

Building an app and declaring jobs never creates an AWS client or calls AWS
(cold start stays cheap); clients are created on first use, once per process,
unless they were injected.
"""

from __future__ import annotations

import random as _random
import re
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqsjobs._backoff import BackoffPolicy, RandomSource
from sqsjobs._errors import ConfigurationError, UnknownJobError
from sqsjobs._job import Job, JobOptions, OnCrash
from sqsjobs._settings import Settings
from sqsjobs._with_block import check_entered, with_block
from sqsjobs.enqueue._message import DEFAULT_QUEUE
from sqsjobs.flow._limits import ConcurrencyLimit, Limiter, RateLimit

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.enqueue._dispatch import Dispatcher
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport, Producer
    from sqsjobs.enqueue._routing import QueueRouter
    from sqsjobs.schedules._one_time import OneTimeSchedules
    from sqsjobs.schedules._periodic import Scheduler, ScheduleSpec
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.testing.tester import JobTester
    from sqsjobs.worker._delivery import BatchResult
    from sqsjobs.worker._job_records import JobStatus
    from sqsjobs.workflows._chains import Chain, ChainStatus
    from sqsjobs.workflows._chunked import RunStatus
    from sqsjobs.workflows._groups import CancelledGroup, Group, GroupStatus
    from sqsjobs.workflows._outbox import Transaction

P = ParamSpec("P")
R = TypeVar("R")
L = TypeVar("L", RateLimit, ConcurrencyLimit)

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
#: the options ``JobApp.job`` takes, for error messages
JOB_OPTIONS = ("key", "group", "max_attempts", "backoff_base", "backoff_cap", "jitter", "retry_on", "permanent_on",
               "time_limit", "version", "chunked", "store_result", "expires_in", "on_crash", "limits", "queue",
               "tenant_metrics")


class JobApp:
    """A set of jobs sharing their queues, a DLQ and an idempotency table.

    Settings come from the environment the template sets (``SQSJOBS_QUEUE_URL``,
    ``SQSJOBS_QUEUE_URL_<NAME>``, ``SQSJOBS_DLQ_URL``, ``SQSJOBS_TABLE``,
    ``SQSJOBS_MAX_ATTEMPTS``...); keyword arguments win. ``queues`` names the
    queues jobs may be routed to (``{"default": url, "critical": url}``; the
    default one is ``queue_url``); a name given with ``None`` takes its URL from
    ``SQSJOBS_QUEUE_URL_<NAME>`` and may be declared on jobs without one (its
    sends then fail with a clear error).
    ``max_message_bytes`` (``SQSJOBS_MAX_MESSAGE_BYTES``) is the queues'
    ``MaximumMessageSize`` (262,144 unless the template raises it, up to 1 MiB).
    ``schedule_group``/``scheduler_role_arn``
    (``SQSJOBS_SCHEDULE_GROUP``/``SQSJOBS_SCHEDULER_ROLE_ARN``) let jobs wait
    longer than 900 s in EventBridge Scheduler (docs/delays.md).

    Example:
        >>> app = JobApp(queue_url="https://sqs.eu-west-1.amazonaws.com/123456789012/jobs")
        >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
        ... def send_invoice_email(invoice_id: int) -> None: ...
        >>> sorted(app.jobs)
        ['invoice-email']
    """

    def __init__(
        self,
        *,
        queue_url: str | None = None,
        queues: Mapping[str, str | None] | None = None,
        dlq_url: str | None = None,
        table_name: str | None = None,
        outbox_table: str | None = None,
        max_attempts: int | None = None,
        function_timeout: float | None = None,
        service: str | None = None,
        namespace: str | None = None,
        backoff_base: float | None = None,
        backoff_cap: float | None = None,
        record_ttl: float | None = None,
        deadline_margin: float | None = None,
        lease_margin: float | None = None,
        max_message_bytes: int | None = None,
        schedule_group: str | None = None,
        scheduler_role_arn: str | None = None,
        sqs_client: SQSClient | None = None,
        dynamodb_client: DynamoDBClient | None = None,
        scheduler_client: EventBridgeSchedulerClient | None = None,
        store: LeaseStore | None = None,
        clock: Callable[[], float] = time.time,
        random: RandomSource | None = None,
        sleep: Callable[[float], None] = time.sleep,
        emit_metrics: Callable[[str], None] = print,
        logger: Any = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        named = dict(queues or {})
        default = named.pop(DEFAULT_QUEUE, None)
        if default is not None and queue_url is not None and default != queue_url:
            raise ConfigurationError(f"two default queues: queue_url={queue_url!r} and queues['default']={default!r}")
        self.settings = Settings.from_env(
            environ,
            queue_url=queue_url or default,
            queues=named or None,
            dlq_url=dlq_url,
            table_name=table_name,
            outbox_table=outbox_table,
            max_attempts=max_attempts,
            function_timeout=function_timeout,
            service=service,
            namespace=namespace,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
            record_ttl=record_ttl,
            deadline_margin=deadline_margin,
            lease_margin=lease_margin,
            max_message_bytes=max_message_bytes,
            schedule_group=schedule_group,
            scheduler_role_arn=scheduler_role_arn,
        )
        self.jobs: dict[str, Job[Any, Any]] = {}
        #: scheduled jobs (``@app.scheduled``), by job name
        self.schedules: dict[str, ScheduleSpec] = {}
        #: limiters (``rate_limit``/``concurrency_limit``), by name
        self.limiters: dict[str, Limiter] = {}
        self.clock = clock
        self.random: RandomSource = random if random is not None else _random.Random()
        self.sleep = sleep
        self.emit_metrics = emit_metrics
        self._sqs = sqs_client
        self._dynamodb = dynamodb_client
        self._scheduler_client = scheduler_client
        self._store = store
        self._logger = logger
        self._producer: Producer | None = None
        self._router: QueueRouter | None = None
        self._processor: Any = None
        self._scheduler: Scheduler | None = None
        self._dispatcher: Dispatcher | None = None
        self._one_time_schedules: OneTimeSchedules | None = None

    # ------------------------------------------------------------ declaring
    def job(
        self,
        name: str,
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
        limits: Iterable[str] = (),
        queue: str = DEFAULT_QUEUE,
        tenant_metrics: bool = False,
        **unknown: Any,
    ) -> Callable[[Callable[P, R]], Job[P, R]]:
        """Register a job function under ``name``.

        ``key`` is the idempotency key template (``"invoice-email:{invoice_id}"``;
        default: the name plus all arguments). See docs/jobs.md for every option;
        ``chunked=True`` makes a page-by-page job (docs/patterns.md).
        ``store_result=True`` keeps the return value with the completion
        (``app.status(key).result``); ``expires_in`` seconds after its enqueue a
        delivery is acknowledged without running (Celery's ``expires``);
        ``on_crash="dead_letter"`` dead-letters a delivery whose previous run
        died mid-way instead of running it again. Flow control
        (docs/flow-control.md): ``limits`` names limiters every run must hold,
        ``queue`` the queue the job is sent to, and ``tenant_metrics=True``
        adds the enqueue's ``tenant`` as a ``Tenant`` metric dimension.

        Example:
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> @app.job("sync-account", key="sync:{account_id}", max_attempts=3, retry_on=(TimeoutError,))
            ... def sync_account(account_id: int) -> None: ...
            >>> sync_account.options.max_attempts
            3
        """
        if "expires" in unknown and expires_in is None:
            expires_in = unknown.pop("expires")  # Celery's name for it
        if unknown:
            hints = [f"{k!r} (Celery) → use {CELERY_NAMES[k]}" for k in unknown if k in CELERY_NAMES]
            others = [repr(k) for k in unknown if k not in CELERY_NAMES]
            raise ConfigurationError(
                f"job {name!r}: unknown option(s) {'; '.join(hints + others)}. Options: {', '.join(JOB_OPTIONS)}"
            )
        options = self._options(
            name, key=key, group=group, max_attempts=max_attempts, backoff_base=backoff_base,
            backoff_cap=backoff_cap, jitter=jitter, retry_on=_exception_classes(name, "retry_on", retry_on),
            permanent_on=_exception_classes(name, "permanent_on", permanent_on), time_limit=time_limit,
            version=version, store_result=store_result, expires_in=expires_in, on_crash=on_crash, chunked=chunked,
        )
        options = self._flow_options(name, options, limits=limits, queue=queue, tenant_metrics=tenant_metrics)

        def register(fn: Callable[P, R]) -> Job[P, R]:
            if name in self.jobs:
                raise ConfigurationError(f"job {name!r} is already registered (by {self.jobs[name].fn.__qualname__})")
            if chunked:
                from sqsjobs.workflows._chunked import ChunkedJob

                job: Job[P, R] = ChunkedJob(self, name, fn, options)
            else:
                job = Job(self, name, fn, options)
            self.jobs[name] = job
            return job

        return register

    def scheduled(
        self,
        name: str,
        *,
        schedule: str,
        lease_seconds: float | None = None,
        period: str | None = None,
        enqueue: bool = False,
        **job_options: Any,
    ) -> Callable[[Callable[P, R]], Job[P, R]]:
        """Register a job that ``handlers/scheduler.py`` fires once per period of ``schedule``.

        The function takes ``period: str`` (e.g. ``"2026-08-05"``); its key is
        ``"<name>:{period}"``. See ``sqsjobs.schedules._periodic`` for the lease.

        Example:
            >>> app = JobApp(queue_url="https://sqs.example/q", table_name="idempotency")
            >>> @app.scheduled("nightly-report", schedule="cron(0 2 * * ? *)", lease_seconds=3600)
            ... def nightly_report(period: str) -> None: ...
            >>> app.schedules["nightly-report"].period
            '%Y-%m-%d'
        """
        from sqsjobs.schedules._periodic import PERIOD, schedule_spec

        spec = schedule_spec(name, schedule, period=period, lease_seconds=lease_seconds, enqueue=enqueue)
        if job_options.get("limits") and not enqueue:
            raise ConfigurationError(f"scheduled job {name!r}: limits apply to jobs the worker takes from a queue; "
                                     "pass enqueue=True so the period's run goes through them")
        declare = self.job(name, key=job_options.pop("key", f"{name}:{{{PERIOD}}}"), **job_options)

        def register(fn: Callable[P, R]) -> Job[P, R]:
            import inspect

            if PERIOD not in inspect.signature(fn).parameters:
                raise ConfigurationError(f"scheduled job {name!r}: the function needs a 'period: str' parameter "
                                         "(the period the tick belongs to, e.g. '2026-08-05')")
            job = declare(fn)
            self.schedules[name] = spec
            return job

        return register

    def _options(self, name: str, *, backoff_base: float | None, backoff_cap: float | None, jitter: bool,
                 max_attempts: int | None, time_limit: float | None, version: int,
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
        if max_attempts is not None and max_attempts > self.settings.max_attempts:
            raise ConfigurationError(
                f"job {name!r}: max_attempts={max_attempts} must be within 1..{self.settings.max_attempts}: the "
                f"queue's redrive policy (maxReceiveCount = SQSJOBS_MAX_ATTEMPTS = {self.settings.max_attempts}) "
                "moves a message to the DLQ after that many receives, so more attempts can never happen. "
                "Raise MaxAttempts in the template instead."
            )
        _check_exception_rules(name, retry_on, permanent_on)
        if type(jitter) is not bool:
            raise ConfigurationError(f"job {name!r}: jitter must be True or False, got {jitter!r}")
        if time_limit is not None:
            if isinstance(time_limit, bool) or not isinstance(time_limit, int | float) or not time_limit > 0:
                raise ConfigurationError(f"job {name!r}: time_limit must be a positive number of seconds, "
                                         f"got {time_limit!r}")
            timeout = self.settings.function_timeout
            if timeout is not None and time_limit > timeout - self.settings.deadline_margin:
                raise ConfigurationError(
                    f"job {name!r}: time_limit={time_limit} s does not fit in the function's timeout of "
                    f"{timeout} s minus the {self.settings.deadline_margin} s deadline margin; lower the limit "
                    "or raise the worker's Timeout (and the queue's visibility with it)"
                )
        if type(version) is not int or version < 1:
            raise ConfigurationError(f"job {name!r}: version must be a positive integer, got {version!r}")
        base = self.settings.backoff_base if backoff_base is None else backoff_base
        cap = self.settings.backoff_cap if backoff_cap is None else backoff_cap
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

    def _flow_options(self, name: str, options: JobOptions, *, limits: Any, queue: Any,
                      tenant_metrics: Any) -> JobOptions:
        """``options`` with the job's limiters, queue and tenant metrics, each checked against the app."""
        from dataclasses import replace

        from sqsjobs.enqueue._routing import job_queue
        from sqsjobs.flow._limits import job_limits

        if type(tenant_metrics) is not bool:
            raise ConfigurationError(f"job {name!r}: tenant_metrics must be True or False, got {tenant_metrics!r}")
        return replace(options, limits=job_limits(name, limits, self.limiters),
                       queue=job_queue(name, queue, self.settings.queue_urls()), tenant_metrics=tenant_metrics)

    # ------------------------------------------------------------ limiters (docs/flow-control.md)
    def rate_limit(self, name: str, rate: int, per: float = 1.0) -> RateLimit:
        """Declare a limiter: at most ``rate`` starts in any window of ``per`` seconds, across all invocations.

        Jobs that name it (``limits=[name]``) take a token before they start;
        one over the limit goes back to the queue until the next window
        (never sleeping in Lambda, never using an attempt). Declare it before
        the jobs that use it.

        Example:
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> app.rate_limit("ses", rate=14)
            RateLimit(name='ses', rate=14, per=1.0)
            >>> @app.job("invoice-email", limits=["ses"])
            ... def send_invoice_email(invoice_id: int) -> None: ...
            >>> send_invoice_email.options.limits
            ('ses',)
        """
        from sqsjobs.flow._limits import rate_limit

        return self._declare_limiter(rate_limit(name, rate, per))

    def concurrency_limit(self, name: str, limit: int) -> ConcurrencyLimit:
        """Declare a limiter: at most ``limit`` jobs holding it at once, across all invocations.

        An invocation takes one of its slots for the limited jobs of its batch
        and gives it back when they are done; a crashed invocation's slot frees
        itself when the invocation's lease runs out.

        Example:
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> app.concurrency_limit("partner-api", 3)
            ConcurrencyLimit(name='partner-api', limit=3)
        """
        from sqsjobs.flow._limits import concurrency_limit

        return self._declare_limiter(concurrency_limit(name, limit))

    def _declare_limiter(self, limiter: L) -> L:
        known = self.limiters.get(limiter.name)
        if known is not None and known != limiter:
            raise ConfigurationError(f"limiter {limiter.name!r} is already declared as {known!r}")
        self.limiters[limiter.name] = limiter
        return limiter

    def get_job(self, name: str) -> Job[Any, Any]:
        """The job registered as ``name``; ``UnknownJobError`` names the known ones otherwise."""
        try:
            return self.jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.jobs)) or "none"
            raise UnknownJobError(f"no job named {name!r} is registered (known: {known})") from None

    # ------------------------------------------------------------ producing
    def message(self, name: str, **kwargs: Any) -> JobMessage:
        """Build (and validate) the message for job ``name`` without sending it."""
        return self.get_job(name).message(**kwargs)

    def enqueue(self, name: str, **kwargs: Any) -> str:
        """Enqueue job ``name`` with keyword arguments; returns the SQS message id (a ``ScheduledJob`` past 900 s).

        Takes the enqueue options of ``Job.enqueue`` (``delay``, ``eta``, ``replace``...).

        Example:
            >>> app = JobApp()
            >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
            ... def send_invoice_email(invoice_id: int) -> None: ...
            >>> with app.testing():
            ...     app.enqueue("invoice-email", invoice_id=42)
            'fake-000001'
        """
        return self.send(self.message(name, **kwargs))

    def send(self, message: JobMessage) -> str:
        """Send a prepared message (``Job.message``) to its job's queue, or into a schedule when due beyond 900 s."""
        return self.dispatcher.send(message)

    def enqueue_many(self, messages: Iterable[JobMessage], *, progress: bool | None = None) -> EnqueueReport:
        """Send many messages: full ``SendMessageBatch`` calls, and a schedule each for those due beyond 900 s.

        Failures are reported, not raised (``report.failed``); ``report.sent``
        counts what SQS took and ``report.scheduled`` what waits in a schedule.

        ``progress`` shows a progress bar on standard error; by default only when it is a terminal.

        Example:
            >>> app = JobApp()
            >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
            ... def send_invoice_email(invoice_id: int) -> None: ...
            >>> with app.testing():
            ...     report = app.enqueue_many(send_invoice_email.message(invoice_id=i) for i in range(25))
            ...     report.sent, report.calls
            (25, 3)
        """
        from sqsjobs.enqueue._progress import progress_bar

        batch = list(messages)
        with progress_bar(len(batch), "enqueueing", show=progress) as advance:
            return self.dispatcher.send_many(batch, on_progress=advance)

    def unschedule(self, key: str) -> bool:
        """Delete the pending schedule of a delayed enqueue of ``key``; False when none was pending.

        Only the delayed enqueue's schedule (one per key) is deleted. A job that
        already runs, or waits for a long retry, is stopped with ``cancel(key)``
        instead, which also unschedules.

        Example:
            >>> from botocore.stub import Stubber
            >>> from sqsjobs._clients import scheduler_client
            >>> client = scheduler_client(region_name="eu-west-1")
            >>> app = JobApp(queue_url="https://sqs.example/q", schedule_group="jobs", scheduler_client=client)
            >>> with Stubber(client) as stub:  # the first call finds the schedule, the second finds none
            ...     stub.add_response("delete_schedule", {})
            ...     stub.add_client_error("delete_schedule", "ResourceNotFoundException")
            ...     app.unschedule("invoice-email:42"), app.unschedule("invoice-email:42")
            (True, False)
        """
        from sqsjobs.enqueue._delays import schedule_name
        from sqsjobs.worker._job_records import checked_key

        return self.one_time_schedules.delete(schedule_name(checked_key(key)))

    # ------------------------------------------------------------ consuming
    def handle_batch(self, event: Any, context: Any = None) -> dict[str, list[dict[str, str]]]:
        """The Lambda handler body: ``{"batchItemFailures": [...]}`` for Lambda's SQS poller.

        Example:
            >>> def handler(event, context):  # handlers/worker.py
            ...     return app.handle_batch(event, context)
        """
        return self.process_batch(event, context).response()

    def process_batch(self, event: Any, context: Any = None) -> BatchResult:
        """Like ``handle_batch`` but returns what happened to each record."""
        from sqsjobs.worker._budget import invocation
        from sqsjobs.worker._outcome_log import log_outcomes

        # Jobs read their time budget (sqsjobs.worker._budget.time_left) from this context.
        with invocation(context, margin=self.settings.deadline_margin):
            result: BatchResult = self.processor.run(event, context)
        log_outcomes(self.logger, result)
        return result

    # ------------------------------------------------------------ patterns
    def transaction(self) -> Transaction:
        """Business writes and job enqueues in one DynamoDB transaction (the outbox).

        Nothing is written until the ``with`` block ends (``sqsjobs.workflows._outbox.Transaction`` shows a commit).

        Example:
            >>> tx = JobApp(queue_url="https://sqs.example/q").transaction()
            >>> tx.put("orders", {"pk": "order#7"}, condition="attribute_not_exists(pk)")
            >>> len(tx.items), tx.committed
            (1, False)
        """
        from sqsjobs.workflows._outbox import Transaction

        return Transaction(self)

    # ------------------------------------------------------------ lifecycle (docs/jobs.md "Job lifecycle")
    def status(self, key: str) -> JobStatus | None:
        """What happened to the job of ``key``: its state, attempts, last error, result and times.

        ``None`` when no delivery ever claimed the key (enqueueing writes nothing).
        One consistent read of the key's record.

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
            >>> app.status("invoice-email:42") is None
            True
        """
        from sqsjobs.worker import _job_records as guard

        return guard.status(self.store, key)

    def cancel(self, key: str, reason: str | None = None) -> str:
        """Cancel the job of ``key``: a later delivery of it is acknowledged without running.

        Returns ``"cancelled"`` (it had not finished), ``"not_found_but_cancelled"``
        (no delivery yet: the marker waits for it), ``"running"`` (it runs right
        now: it is flagged, and may stop by polling ``sqsjobs.cancel_requested()``;
        it is never killed) or ``"already_finished"``. One conditional write (two
        when it is running); with a schedule group, the key's pending delayed
        enqueue is deleted too (after the marker, so a delivery racing the
        delete is acknowledged without running).

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
            >>> app.cancel("invoice-email:42", reason="customer closed the account")
            'not_found_but_cancelled'
            >>> app.status("invoice-email:42").state, app.cancel("invoice-email:42")
            ('cancelled', 'already_finished')
        """
        from sqsjobs._errors import StoreError
        from sqsjobs.store._lease import LeaseState, expiry
        from sqsjobs.worker import _job_records as guard

        key = guard.checked_key(key)
        if reason is not None and not isinstance(reason, str):
            raise ConfigurationError(f"cancel: reason must be text, got {reason!r}")
        now = self.clock()
        written = self.store.write(guard.cancel_marker(key, now=now, expires_at=expiry(now, self.settings.record_ttl),
                                                       reason=(reason or "")[:guard.MAX_ERROR_TEXT] or None))
        if written.error is not None:
            raise StoreError(written.error)
        if self.settings.schedule_group:
            self.unschedule(key)
        if written.ok:
            return (guard.CancelResult.CANCELLED if written.item is not None else guard.CancelResult.NOT_FOUND).value
        found = written.item
        if found is not None and found.state is LeaseState.HELD:
            flagged = self.store.write(guard.cancel_request(key, now=now))
            if flagged.error is not None:
                raise StoreError(flagged.error)
            if flagged.ok:
                return guard.CancelResult.RUNNING.value
            return self.cancel(key, reason)  # it finished (or died) in between: look again
        return guard.CancelResult.ALREADY_FINISHED.value

    # ------------------------------------------------------------ groups and chains (docs/groups.md)
    def group(self, on_success: JobMessage | None = None, on_complete: JobMessage | None = None,
              name: str | None = None) -> Group:
        """A job group: add members, ``enqueue()``; ``on_success``/``on_complete`` run once when they are done.

        ``on_success`` runs when every member succeeded, ``on_complete`` when
        every member is terminal (succeeded, dead-lettered, cancelled or expired).

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
            >>> @app.job("report", key="report:{run}")
            ... def report(run: str) -> None: ...
            >>> app.group(on_success=report.message(run="jan"), name="january").name
            'january'
            >>> app.group(on_complete="report:jan")
            Traceback (most recent call last):
            ...
            sqsjobs.GroupError: on_complete must be a job message (job.message(...)), got str
        """
        from sqsjobs.workflows._groups import Group

        return Group(app=self, on_success=on_success, on_complete=on_complete, name=name)

    def group_status(self, group_id: str) -> GroupStatus | None:
        """The group's counts (total, pending, succeeded, failed) and state, or None when there is no such group.

        One consistent read of the head and one of its counter shards.

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> JobApp(queue_url="https://sqs.example/q", store=InMemoryStore()).group_status("no-such-group") is None
            True
        """
        from sqsjobs.workflows._groups import GroupRecords

        return GroupRecords(self.store, ttl=self.settings.record_ttl).status(group_id)

    def cancel_group(self, group_id: str, reason: str | None = None) -> CancelledGroup:
        """Cancel a running group: its pending members are acknowledged without running, and no callback runs.

        Each member's key gets the lifecycle's cancel marker (``app.cancel``);
        a member running now is flagged for ``cancel_requested()``. A group
        that already finished is left as it is. ``GroupError`` when there is
        no such group.
        """
        from sqsjobs.workflows._groups import MAX_NAME, GroupRecords

        if reason is not None and not isinstance(reason, str):
            raise ConfigurationError(f"cancel_group: reason must be text, got {reason!r}")
        if not isinstance(group_id, str):
            from sqsjobs._errors import GroupError

            raise GroupError(f"a group id is text, got {type(group_id).__name__}")
        return GroupRecords(self.store, ttl=self.settings.record_ttl).cancel(
            group_id, now=self.clock(), reason=(reason or "")[:MAX_NAME] or None)

    def chain(self, *steps: JobMessage, name: str | None = None) -> Chain:
        """Jobs that run one after another, each once the previous one succeeded; ``enqueue()`` starts it.

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
            >>> @app.job("fetch", key="fetch:{feed}")
            ... def fetch(feed: int) -> None: ...
            >>> len(app.chain(fetch.message(feed=1), fetch.message(feed=2), name="feeds").messages)
            2
        """
        from sqsjobs.workflows._chains import Chain

        return Chain(app=self, steps=steps, name=name)

    def chain_status(self, chain_id: str) -> ChainStatus | None:
        """Where the chain is (its step, its state), or where it stopped and why; None when there is no such chain."""
        from sqsjobs.workflows._chains import ChainRecords

        return ChainRecords(self.store, ttl=self.settings.record_ttl).status(chain_id)

    def run_status(self, job: str, run_id: str) -> RunStatus | None:
        """Where chunked run ``run_id`` of ``job`` is (pages done, cursor, times), or None.

        Example:
            >>> app = JobApp()
            >>> @app.job("reindex-products", key="reindex-products:{run_id}:{cursor}", chunked=True)
            ... def reindex(run_id: str, cursor: int = 0) -> int | None:
            ...     return None if cursor >= 1000 else cursor + 500
            >>> with app.testing() as t:
            ...     _ = reindex.start(run_id="r1"), t.drain()
            ...     app.run_status("reindex-products", "r1").pages_done
            3
        """
        from sqsjobs.workflows._chunked import RunStore

        return RunStore(self.store, ttl=self.settings.record_ttl).status(job, run_id)

    def fire_schedule(self, event: Any, context: Any = None) -> dict[str, Any]:
        """The scheduler's Lambda handler body: fire the event's job once per period.

        Example:
            >>> def handler(event, context):  # handlers/scheduler.py
            ...     return app.fire_schedule(event, context)
        """
        return self.scheduler.handle(event, context)

    @property
    def scheduler(self) -> Scheduler:
        """The lease-guarded scheduler (built on first use)."""
        if self._scheduler is None:
            from sqsjobs.schedules._periodic import Scheduler

            self._scheduler = Scheduler(self)
        return self._scheduler

    # ------------------------------------------------------------ collaborators (lazy)
    @with_block("app.use(...)")  # a call outside `with` is an error, not a silent no-op (sqsjobs._with_block)
    @contextmanager
    def use(
        self,
        *,
        store: LeaseStore | None = None,
        sqs_client: SQSClient | None = None,
        dynamodb_client: DynamoDBClient | None = None,
        clock: Callable[[], float] | None = None,
        random: RandomSource | None = None,
        sleep: Callable[[float], None] | None = None,
        emit_metrics: Callable[[str], None] | None = None,
        settings: Mapping[str, Any] | None = None,
        scheduler_client: EventBridgeSchedulerClient | None = None,
    ) -> Iterator[JobApp]:
        """Swap collaborators (and settings) for the ``with`` block, then put everything back.

        This is how a test drives an app whose jobs are declared at import (``handlers.app:app``)
        without touching its private state; ``sqsjobs.testing`` builds on it. Whatever was built
        from the old collaborators (the batch processor, the producer, the scheduler) is rebuilt
        from the new ones, and rebuilt again afterwards.

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> with app.use(store=InMemoryStore(), settings={"max_attempts": 3}):
            ...     app.settings.max_attempts, type(app.store).__name__
            (3, 'InMemoryStore')
            >>> app.settings.max_attempts
            5
        """
        saved = dict(vars(self))
        try:
            if settings:
                self.settings = self.settings.with_overrides(**settings)
            for name, value in (("_store", store), ("_sqs", sqs_client), ("_dynamodb", dynamodb_client),
                                ("clock", clock), ("random", random), ("sleep", sleep),
                                ("emit_metrics", emit_metrics), ("_scheduler_client", scheduler_client)):
                if value is not None:
                    setattr(self, name, value)
            self._forget_built()
            yield self
        finally:
            jobs, schedules, limiters = self.jobs, self.schedules, self.limiters
            vars(self).clear()
            vars(self).update(saved)
            # Jobs declared inside the block stay declared: the registry is not a collaborator.
            self.jobs, self.schedules, self.limiters = jobs, schedules, limiters

    def testing(self, **options: Any) -> AbstractContextManager[JobTester]:
        """Run this app's jobs in-process for a test: an in-memory store, a recording fake SQS, a manual clock.

        Everything is put back afterwards. ``options`` are those of ``sqsjobs.testing.use``.

        Example:
            >>> app = JobApp()
            >>> @app.job("greet", key="greet:{user_id}")
            ... def greet(user_id: int) -> None: ...
            >>> with app.testing() as t:
            ...     greet.enqueue(user_id=7)
            ...     [b.outcome.value for r in t.drain() for b in r.deliveries], t.enqueued()[0].key
            'fake-000001'
            (['succeeded'], 'greet:7')
        """
        from sqsjobs._with_block import Block
        from sqsjobs.testing.tester import use

        return Block(self, use(self, **options), "app.testing()")  # outside `with`: an error (_with_block)

    def _forget_built(self) -> None:
        """Drop what was built from the collaborators, so it is built again from the current ones."""
        self._producer = None
        self._router = None
        self._processor = None
        self._scheduler = None
        self._dispatcher = None
        self._one_time_schedules = None

    @property
    def sqs(self) -> SQSClient:
        """The SQS client (created on first use unless injected)."""
        check_entered(self)
        if self._sqs is None:
            from sqsjobs._clients import sqs_client

            self._sqs = sqs_client()
        return self._sqs

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The DynamoDB client (created on first use unless injected)."""
        check_entered(self)
        if self._dynamodb is None:
            from sqsjobs._clients import dynamodb_client

            self._dynamodb = dynamodb_client()
        return self._dynamodb

    @property
    def store(self) -> LeaseStore:
        """The idempotency store: DynamoDB on ``SQSJOBS_TABLE`` unless one was injected."""
        check_entered(self)
        if self._store is None:
            from sqsjobs.store._dynamodb import DynamoDBStore

            self._store = DynamoDBStore(self.dynamodb, self.settings.require("table_name"))
        return self._store

    @property
    def producer(self) -> Producer:
        """The producer for the default jobs queue."""
        if self._producer is None:
            # The router checks the queue's URL first: an unconfigured app says so before a client asks for a region.
            self._producer = self.router.producer(DEFAULT_QUEUE)
        return self._producer

    @property
    def scheduler_client(self) -> EventBridgeSchedulerClient:
        """The EventBridge Scheduler client for delayed jobs (created on first use unless injected)."""
        check_entered(self)
        if self._scheduler_client is None:
            from sqsjobs._clients import scheduler_client

            self._scheduler_client = scheduler_client()
        return self._scheduler_client

    @property
    def one_time_schedules(self) -> OneTimeSchedules:
        """The schedule group delayed jobs wait in; ``ConfigurationError`` naming the setting when there is none."""
        if self._one_time_schedules is None:
            from sqsjobs.schedules._one_time import OneTimeSchedules

            self._one_time_schedules = OneTimeSchedules.of_settings(
                self.settings, clock=self.clock, client_factory=lambda: self.scheduler_client)
        return self._one_time_schedules

    @property
    def dispatcher(self) -> Dispatcher:
        """Sends each message to SQS or into a schedule, by when it is due."""
        if self._dispatcher is None:
            from sqsjobs.enqueue._dispatch import Dispatcher

            self._dispatcher = Dispatcher(
                settings=self.settings, router=self.router, schedules=lambda: self.one_time_schedules,
                clock=self.clock, emit=self.emit_metrics,
                warn=lambda text, fields: self.logger.warning(text, extra=fields),
            )
        return self._dispatcher

    @property
    def router(self) -> QueueRouter:
        """Sends each message to its job's queue (one producer per queue, built on first use)."""
        if self._router is None:
            from sqsjobs.enqueue._producer import Producer
            from sqsjobs.enqueue._routing import QueueRouter

            self._router = QueueRouter(self.settings.queue_urls(), make_producer=lambda url: Producer(
                self.sqs, url, random=self.random, sleep=self.sleep, max_message_bytes=self.settings.max_message_bytes))
        return self._router

    @property
    def logger(self) -> Any:
        """A Powertools ``Logger`` (JSON lines); jobs may log through it to get the record's fields."""
        if self._logger is None:
            from aws_lambda_powertools import Logger

            self._logger = Logger(service=self.settings.service)
        return self._logger

    @property
    def processor(self) -> Any:
        """The batch processor (built once per cold start)."""
        if self._processor is None:
            from sqsjobs.worker._consumer import JobBatchProcessor

            self._processor = JobBatchProcessor(
                settings=self.settings, jobs=self.jobs, store=self.store, sqs=lambda: self.sqs, clock=self.clock,
                random=self.random, logger=self.logger, emit=self.emit_metrics, limiters=self.limiters,
                sleep=self.sleep,
                schedules=self.one_time_schedules if self.settings.schedule_group else None,
            )
        return self._processor


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
    from sqsjobs._errors import PermanentError, RetryableError

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
