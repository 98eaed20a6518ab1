"""What job groups and chains share: checked members, keys scoped to them, messages kept in the table.

A member of a group and a step of a chain is a ``job.message(...)`` of a job
registered on the app. It runs under its own key *scoped* to its group or
chain (``invoice-email:42@group:<id>``, ``invoice-email:42@chain:<id>:1``):

- each group and chain runs its own members, even if the same call ran before
  or belongs to another group (two groups of the same invoices both run);
- every copy of *one* member (duplicate sends, redeliveries, a redrive) shares
  the scoped key, so the guard runs it once and its record is its group's
  anchor: the record says what the group counted, so nothing counts twice.

The messages a worker sends later (a group's callbacks, a chain's next step)
are kept in the table as JSON (``stored``/``restored``), finished and scoped
when the group or chain is enqueued.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from sqsjobs.enqueue._envelope import MAX_BODY_BYTES, MAX_KEY_BYTES, Envelope, MemberOf, StepOf
from sqsjobs.enqueue._message import JobMessage

if TYPE_CHECKING:
    from sqsjobs._app import JobApp
    from sqsjobs._job import Job


def new_id() -> str:
    """A fresh group or chain id (32 hex digits).

    Example:
        >>> len(new_id()), new_id() != new_id()
        (32, True)
    """
    return uuid.uuid4().hex


def job_of(app: JobApp, message: Any, what: str, error: type[Exception]) -> Job[Any, Any]:
    """The registered job ``message`` was built by; ``error`` says why it is not one.

    Example:
        >>> from sqsjobs import JobApp
        >>> from sqsjobs._errors import GroupError
        >>> app = JobApp(queue_url="https://sqs.example/q")
        >>> job_of(app, "invoice-email:42", "member", GroupError)
        Traceback (most recent call last):
        ...
        sqsjobs.GroupError: member must be a job message (job.message(...)), got str
    """
    from sqsjobs.workflows._chunked import ChunkedJob

    if not isinstance(message, JobMessage):
        raise error(f"{what} must be a job message (job.message(...)), got {type(message).__name__}")
    job = app.jobs.get(message.job)
    if job is None or message.source is not job:
        known = ", ".join(sorted(app.jobs)) or "none"
        raise error(f"{what} is a message of job {message.job!r}, which is not registered on this app (registered: "
                    f"{known}); build it with job.message(...) of a job of this app")
    if isinstance(job, ChunkedJob):
        raise error(f"{what} is a message of chunked job {job.name!r}, whose run spans many messages: start it from "
                    "a job of the group or chain instead")
    return job


def scoped(message: JobMessage, key: str, what: str, error: type[Exception], *, member_of: MemberOf | None = None,
           step_of: StepOf | None = None) -> JobMessage:
    """``message`` under ``key``, its envelope naming its group or chain.

    Example:
        >>> from sqsjobs._errors import GroupError
        >>> m = JobMessage(job="ping", key="ping:1", body=Envelope(job="ping", key="ping:1").encode())
        >>> s = scoped(m, "ping:1@group:g1", "member", GroupError, member_of=MemberOf("g1", 0))
        >>> s.key, Envelope.decode(s.body).member_of
        ('ping:1@group:g1', MemberOf(group='g1', shard=0))
    """
    size = len(key.encode("utf-8"))
    if size > MAX_KEY_BYTES:
        raise error(f"{what}: its key scoped to the group or chain is {size} bytes, over DynamoDB's {MAX_KEY_BYTES}; "
                    f"shorten the job's key (now {message.key[:80]!r}...)")
    envelope = replace(Envelope.decode(message.body), key=key, member_of=member_of, step_of=step_of)
    body = envelope.encode()
    if len(body.encode("utf-8")) > MAX_BODY_BYTES:
        raise error(f"{what}: its body would be over SQS's {MAX_BODY_BYTES} bytes")
    return replace(message, key=key, body=body)


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
