"""A job message ready to send: body, key and the SQS parameters around it.

Message attributes named ``sqsjobs.*`` belong to the framework: the producer
sets ``sqsjobs.job`` and ``sqsjobs.trace_id`` from the message's fields, the
worker writes the others when it dead-letters, and ``sqsjobs redrive`` and
``sqsjobs status`` trust them. A message refuses any extra attribute in that
namespace (:class:`~sqsjobs.ReservedAttributeError`), so no producer can
choose where a dead letter is redriven or how often it was.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from sqsjobs._errors import ReservedAttributeError
from sqsjobs._settings import DEFAULT_QUEUE

if TYPE_CHECKING:
    from datetime import datetime, timedelta

    from sqsjobs._job_options import JobOptions
    from sqsjobs.enqueue._envelope import CallbackTo

#: the attribute namespace only sqsjobs writes (compared without case: SQS names are case-sensitive, people are not)
RESERVED_PREFIX = "sqsjobs."
ATTR_JOB = "sqsjobs.job"
ATTR_TRACE_ID = "sqsjobs.trace_id"
#: set by the worker on a message it re-sent instead of letting SQS's redrive move it
ATTR_RESENDS = "sqsjobs.resends"
#: on a finish copy (worker/_decision.py): the lease of the run that succeeded, and the result it stored
ATTR_FINISH = "sqsjobs.finish"
ATTR_RESULT = "sqsjobs.result"
#: on a dead letter's copy (re-sent at its backstop while a follow-up of it failed): the message its record
#: dead-lettered; the copy's claim is refused as that message's would be (store/_lease_ops.py LETTERS)
ATTR_LETTER = "sqsjobs.letter"
#: on a deferred job's copy: the start slot it reserved of each rate limiter (flow/_schedule.py)
ATTR_SLOTS = "sqsjobs.slots"
#: SQS's largest DelaySeconds; longer delays need a scheduler, not a queue.
MAX_DELAY_SECONDS = 900


class MessageSource(Protocol):
    """The job a message was built by, as the enqueue side reads it (``_job.Job`` is one)."""

    @property
    def name(self) -> str: ...

    @property
    def options(self) -> JobOptions: ...


@dataclass(frozen=True, kw_only=True)
class EnqueueRequest:
    """One ``job.enqueue(...)`` call as the job hands it to its runtime (``Runtime.enqueue``): the arguments and
    the enqueue's options, not yet checked (``Job.message`` checks them)."""

    args: dict[str, Any]
    delay: float | timedelta = 0
    eta: datetime | None = None
    replace: bool = False
    group: str | None = None
    trace_id: str | None = None
    expires_in: float | None = None
    tenant: str | None = None
    #: overrides the job's debounce window (``enqueue/_debounce.py``)
    debounce: float | None = None
    #: the workflow awaiting the request (``workflows/_callbacks.py``)
    callback: CallbackTo | None = None


@dataclass(frozen=True, kw_only=True)
class JobMessage:
    """One message for the jobs queue, built by ``Job.message(...)``.

    Example:
        >>> m = JobMessage(job="invoice-email", key="invoice-email:42", body="{}")
        >>> m.dedup_id == JobMessage(job="x", key="invoice-email:42", body="[]").dedup_id
        True

        Extra attributes may be anything outside the ``sqsjobs.`` namespace:

        >>> sorted(JobMessage(job="a", key="a:1", body="{}", extra_attributes={"tenant": "acme"}).attributes())
        ['sqsjobs.job', 'tenant']
    """

    job: str
    key: str
    body: str
    #: SQS ``DelaySeconds`` (0..900)
    delay: int = 0
    group: str | None = None
    trace_id: str | None = None
    extra_attributes: dict[str, str] = field(default_factory=dict)
    #: when it is due (epoch seconds) if that is beyond SQS's 900 s: it waits in a one-time schedule
    due_at: float | None = None
    #: a pending schedule of the same key is moved (or, for a message sent now, deleted) instead of kept
    replace: bool = False
    #: the name of the queue it goes to (``sqsjobs.enqueue._routing``; ``"default"`` is ``SQSJOBS_QUEUE_URL``)
    queue: str = DEFAULT_QUEUE
    #: a standard queue's ``MessageGroupId`` (SQS fair queues); never set on a FIFO queue
    tenant: str | None = None
    #: the job that built it (``Job.message``); groups and chains check members against their app with it
    source: MessageSource | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        reserved = sorted(n for n in self.extra_attributes if n.lower().startswith(RESERVED_PREFIX))
        if reserved:
            raise ReservedAttributeError(
                f"job {self.job!r}: extra attribute(s) {', '.join(reserved)} are in the reserved "
                f"{RESERVED_PREFIX!r} namespace; the producer sets {ATTR_JOB} and {ATTR_TRACE_ID} itself "
                "(from job and trace_id), the worker writes the rest: rename yours (e.g. 'app.source')"
            )

    @property
    def dedup_id(self) -> str:
        """FIFO deduplication id: a hash of the idempotency key (SQS allows 128 chars)."""
        return hashlib.sha256(self.key.encode("utf-8")).hexdigest()

    def attributes(self) -> dict[str, dict[str, str]]:
        """SQS ``MessageAttributes``: the job name, the trace id, and any extras."""
        attrs = {ATTR_JOB: {"DataType": "String", "StringValue": self.job}}
        if self.trace_id:
            attrs[ATTR_TRACE_ID] = {"DataType": "String", "StringValue": self.trace_id}
        for name, value in self.extra_attributes.items():
            attrs[name] = {"DataType": "String", "StringValue": value}
        return attrs

    def size(self) -> int:
        """Bytes SQS counts against its limits: body plus attribute names, types and values."""
        total = len(self.body.encode("utf-8"))
        for name, attr in self.attributes().items():
            total += len(name) + len(attr["DataType"]) + len(attr["StringValue"].encode("utf-8"))
        return total
