"""The runtime: what a ``JobApp`` is built from and what it builds, in one object.

A ``JobApp`` (``_app.py``) is a thin façade: it registers jobs, enqueues and
hands batches on. Everything it works with lives here: the settings, the
clock, the random source and the sleep; the AWS clients (injected, or created
on first use from the process's one botocore session, ``_clients.py``, never
at import: a cold start stays cheap); the idempotency store; the producer's
router and dispatcher; the one-time schedules; the batch consumer with its
stages; the scheduler of periodic jobs. Each is built once, on first use, from
the runtime's ``Parts``.

Settings are read on first use too, and what was built is kept with the key
of the environment it was built in (``sqsjobs._environment``: ``AWS_*``,
``SQSJOBS_*``, ``POWERTOOLS_*``). When that environment changed, the settings
are read again and everything not injected is built again, so a client made
for one endpoint, region or set of credentials never serves another: an app
made at import follows the environment each test's fixture sets. In Lambda
the environment never changes and everything is built once. The check is one
scan of the environment, taken once per batch, per enqueue and per operation
(``pinned``), never per message.

Features get the runtime (or a narrow part of it), never the app: a ``Job``
stamps its messages with ``runtime.clock()`` and sends them with
``runtime.send``; groups, chains, chunked runs and the outbox use
``runtime.store``, ``runtime.settings`` and ``runtime.send_many``.

``using(...)`` swaps parts (a test's store, fake SQS and manual clock) for a
``with`` block and puts them back afterwards: the runtime object itself stays
the same, so every job and feature holding it sees the swap, and whatever was
built from the old parts is built again from the new ones.

Example:
    >>> from sqsjobs import InMemoryStore, JobApp
    >>> app = JobApp(queue_url="https://sqs.example/q")
    >>> with app.runtime.using(store=InMemoryStore(), settings={"max_attempts": 3}):
    ...     app.settings.max_attempts, type(app.runtime.store).__name__
    (3, 'InMemoryStore')
    >>> app.settings.max_attempts
    5
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from sqsjobs._environment import environment_key
from sqsjobs._errors import UnknownJobError
from sqsjobs._job_options import check_against_settings
from sqsjobs._settings import DEFAULT_QUEUE
from sqsjobs._with_block import check_entered
from sqsjobs.enqueue._delays import schedule_name
from sqsjobs.enqueue._producer import Producer
from sqsjobs.enqueue._routing import QueueRouter

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient
    from mypy_boto3_scheduler import EventBridgeSchedulerClient
    from mypy_boto3_sqs import SQSClient

    from sqsjobs._backoff import RandomSource
    from sqsjobs._job import Job
    from sqsjobs._settings import Settings, SettingsSource
    from sqsjobs.enqueue._dispatch import Dispatcher
    from sqsjobs.enqueue._message import EnqueueRequest, JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport
    from sqsjobs.flow._limits import Limiter
    from sqsjobs.schedules._one_time import OneTimeSchedules
    from sqsjobs.schedules._periodic import Scheduler, ScheduleSpec
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._consumer import Consumer
    from sqsjobs.workflows._callback_sender import CallbackSender


@dataclass(frozen=True, kw_only=True)
class Parts:
    """What a runtime is built from: settings, time, randomness, and whatever was injected (None: built here)."""

    settings: SettingsSource
    clock: Callable[[], float]
    random: RandomSource
    sleep: Callable[[float], None]
    emit_metrics: Callable[[str], None]
    sqs_client: SQSClient | None = None
    dynamodb_client: DynamoDBClient | None = None
    scheduler_client: EventBridgeSchedulerClient | None = None
    store: LeaseStore | None = None
    logger: Any = None
    #: answers the workflows that await jobs (``workflows/_callback_sender.py``; None: the AWS APIs)
    callback_sender: CallbackSender | None = None


@dataclass
class Registry:
    """What an app declares: its jobs, their schedules, its limiters (the declarations never call AWS)."""

    jobs: dict[str, Job[Any, Any]] = field(default_factory=dict)
    #: periodic jobs (``@app.scheduled``), by job name
    schedules: dict[str, ScheduleSpec] = field(default_factory=dict)
    #: limiters (``app.rate_limit``/``app.concurrency_limit``), by name
    limiters: dict[str, Limiter] = field(default_factory=dict)

    def job(self, name: str) -> Job[Any, Any]:
        """The job registered as ``name``; ``UnknownJobError`` names the known ones otherwise.

        Example:
            >>> Registry().job("invoice-email")
            Traceback (most recent call last):
            ...
            sqsjobs.UnknownJobError: no job named 'invoice-email' is registered (known: none)
        """
        try:
            return self.jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.jobs)) or "none"
            raise UnknownJobError(f"no job named {name!r} is registered (known: {known})") from None


class Configured:
    """What one configuration built: its settings, and each collaborator built from them (by name)."""

    __slots__ = ("built", "checked", "key", "parts", "settings")

    def __init__(self, key: int, parts: Parts, settings: Settings) -> None:
        self.key = key
        self.parts = parts
        self.settings = settings
        self.built: dict[str, Any] = {}
        #: how many of the registry's jobs were checked against these settings
        self.checked = 0


class Runtime:
    """The collaborators of one app, built once each from its ``Parts`` (see the module docstring)."""

    def __init__(self, parts: Parts, registry: Registry) -> None:
        self._parts = parts
        self.registry = registry
        self._configured: Configured | None = None
        self._pin = threading.local()

    # ------------------------------------------------------------ the parts
    @property
    def parts(self) -> Parts:
        """What the runtime is built from now (``using`` swaps them for a block)."""
        return self._parts

    @property
    def settings(self) -> Settings:
        """Where the jobs go and how the worker behaves: read on first use, again when the environment changed."""
        return self._current().settings

    def _current(self) -> Configured:
        """The configuration of now: the pinned one, the one built for this environment, or a new one."""
        pinned: Configured | None = getattr(self._pin, "configured", None)
        if pinned is not None and pinned.parts is self._parts:
            return pinned
        key = environment_key()
        configured = self._configured
        if configured is None or configured.key != key or configured.parts is not self._parts:
            configured = Configured(key, self._parts, self._parts.settings.resolve())
        if configured.checked != len(self.registry.jobs):  # new settings, or jobs declared since
            self._check_jobs(configured)
        self._configured = configured  # only once its jobs passed: a refused configuration is refused at each use
        return configured

    def _check_jobs(self, configured: Configured) -> None:
        """Check the jobs not checked yet against the settings of the code and the environment (``app.use``'s aside)."""
        source = self._parts.settings
        base = source.base() if source.patches else configured.settings
        jobs = list(self.registry.jobs.values())
        for job in jobs[configured.checked:]:
            check_against_settings(job.name, job.options, base)
        configured.checked = len(jobs)

    @contextmanager
    def pinned(self) -> Iterator[Runtime]:
        """One configuration for the block (a batch, an enqueue): the environment is checked once, at its start.

        Example:
            >>> from sqsjobs import JobApp
            >>> app = JobApp(queue_url="https://sqs.example/q")
            >>> with app.runtime.pinned():
            ...     app.settings is app.settings
            True
        """
        if getattr(self._pin, "configured", None) is not None:
            yield self
            return
        self._pin.configured = self._current()
        try:
            yield self
        finally:
            self._pin.configured = None

    def clock(self) -> float:
        """Now, in epoch seconds (the injected clock)."""
        return self._parts.clock()

    @property
    def random(self) -> RandomSource:
        """The random source retries' jitter and probes draw from."""
        return self._parts.random

    def sleep(self, seconds: float) -> None:
        """Wait (the injected sleep: a test's manual clock moves instead)."""
        self._parts.sleep(seconds)

    def emit_metrics(self, line: str) -> None:
        """Write one EMF document (stdout in Lambda, where CloudWatch picks it up)."""
        self._parts.emit_metrics(line)

    def job(self, name: str) -> Job[Any, Any]:
        """The job registered as ``name`` (``UnknownJobError`` otherwise)."""
        return self.registry.job(name)

    # ------------------------------------------------------------ built on first use
    def _once(self, name: str, build: Callable[[], Any]) -> Any:
        built = self._current().built
        made = built.get(name)
        if made is None:
            made = built[name] = build()
        return made

    @property
    def sqs(self) -> SQSClient:
        """The SQS client (injected, else created on first use)."""
        check_entered(self)

        def build() -> SQSClient:
            from sqsjobs._clients import sqs_client

            return self._parts.sqs_client or sqs_client()

        client: SQSClient = self._once("sqs", build)
        return client

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The DynamoDB client (injected, else created on first use)."""
        check_entered(self)

        def build() -> DynamoDBClient:
            from sqsjobs._clients import dynamodb_client

            return self._parts.dynamodb_client or dynamodb_client()

        client: DynamoDBClient = self._once("dynamodb", build)
        return client

    @property
    def scheduler_client(self) -> EventBridgeSchedulerClient:
        """The EventBridge Scheduler client of delayed jobs (injected, else created on first use)."""
        check_entered(self)

        def build() -> EventBridgeSchedulerClient:
            from sqsjobs._clients import scheduler_client

            return self._parts.scheduler_client or scheduler_client()

        client: EventBridgeSchedulerClient = self._once("scheduler_client", build)
        return client

    @property
    def store(self) -> LeaseStore:
        """The idempotency store: DynamoDB on ``SQSJOBS_TABLE`` unless one was injected."""
        check_entered(self)

        def build() -> LeaseStore:
            if self._parts.store is not None:
                return self._parts.store
            from sqsjobs.store._dynamodb import DynamoDBStore

            return DynamoDBStore(self.dynamodb, self.settings.require("table_name"))

        store: LeaseStore = self._once("store", build)
        return store

    @property
    def callback_sender(self) -> CallbackSender:
        """Answers durable callbacks and task tokens (injected, else the AWS APIs; clients made on first answer)."""
        def build() -> CallbackSender:
            if self._parts.callback_sender is not None:
                return self._parts.callback_sender
            from sqsjobs._clients import client
            from sqsjobs.workflows._callback_sender import AwsCallbackSender

            return AwsCallbackSender(client)

        sender: CallbackSender = self._once("callback_sender", build)
        return sender

    @property
    def logger(self) -> Any:
        """A Powertools ``Logger`` (JSON lines); jobs may log through it to get the record's fields."""
        def build() -> Any:
            if self._parts.logger is not None:
                return self._parts.logger
            from aws_lambda_powertools import Logger

            return Logger(service=self.settings.service)

        return self._once("logger", build)

    @property
    def router(self) -> QueueRouter:
        """Sends each message to its job's queue (one producer per queue, built on first use)."""
        def build() -> QueueRouter:
            return QueueRouter(self.settings.queue_urls(), make_producer=lambda url: Producer(
                self.sqs, url, random=self.random, sleep=self.sleep, max_message_bytes=self.settings.max_message_bytes))

        router: QueueRouter = self._once("router", build)
        return router

    @property
    def producer(self) -> Producer:
        """The producer for the default jobs queue."""
        return self.router.producer(DEFAULT_QUEUE)

    @property
    def one_time_schedules(self) -> OneTimeSchedules:
        """The schedule group delayed jobs wait in; ``ConfigurationError`` naming the setting when there is none."""
        def build() -> OneTimeSchedules:
            from sqsjobs.schedules._one_time import OneTimeSchedules

            return OneTimeSchedules.of_settings(self.settings, clock=self.clock,
                                                client_factory=lambda: self.scheduler_client)

        schedules: OneTimeSchedules = self._once("one_time_schedules", build)
        return schedules

    @property
    def dispatcher(self) -> Dispatcher:
        """Sends each message to SQS or into a schedule, by when it is due."""
        def build() -> Dispatcher:
            from sqsjobs.enqueue._dispatch import Dispatcher

            return Dispatcher(settings=self.settings, router=self.router, schedules=lambda: self.one_time_schedules,
                              clock=self.clock, emit=self.emit_metrics,
                              warn=lambda text, fields: self.logger.warning(text, extra=fields))

        dispatcher: Dispatcher = self._once("dispatcher", build)
        return dispatcher

    @property
    def consumer(self) -> Consumer:
        """The batch consumer, with every feature's stage plugged in (built once per cold start)."""
        def build() -> Consumer:
            from sqsjobs.worker._consumer import Consumer
            from sqsjobs.worker._timer import timer_for

            return Consumer(
                settings=self.settings, jobs=self.registry.jobs, store=self.store, sqs=lambda: self.sqs,
                clock=self.clock, random=self.random, logger=self.logger, emit=self.emit_metrics,
                stages=self._stages(), sleep=self.sleep, timer=timer_for(self._parts.clock),
                schedules=(lambda: self.one_time_schedules) if self.settings.schedule_group else None,
            )

        consumer: Consumer = self._once("consumer", build)
        return consumer

    def _stages(self) -> list[Any]:
        """The features that plug into the batch flow, in the order their hooks run (worker/_stages.py).

        Debounce and dedupe, limiters, groups and chains are ``OnDemand``: imported and built when the first
        delivery of a job using them (or a group member, a chain step) arrives, by ``_feature_stages.py``, so
        a worker whose app never uses them loads none of their modules (tests/unit/test_feature_imports.py).
        """
        from sqsjobs.worker._cancellation import CancellationStage
        from sqsjobs.worker._expiry import ExpiryStage
        from sqsjobs.worker._fifo import FifoOrderStage
        from sqsjobs.worker._stages import OnDemand
        from sqsjobs.worker._time_limit import TimeLimitStage

        def on_demand(name: str, concerns: Callable[[Any], bool]) -> OnDemand:
            def build() -> Any:
                from sqsjobs._feature_stages import build_stage  # loaded by the first delivery a feature concerns

                return build_stage(name, self)

            return OnDemand(name, concerns, build)

        return [
            ExpiryStage(record_ttl=self.settings.record_ttl, clock=self.clock),
            FifoOrderStage(),
            on_demand("DebounceStage", _coalesced),
            on_demand("LimitsStage", _limited),
            CancellationStage(self.store),
            TimeLimitStage(),
            on_demand("WorkflowStage", _in_a_workflow),
            on_demand("CallbackStage", _awaited),
        ]

    @property
    def scheduler(self) -> Scheduler:
        """The lease-guarded scheduler of periodic jobs."""
        def build() -> Scheduler:
            from sqsjobs.schedules._periodic import Scheduler

            return Scheduler(self)

        scheduler: Scheduler = self._once("scheduler", build)
        return scheduler

    # ------------------------------------------------------------ what jobs and features need
    def enqueue(self, job: Job[Any, Any], request: EnqueueRequest) -> str:
        """Send one ``job.enqueue(...)`` the way the job's options say (``enqueue/_request.py``)."""
        from sqsjobs.enqueue._request import enqueue  # loaded by the first enqueue: a worker may send none

        return enqueue(self, job, request)

    def send(self, message: JobMessage) -> str:
        """Send a prepared message to its job's queue, or into a schedule when it is due beyond 900 s."""
        return self.dispatcher.send(message)

    def send_many(self, messages: Sequence[JobMessage],
                  on_progress: Callable[[int], None] | None = None) -> EnqueueReport:
        """Send many: full ``SendMessageBatch`` calls, and a schedule each for those due beyond 900 s."""
        return self.dispatcher.send_many(messages, on_progress=on_progress)

    def unschedule(self, key: str) -> bool:
        """Delete the pending schedule of a delayed enqueue of ``key``; False when none was pending.

        Only the delayed enqueue's schedule (one per key) is deleted: ``app.cancel(key)`` also
        unschedules, and keeps any later delivery of the key from running.

        Example:
            >>> from botocore.stub import Stubber
            >>> from sqsjobs import JobApp
            >>> from sqsjobs._clients import scheduler_client
            >>> client = scheduler_client(region_name="eu-west-1")
            >>> app = JobApp(queue_url="https://sqs.example/q", schedule_group="jobs", scheduler_client=client)
            >>> with Stubber(client) as stub:  # the first call finds the schedule, the second finds none
            ...     stub.add_response("delete_schedule", {})
            ...     stub.add_client_error("delete_schedule", "ResourceNotFoundException")
            ...     app.runtime.unschedule("invoice-email:42"), app.runtime.unschedule("invoice-email:42")
            (True, False)
        """
        from sqsjobs.worker._job_records import checked_key  # the worker's: loaded by a batch, not at import

        return self.one_time_schedules.delete(schedule_name(checked_key(key)))

    # ------------------------------------------------------------ swapping parts (tests)
    @contextmanager
    def using(self, *, settings: Mapping[str, Any] | None = None, **parts: Any) -> Iterator[Runtime]:
        """Swap parts (and settings) for the ``with`` block; everything built from them is built again.

        ``parts`` are ``Parts`` fields (``store``, ``sqs_client``, ``clock``...); ``None`` keeps the
        current one. Jobs declared inside the block stay declared: the registry is not a part.
        """
        unknown = set(parts) - {f for f in Parts.__dataclass_fields__ if f != "settings"}
        if unknown:
            raise TypeError(f"using() takes parts {sorted(Parts.__dataclass_fields__)}, not {sorted(unknown)}")
        saved = (self._parts, self._configured)
        changed = {name: value for name, value in parts.items() if value is not None}
        if settings:
            changed["settings"] = self._parts.settings.patched(settings)
        self._parts, self._configured = replace(self._parts, **changed), None
        try:
            yield self
        finally:
            self._parts, self._configured = saved


# ---------------------------------------------------------------- which deliveries a feature's stage concerns
# Each answers as its stage's ``concerns`` does (enqueue/_debounce_stage.py, flow/_stage.py,
# workflows/_stage.py) without importing the feature: the stage is built (_feature_stages.py) on the first that holds.
def _coalesced(d: Any) -> bool:
    return d.job is not None and (d.job.options.sets("debounce") or d.job.options.sets("dedupe"))


def _limited(d: Any) -> bool:
    return d.job is not None and d.job.options.sets("limits")


def _in_a_workflow(d: Any) -> bool:
    return d.envelope is not None and (d.envelope.member_of is not None or d.envelope.step_of is not None)


def _awaited(d: Any) -> bool:
    return d.envelope is not None and d.envelope.callback is not None
