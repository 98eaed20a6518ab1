"""Queue routing: named queues, and every message sent to the queue of its job.

An app has a ``default`` queue (``SQSJOBS_QUEUE_URL``) and any number of
named ones: ``JobApp(queues={"default": url, "critical": url})``, or the
environment ``SQSJOBS_QUEUE_URL_CRITICAL`` (the name upper-cased). A job
names its queue when it is declared (``@app.job(..., queue="critical")``);
an unknown name is refused there, not at the first enqueue. Each queue gets
its own event source mapping (and ``MaximumConcurrency``), so urgent jobs
never wait behind a backlog of bulk ones.

``QueueRouter`` keeps one producer per queue and splits ``send_many`` by
queue, putting the answers back in the caller's order.

A *tenant* (``enqueue(..., tenant="acme")``) becomes the message's
``MessageGroupId`` on a standard queue: SQS fair queues then keep one noisy
tenant from delaying the others. FIFO queues use the group id for ordering,
so a tenant there is refused (``sqsjobs.enqueue._producer``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import ConfigurationError, InvalidArgumentsError
from sqsjobs._job_options import Declaring, JobOption
from sqsjobs._settings import DEFAULT_QUEUE, ENV_QUEUE_URL, ENV_QUEUE_URL_PREFIX, QUEUE_NAME, check_queue_name
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.enqueue._producer import MESSAGE_GROUP_ID, EnqueueReport, FailedEntry

if TYPE_CHECKING:
    from collections.abc import Collection

    from sqsjobs._settings import Settings
    from sqsjobs.enqueue._producer import Producer

__all__ = ["DEFAULT_QUEUE", "QUEUE", "QUEUE_NAME", "TENANT_METRICS", "QueueRouter", "check_queue_name", "check_tenant",
           "job_queue"]


def check_tenant(job: str, tenant: Any) -> str:
    """``tenant`` if SQS takes it as a ``MessageGroupId``, else an ``InvalidArgumentsError``.

    Example:
        >>> check_tenant("sync", "acme")
        'acme'
        >>> check_tenant("sync", "acme corp")
        Traceback (most recent call last):
        ...
        sqsjobs.InvalidArgumentsError: job 'sync': tenant 'acme corp' is not a valid MessageGroupId: ...
    """
    if not isinstance(tenant, str) or not MESSAGE_GROUP_ID.fullmatch(tenant):
        raise InvalidArgumentsError(f"job {job!r}: tenant {tenant!r} is not a valid MessageGroupId: use 1..128 ASCII "
                                    "letters, digits or punctuation (no spaces), e.g. an account id")
    return tenant


def job_queue(job: str, queue: Any, known: Mapping[str, str | None]) -> str:
    """The queue a job declares: ``default`` or a queue the app knows by name.

    Example:
        >>> job_queue("reset", "critical", {"default": None, "critical": "https://q/1/critical"})
        'critical'
        >>> job_queue("reset", "urgent", {"default": None, "critical": "https://q/1/critical"})
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'reset': unknown queue 'urgent' (known: critical, default); pass ...
    """
    if not isinstance(queue, str) or queue not in known:
        hint = ""
        if isinstance(queue, str) and QUEUE_NAME.fullmatch(queue):
            hint = f"; pass JobApp(queues={{{queue!r}: url}}) or set {ENV_QUEUE_URL_PREFIX}{queue.upper()}"
        raise ConfigurationError(f"job {job!r}: unknown queue {queue!r} (known: {', '.join(sorted(known))}){hint}")
    return queue


def _declared_queue(declaring: Declaring, queue: Any) -> str:
    """A job's ``queue=``: a queue name (whether the app knows it: ``_queue_against_settings``)."""
    if not isinstance(queue, str) or (queue != DEFAULT_QUEUE and not QUEUE_NAME.fullmatch(queue)):
        job_queue(declaring.job, queue, {DEFAULT_QUEUE: None})  # not a queue name at all: refused now, with its hint
    return str(queue)


def _queue_against_settings(job: str, queue: str, settings: Settings, final: Collection[str]) -> None:
    """The job's queue is one the app knows, once its ``queues`` are decided (or already named)."""
    if "queues" in final or queue in settings.queue_urls():
        job_queue(job, queue, settings.queue_urls())


def _declared_tenant_metrics(declaring: Declaring, value: Any) -> bool:
    if type(value) is not bool:
        raise ConfigurationError(f"job {declaring.job!r}: tenant_metrics must be True or False, got {value!r}")
    return value


#: the queue the job is sent to (``JobApp(queues=...)``, ``SQSJOBS_QUEUE_URL_<NAME>``)
QUEUE = JobOption("queue", DEFAULT_QUEUE, _declared_queue, against_settings=_queue_against_settings)
#: add a ``Tenant`` dimension (the enqueue's ``tenant=``) to the job's metrics
TENANT_METRICS = JobOption("tenant_metrics", False, _declared_tenant_metrics)


class QueueRouter:
    """Sends each message to its queue's producer (built on first use, one per queue).

    Example:
        >>> router = QueueRouter({"default": "https://sqs.example/1/jobs"}, make_producer=lambda url: None)
        >>> router.url("default")
        'https://sqs.example/1/jobs'
        >>> router.url("critical")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: no URL for queue 'critical' (known: default): pass JobApp(...) or set ...
    """

    def __init__(self, urls: Mapping[str, str | None], *, make_producer: Callable[[str], Producer]) -> None:
        self.urls = dict(urls)
        self._make_producer = make_producer
        self._producers: dict[str, Producer] = {}

    def url(self, queue: str) -> str:
        """The URL of queue ``queue``; a clear error when it has none."""
        url = self.urls.get(queue)
        if not url:
            known = ", ".join(sorted(name for name, u in self.urls.items() if u)) or "none"
            if queue == DEFAULT_QUEUE:  # the one queue every app has: its own setting names it
                from sqsjobs._env_names import did_you_mean

                raise ConfigurationError(f"queue_url is not set: pass queue_url= to JobApp or set {ENV_QUEUE_URL} "
                                         f"(queues with a URL: {known}){did_you_mean(ENV_QUEUE_URL)}")
            raise ConfigurationError(f"no URL for queue {queue!r} (known: {known}): pass JobApp(queues={{{queue!r}: "
                                     f"url}}) or set {ENV_QUEUE_URL_PREFIX}{queue.upper()}")
        return url

    def producer(self, queue: str = DEFAULT_QUEUE) -> Producer:
        """The producer of queue ``queue``."""
        producer = self._producers.get(queue)
        if producer is None:
            producer = self._producers[queue] = self._make_producer(self.url(queue))
        return producer

    def send(self, message: JobMessage) -> str:
        """Send one message to its queue; returns the SQS message id."""
        return self.producer(message.queue).send(message)

    def send_many(self, messages: Sequence[JobMessage],
                  on_progress: Callable[[int], None] | None = None) -> EnqueueReport:
        """Send in full batches per queue; the report's positions are those of ``messages``.

        ``on_progress(n)`` is told after each call how many more messages SQS accepted (``Producer.send_many``).
        """
        progress = {} if on_progress is None else {"on_progress": on_progress}
        by_queue: dict[str, list[int]] = {}
        for i, message in enumerate(messages):
            by_queue.setdefault(message.queue, []).append(i)
        if len(by_queue) <= 1:
            queue = next(iter(by_queue), DEFAULT_QUEUE)
            return self.producer(queue).send_many(messages, **progress)
        ids: dict[int, str] = {}
        failed: list[FailedEntry] = []
        calls = 0
        for queue, positions in by_queue.items():
            report = self.producer(queue).send_many([messages[i] for i in positions], **progress)
            calls += report.calls
            ids.update({positions[i]: message_id for i, message_id in report.message_ids.items()})
            failed += [FailedEntry(index=positions[f.index], key=f.key, code=f.code, message=f.message,
                                   sender_fault=f.sender_fault) for f in report.failed]
        return EnqueueReport(message_ids=dict(sorted(ids.items())), failed=tuple(sorted(failed, key=lambda f: f.index)),
                             calls=calls)
