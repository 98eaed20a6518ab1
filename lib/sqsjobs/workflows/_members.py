"""What groups and chains share: checked members, their relation carried in the envelope, messages kept in the table.

A member of a group and a step of a chain is a ``job.message(...)`` of a job
registered on the app. It runs under the key its job declares, like every
other delivery of that key (docs/jobs.md "Keys"): its group or chain is named
in its envelope (``member_of``, ``step_of``), which travels with the message
and is counted when it ends, but never changes the key. So every copy of a
member (duplicate sends, redeliveries, a redrive) and every other path to the
same key (a standalone enqueue, another group) share one record: the job runs
once, and each group counts it once.

The messages a worker sends later (a group's callbacks, a chain's next step)
are kept in the table as JSON (``stored``/``restored``).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqsjobs.enqueue._envelope import MAX_BODY_BYTES, Envelope, MemberOf, StepOf
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.workflows._chunked import ChunkedJob

if TYPE_CHECKING:
    from sqsjobs._job import Job, JobRuntime


def new_id() -> str:
    """A fresh group or chain id (32 hex digits).

    Example:
        >>> len(new_id()), new_id() != new_id()
        (32, True)
    """
    return uuid.uuid4().hex


def job_of(runtime: JobRuntime, message: Any, what: str, error: type[Exception]) -> Job[Any, Any]:
    """The registered job ``message`` was built by; ``error`` says why it is not one.

    Example:
        >>> from sqsjobs import JobApp
        >>> from sqsjobs._errors import GroupError
        >>> app = JobApp(queue_url="https://sqs.example/q")
        >>> job_of(app.runtime, "invoice-email:42", "member", GroupError)
        Traceback (most recent call last):
        ...
        sqsjobs.GroupError: member must be a job message (job.message(...)), got str
    """
    if not isinstance(message, JobMessage):
        raise error(f"{what} must be a job message (job.message(...)), got {type(message).__name__}")
    job = runtime.registry.jobs.get(message.job)
    if job is None or message.source is not job:
        known = ", ".join(sorted(runtime.registry.jobs)) or "none"
        raise error(f"{what} is a message of job {message.job!r}, which is not registered on this app (registered: "
                    f"{known}); build it with job.message(...) of a job of this app")
    if isinstance(job, ChunkedJob):
        raise error(f"{what} is a message of chunked job {job.name!r}, whose run spans many messages: start it from "
                    "a job of the group or chain instead")
    return job


def related(message: JobMessage, what: str, error: type[Exception], *, member_of: MemberOf | None = None,
            step_of: StepOf | None = None, limit: int | None = None) -> JobMessage:
    """``message``, its envelope naming its group or chain (its key unchanged).

    ``limit`` (the app's ``max_message_bytes``): the message as sent is checked as any message is
    (``enqueue/_sizes.py``: the room left for the worker's attributes included), so what cannot be sent is
    refused when it is added, not when the group or chain is enqueued.

    Example:
        >>> from sqsjobs import GroupError
        >>> m = JobMessage(job="ping", key="ping:1", body=Envelope(job="ping", key="ping:1").encode())
        >>> r = related(m, "member", GroupError, member_of=MemberOf("g1", 0, 5))
        >>> r.key, Envelope.decode(r.body).member_of
        ('ping:1', MemberOf(group='g1', shard=0, index=5))
    """
    envelope = replace(Envelope.decode(message.body), member_of=member_of, step_of=step_of)
    body = envelope.encode()
    if len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise error(f"{what}: its body would be over SQS's {MAX_BODY_BYTES} bytes")
    built = replace(message, body=body)
    if limit is not None:
        from sqsjobs.enqueue._sizes import check_message

        check_message(built, limit=limit)
    return built


def stored(message: JobMessage) -> str:
    """A message as JSON, for the table (a callback, a chain's step).

    Example:
        >>> restored(stored(JobMessage(job="ping", key="ping:1", body="{}", delay=5))).delay
        5
    """
    return json.dumps({"job": message.job, "key": message.key, "body": message.body, "delay": message.delay,
                       "group": message.group, "trace_id": message.trace_id,
                       "attributes": message.extra_attributes}, separators=(",", ":"), sort_keys=True)


def restored(text: str) -> JobMessage:
    """The message ``stored`` kept."""
    data = json.loads(text)
    return JobMessage(job=data["job"], key=data["key"], body=data["body"], delay=int(data.get("delay") or 0),
                      group=data.get("group"), trace_id=data.get("trace_id"),
                      extra_attributes=dict(data.get("attributes") or {}))
