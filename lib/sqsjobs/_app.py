"""``JobApp``: the façade users meet — register jobs, enqueue them, hand batches on.

It holds three things: its ``runtime`` (``_runtime.py``: the settings, the
clock, the clients, the store, the consumer, everything else it works with,
each built once from ``Settings`` and what was injected), the registry of its
jobs, schedules and limiters (in the runtime), and the calls users make.
Building an app and declaring jobs never creates an AWS client, calls AWS or
reads the environment (a cold start stays cheap, and a test's fixture decides
the settings); settings and clients are resolved on first use, and again when
the environment changed (``_runtime.py``), unless they were given.
"""

from __future__ import annotations

import inspect
import random as _random
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

from sqsjobs._errors import ConfigurationError
from sqsjobs._job import Job
from sqsjobs._job_options import declare_options
from sqsjobs._runtime import Parts, Registry, Runtime
from sqsjobs._settings import DEFAULT_QUEUE, Settings, SettingsSource
from sqsjobs._with_block import Block

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

    from sqsjobs._backoff import RandomSource
    from sqsjobs.enqueue._envelope import CallbackTo
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport
    from sqsjobs.flow._limits import ConcurrencyLimit, RateLimit
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._delivery import BatchResult
    from sqsjobs.worker._job_records import JobStatus
    from sqsjobs.workflows._callback_sender import CallbackSender
    from sqsjobs.workflows._chains import Chain, ChainStatus
    from sqsjobs.workflows._chunked import RunStatus
    from sqsjobs.workflows._group import Group
    from sqsjobs.workflows._groups import CancelledGroup, GroupStatus
    from sqsjobs.workflows._outbox import Transaction

P = ParamSpec("P")
R = TypeVar("R")
L = TypeVar("L", "RateLimit", "ConcurrencyLimit")  # names: flow/ is imported when an app declares a limiter


class JobApp:
    """A set of jobs sharing their queues, a DLQ and an idempotency table.

    Settings come from the environment the template sets (``SQSJOBS_QUEUE_URL``,
    ``SQSJOBS_QUEUE_URL_<NAME>``, ``SQSJOBS_DLQ_URL``, ``SQSJOBS_TABLE``,
    ``SQSJOBS_MAX_ATTEMPTS``...); keyword arguments win. ``queues`` names the
    queues jobs may be routed to (``{"default": url, "critical": url}``; the
    default one is ``queue_url``); a name given with ``None`` takes its URL from
    ``SQSJOBS_QUEUE_URL_<NAME>`` and may be declared on jobs without one (its
    sends then fail with a clear error).
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
        settings: Settings | None = None,
        environ: Mapping[str, str] | None = None,
        queues: Mapping[str, str | None] | None = None,
        sqs_client: SQSClient | None = None,
        dynamodb_client: DynamoDBClient | None = None,
        scheduler_client: EventBridgeSchedulerClient | None = None,
        store: LeaseStore | None = None,
        clock: Callable[[], float] = time.time,
        random: RandomSource | None = None,
        sleep: Callable[[float], None] = time.sleep,
        emit_metrics: Callable[[str], None] = print,
        logger: Any = None,
        callback_sender: CallbackSender | None = None,
        **overrides: Any,
    ) -> None:
        """``overrides`` are ``Settings`` fields (``queue_url=``, ``table_name=``...: one clear error for any other)."""
        named = dict(queues or {})
        default = named.pop(DEFAULT_QUEUE, None)
        queue_url = overrides.get("queue_url")
        if default is not None and queue_url is not None and default != queue_url:
            raise ConfigurationError(f"two default queues: queue_url={queue_url!r} and queues['default']={default!r}")
        if settings is not None and (overrides or environ is not None or queues):
            raise ConfigurationError("JobApp(settings=...) takes the settings whole: pass no other setting with it")
        overrides.update(queue_url=queue_url or default, queues=named or None)
        source = SettingsSource(fixed=settings, environ=environ, overrides={} if settings else overrides)
        self.runtime = Runtime(Parts(
            settings=source, clock=clock, random=random if random is not None else _random.Random(), sleep=sleep,
            emit_metrics=emit_metrics, sqs_client=sqs_client, dynamodb_client=dynamodb_client, logger=logger,
            scheduler_client=scheduler_client, store=store, callback_sender=callback_sender), Registry())

    @property
    def settings(self) -> Settings:
        """Where the jobs go and how the worker behaves (the environment, then the keyword arguments)."""
        return self.runtime.settings

    @property
    def jobs(self) -> dict[str, Job[Any, Any]]:
        """The registered jobs, by name."""
        return self.runtime.registry.jobs

    @property
    def logger(self) -> Any:
        """A Powertools ``Logger`` (JSON lines): a job logging through it gets its record's fields on each line."""
        return self.runtime.logger

    # ------------------------------------------------------------ declaring
    def job(self, name: str, *, chunked: bool = False, **options: Any) -> Callable[[Callable[P, R]], Job[P, R]]:
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
        ``batch=N`` makes a batch handler: the function takes a list of up to
        ``N`` items (each one enqueue's arguments, with its own key) and names
        the ones that failed (docs/jobs.md, Batch handlers).

        Example:
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> @app.job("sync-account", key="sync:{account_id}", max_attempts=3, retry_on=(TimeoutError,))
            ... def sync_account(account_id: int) -> None: ...
            >>> sync_account.options.max_attempts
            3
        """
        source = self.runtime.parts.settings  # what the code says; the environment's part is checked on first use
        declared = declare_options(name, source.declared, {"limiters": self.runtime.registry.limiters}, chunked=chunked,
                                   final=source.final, **options)

        def register(fn: Callable[P, R]) -> Job[P, R]:
            if name in self.jobs:
                raise ConfigurationError(f"job {name!r} is already registered (by {self.jobs[name].fn.__qualname__})")
            if chunked:
                from sqsjobs.workflows._chunked import ChunkedJob

                job: Job[P, R] = ChunkedJob(self.runtime, name, fn, declared)
            elif declared.batch is not None:
                from sqsjobs._batch_job import BatchJob

                job = BatchJob(self.runtime, name, fn, declared)
            else:
                job = Job(self.runtime, name, fn, declared)
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
            >>> nightly_report.message(period="2026-08-05").key
            'nightly-report:2026-08-05'
        """
        from sqsjobs.schedules._periodic import PERIOD, schedule_spec

        spec = schedule_spec(name, schedule, period=period, lease_seconds=lease_seconds, enqueue=enqueue)
        if job_options.get("limits") and not enqueue:
            raise ConfigurationError(f"scheduled job {name!r}: limits apply to jobs the worker takes from a queue; "
                                     "pass enqueue=True so the period's run goes through them")
        declare = self.job(name, key=job_options.pop("key", f"{name}:{{{PERIOD}}}"), **job_options)

        def register(fn: Callable[P, R]) -> Job[P, R]:
            if PERIOD not in inspect.signature(fn).parameters:
                raise ConfigurationError(f"scheduled job {name!r}: the function needs a 'period: str' parameter "
                                         "(the period the tick belongs to, e.g. '2026-08-05')")
            job = declare(fn)
            self.runtime.registry.schedules[name] = spec
            return job

        return register

    # ------------------------------------------------------------ limiters (docs/flow-control.md)
    def rate_limit(self, name: str, rate: int, per: float = 1.0) -> RateLimit:
        """Declare a limiter: at most ``rate`` starts in any window of ``per`` seconds, across all invocations.

        Jobs that name it (``limits=[name]``) reserve a start slot before they
        start (slots ``(per + 50 ms) / rate`` apart, one write per batch); a
        job whose slot is more than 2 s off is deferred once, to its slot,
        never using an attempt. Declare it before the jobs that use it.

        Example:
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> app.rate_limit("ses", rate=14)
            RateLimit(name='ses', rate=14, per=1.0)
            >>> @app.job("invoice-email", limits=["ses"])
            ... def send_invoice_email(invoice_id: int) -> None: ...
            >>> send_invoice_email.options.features["limits"]
            ('ses',)
        """
        from sqsjobs.flow._limits import rate_limit  # flow/ is loaded by an app that declares a limiter

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
        known = self.runtime.registry.limiters.get(limiter.name)
        if known is not None and known != limiter:
            raise ConfigurationError(f"limiter {limiter.name!r} is already declared as {known!r}")
        self.runtime.registry.limiters[limiter.name] = limiter
        return limiter

    # ------------------------------------------------------------ producing
    def message(self, name: str, **kwargs: Any) -> JobMessage:
        """Build (and validate) the message for job ``name`` without sending it."""
        return self.runtime.job(name).message(**kwargs)

    def enqueue(self, job: str | JobMessage, **kwargs: Any) -> str:
        """Enqueue job ``job`` (its name) with keyword arguments, or a message built with ``job.message(...)``.

        Returns the SQS message id (a ``ScheduledJob`` past 900 s). With a name it takes the enqueue
        options of ``Job.enqueue`` (``delay``, ``eta``, ``replace``...); a message carries its own.

        Example:
            >>> app = JobApp()
            >>> @app.job("invoice-email", key="invoice-email:{invoice_id}")
            ... def send_invoice_email(invoice_id: int) -> None: ...
            >>> with app.testing():
            ...     app.enqueue("invoice-email", invoice_id=42), app.enqueue(send_invoice_email.message(invoice_id=7))
            ('fake-000001', 'fake-000002')
        """
        if not isinstance(job, str):
            if kwargs:
                raise ConfigurationError("enqueue(message) takes no other arguments: the message carries them")
            from sqsjobs.enqueue._request import send_prepared  # loaded by the first enqueue, not at import

            return send_prepared(self.runtime, job)
        return self.runtime.job(job).enqueue(**kwargs)  # debounce and dedupe are the job's: Job.enqueue has them

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
        from sqsjobs.enqueue._request import send_many

        with self.runtime.pinned():  # one configuration (and one look at the environment) for all of them
            batch = list(messages)
            with progress_bar(len(batch), "enqueueing", show=progress) as advance:
                return send_many(self.runtime, batch, on_progress=advance)

    def transaction(self, *, client: DynamoDBClient | None = None, outbox_table: str | None = None) -> Transaction:
        """Business writes and job enqueues in one DynamoDB transaction (the outbox).

        Nothing is written until the ``with`` block ends (``sqsjobs.workflows._outbox.Transaction`` shows a commit).
        ``client`` (the app's DynamoDB client by default) writes it; ``outbox_table`` overrides
        ``SQSJOBS_OUTBOX_TABLE``.

        Example:
            >>> tx = JobApp(queue_url="https://sqs.example/q").transaction()
            >>> tx.put("orders", {"pk": "order#7"}, condition="attribute_not_exists(pk)")
            >>> len(tx.items), tx.committed
            (1, False)
        """
        from sqsjobs.workflows._outbox import Transaction

        return Transaction(self.runtime, client=client, outbox_table=outbox_table)

    def group(self, on_success: JobMessage | None = None, on_complete: JobMessage | None = None,
              name: str | None = None, callback: CallbackTo | None = None) -> Group:
        """A job group: add members, ``enqueue()``; ``on_success``/``on_complete`` run once when they are done.

        ``on_success`` runs when every member succeeded, ``on_complete`` (and ``callback``, a workflow's:
        docs/durable.md) when every member is terminal (succeeded, dead-lettered, cancelled or expired).

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
        from sqsjobs.workflows._group import Group

        return Group(runtime=self.runtime, on_success=on_success, on_complete=on_complete, name=name, callback=callback)

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

        return Chain(runtime=self.runtime, steps=steps, name=name)

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

        # One configuration for the batch; jobs read their time budget (worker/_budget.time_left) from this context.
        with self.runtime.pinned(), invocation(context, margin=self.settings.deadline_margin):
            result: BatchResult = self.runtime.consumer.run(event, context)
            log_outcomes(self.runtime.logger, result)
        return result

    def fire_schedule(self, event: Any, context: Any = None) -> dict[str, Any]:
        """The scheduler's Lambda handler body: fire the event's job once per period.

        Example:
            >>> def handler(event, context):  # handlers/scheduler.py
            ...     return app.fire_schedule(event, context)
        """
        with self.runtime.pinned():
            return self.runtime.scheduler.handle(event, context)

    # ------------------------------------------------------------ lifecycle (docs/jobs.md "Job lifecycle")
    def status(self, key: str) -> JobStatus | None:
        """What happened to the job of ``key``: its state, attempts, last error, result and times.

        ``None`` when no delivery ever claimed the key (enqueueing writes nothing, except for a
        debounced or deduplicated job: its record then reads ``waiting`` or ``queued``).
        One consistent read of the key's record.

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
            >>> app.status("invoice-email:42") is None
            True
        """
        from sqsjobs.worker import _job_records as guard  # the worker's modules: loaded by a batch, not at import

        return guard.status(self.runtime.store, key)

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
        from sqsjobs._lifecycle import cancel_key

        return cancel_key(self.runtime, key, reason)

    def group_status(self, group_id: str) -> GroupStatus | None:
        """The group's counts (total, pending, succeeded, failed) and state, or None when there is no such group.

        One consistent read of the head and one of its counter shards.

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> JobApp(queue_url="https://sqs.example/q", store=InMemoryStore()).group_status("no-such-group") is None
            True
        """
        from sqsjobs.workflows._groups import GroupRecords

        return GroupRecords(self.runtime.store, ttl=self.settings.record_ttl).status(group_id)

    def cancel_group(self, group_id: str, reason: str | None = None) -> CancelledGroup:
        """Cancel a running group: its pending members are acknowledged without running, and no callback runs.

        Each member's key gets the lifecycle's cancel marker (``app.cancel``);
        a member running now is flagged for ``cancel_requested()``. A group
        that already finished is left as it is. ``GroupError`` when there is
        no such group.
        """
        from sqsjobs._lifecycle import cancel_group

        return cancel_group(self.runtime, group_id, reason)

    def unschedule(self, key: str) -> bool:
        """Delete the pending schedule of a delayed enqueue of ``key`` (docs/delays.md); False when none was pending.

        Unlike ``cancel`` it writes no marker: the key may be enqueued again, and run.
        ``sqsjobs unschedule KEY`` does the same from the shell.
        """
        return self.runtime.unschedule(key)

    def chain_status(self, chain_id: str) -> ChainStatus | None:
        """Where the chain is (its step, its state), or where it stopped and why; None when there is no such chain."""
        from sqsjobs.workflows._chains import ChainRecords

        return ChainRecords(self.runtime.store, ttl=self.settings.record_ttl).status(chain_id)

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

        return RunStore(self.runtime.store, ttl=self.settings.record_ttl).status(job, run_id)

    # ------------------------------------------------------------ tests
    def use(self, *, settings: Mapping[str, Any] | None = None, **parts: Any) -> AbstractContextManager[JobApp]:
        """Swap collaborators (``store=``, ``sqs_client=``, ``clock=``...) and settings for the ``with`` block.

        This is how a test drives an app whose jobs are declared at import (``handlers.app:app``)
        without touching its private state; ``app.testing()`` builds on it. Whatever was built
        from the old collaborators (the consumer, the producer, the scheduler) is built again from
        the new ones, and put back afterwards (``Runtime.using``).

        Example:
            >>> from sqsjobs import InMemoryStore
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> with app.use(store=InMemoryStore(), settings={"max_attempts": 3}):
            ...     app.settings.max_attempts, app.cancel("report:1")
            (3, 'not_found_but_cancelled')
            >>> app.settings.max_attempts
            5
        """
        @contextmanager
        def block() -> Iterator[JobApp]:
            with self.runtime.using(settings=settings, **parts):
                yield self

        return Block(self.runtime, block(), "app.use(...)")  # outside `with`: an error, not a no-op (_with_block)

    def testing(self, **options: Any) -> AbstractContextManager[Any]:
        """Run this app's jobs in-process for a test: an in-memory store, a recording fake SQS, a manual clock.

        Everything is put back afterwards. This runs ``sqsjobs.testing.use`` (its ``options``; it yields a
        ``JobTester``, typed when called as ``use(app)``), found through the package's entry points.

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
        from sqsjobs._harness import harness

        return Block(self.runtime, harness("testing")(self, **options), "app.testing()")  # outside `with`: an error
