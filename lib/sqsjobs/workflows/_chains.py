"""Chains: jobs that run one after another, each enqueued once the previous one succeeded.

    chain_id = chain(fetch.message(feed=7), parse.message(feed=7), publish.message(feed=7)).enqueue()
    app.chain_status(chain_id)          # where it is, or where it stopped

The chain's record (``chain#<id>`` in the idempotency table, written before
the first step is sent) keeps every step's finished message. Each step runs
under the key its job declares (docs/jobs.md "Keys") and names its chain in
its envelope (``step_of``). When a step succeeds, or turns out to be a
duplicate of a key completed before (by this chain or any other path), the
worker sends the next step; a crash between the two leaves the step's message
on the queue, and its redelivery (a duplicate) sends the next step again. A
repeated send is absorbed by the next step's own key: each step runs once.

A step that is dead-lettered (or cancelled, or expires) stops the chain
there: ``chain_status`` says which step and why. Redriving a dead-lettered
step resumes the chain when it succeeds. The chain's state is read from its
steps' own records, so progress costs nothing beyond each step's completion.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import ChainError, StoreError
from sqsjobs._job import Job
from sqsjobs.enqueue._envelope import RELATION_ID, StepOf
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.store._lease import LeaseStore, expiry
from sqsjobs.store._lease_ops import Close
from sqsjobs.worker._job_records import JobState, JobStatus
from sqsjobs.workflows._members import job_of, new_id, related, restored, stored

if TYPE_CHECKING:
    from sqsjobs._job import JobRuntime

CHAIN_PREFIX = "chain#"
#: the chain's record keeps every step's message; it stays well under DynamoDB's 400 KB item limit
MAX_CHAIN_BYTES = 300_000
MAX_NAME = 256
#: a step that has no record yet
PENDING = "pending"


class ChainState(StrEnum):
    """Where a chain is (``ChainStatus.state``)."""

    RUNNING = "running"  #: a step is queued, running or retrying
    SUCCEEDED = "succeeded"  #: every step succeeded
    STOPPED = "stopped"  #: a step was dead-lettered, cancelled or expired: nothing after it runs


def chain_key(chain_id: str) -> str:
    """The chain's record.

    Example:
        >>> chain_key("8b1e")
        'chain#8b1e'
    """
    return f"{CHAIN_PREFIX}{chain_id}"


@dataclass(frozen=True, kw_only=True)
class StepStatus:
    """One step: its place, job, key and what its record says (``pending``: not arrived yet)."""

    index: int
    job: str
    key: str
    state: str
    last_error: str | None = None


@dataclass(frozen=True, kw_only=True)
class ChainStatus:
    """What ``app.chain_status(id)`` says.

    ``step`` is the step the chain is at (0 = the first; the last one once it
    succeeded); ``stopped_at`` is the step that stopped it, with its
    ``reason`` (the DLQ reason) and ``last_error``.

    Example:
        >>> ChainStatus(id="8b1e", total=3, step=1, state="stopped", stopped_at=1).finished
        True
    """

    id: str
    total: int
    step: int
    state: str
    name: str | None = None
    stopped_at: int | None = None
    reason: str | None = None
    last_error: str | None = None
    steps: tuple[StepStatus, ...] = ()
    created_at: float | None = None

    @property
    def finished(self) -> bool:
        """It succeeded, or it stopped."""
        return self.state != ChainState.RUNNING.value


class ChainRecords:
    """Chains' records in the idempotency table."""

    def __init__(self, store: LeaseStore, *, ttl: float) -> None:
        self.store = store
        self.ttl = ttl

    def create(self, chain_id: str, steps: list[JobMessage], *, name: str | None, now: float) -> None:
        """Write the chain's record, with every step's message."""
        text = json.dumps([stored(s) for s in steps], separators=(",", ":"))
        if len(text.encode("utf-8")) > MAX_CHAIN_BYTES:
            raise ChainError(f"chain {name or chain_id}: its steps' messages take over {MAX_CHAIN_BYTES} bytes; "
                             "pass ids, not data, or chain fewer steps")
        written = self.store.write(Close(key=chain_key(chain_id), now=now, expires_at=expiry(now, self.ttl),
                                         data={"name": name, "total": len(steps), "steps": text, "created_at": now}))
        if written.error is not None:
            raise StoreError(f"chain {chain_id}: could not write its record ({written.error}); nothing was sent")
        if not written.ok:
            raise ChainError(f"chain {chain_id}: its record exists already; start a new chain")

    def steps(self, chain_id: str) -> list[JobMessage] | None:
        """The chain's steps' messages, or None when there is no such chain."""
        record = self.store.get(chain_key(chain_id))
        if record is None:
            return None
        return [restored(text) for text in json.loads(record.get("steps") or "[]")]

    def status(self, chain_id: str) -> ChainStatus | None:
        """Where the chain is, read from its steps' records; None when there is no such chain."""
        if not isinstance(chain_id, str):
            raise ChainError(f"a chain id is text, got {type(chain_id).__name__}")
        if not RELATION_ID.fullmatch(chain_id):
            return None
        record = self.store.get(chain_key(chain_id))
        if record is None:
            return None
        messages = [restored(text) for text in json.loads(record.get("steps") or "[]")]
        found = self.store.get_many([m.key for m in messages])
        steps: list[StepStatus] = []
        for i, m in enumerate(messages):
            item = found.get(m.key)
            status = JobStatus.of(item) if item is not None else None
            steps.append(StepStatus(index=i, job=m.job, key=m.key, state=status.state if status else PENDING,
                                    last_error=status.last_error if status else None))
        at = next((s for s in steps if s.state != JobState.SUCCEEDED.value), None)
        base: dict[str, Any] = {"id": chain_id, "name": record.get("name"), "total": len(steps), "steps": tuple(steps),
                                "created_at": record.get("created_at")}
        if at is None:
            return ChainStatus(**base, step=len(steps) - 1, state=ChainState.SUCCEEDED.value)
        if at.state in (JobState.DEAD_LETTERED.value, JobState.CANCELLED.value, JobState.EXPIRED.value):
            item = found.get(at.key)
            return ChainStatus(**base, step=at.index, state=ChainState.STOPPED.value, stopped_at=at.index,
                               reason=item.get("reason") if item is not None else None, last_error=at.last_error)
        return ChainStatus(**base, step=at.index, state=ChainState.RUNNING.value)


@dataclass(kw_only=True)
class Chain:
    """Jobs to run one after another: ``chain(a.message(...), b.message(...))`` or ``app.chain(...)``.

    Example:
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
        >>> @app.job("fetch", key="fetch:{feed}")
        ... def fetch(feed: int) -> None: ...
        >>> steps = chain(fetch.message(feed=7), fetch.message(feed=8)).messages
        >>> [s.key for s in steps]
        ['fetch:7', 'fetch:8']
    """

    runtime: JobRuntime = field(repr=False)
    steps: tuple[JobMessage, ...]
    name: str | None = None
    id: str = field(default_factory=new_id)
    #: the steps as they are sent (``step_of`` in their envelopes)
    messages: tuple[JobMessage, ...] = field(default=(), init=False)
    _sent: bool = field(default=False, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.steps:
            raise ChainError("a chain needs at least one step: chain(a.message(...), b.message(...))")
        if self.name is not None and (not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_NAME):
            raise ChainError(f"a chain's name is text of 1..{MAX_NAME} characters, got {self.name!r}")
        built = []
        for i, message in enumerate(self.steps):
            job_of(self.runtime, message, f"step {i}", ChainError)
            built.append(related(message, f"step {i}", ChainError, step_of=StepOf(self.id, i),
                                 limit=self.runtime.settings.max_message_bytes))
        self.messages = tuple(built)

    def enqueue(self) -> str:
        """Write the chain's record, send its first step; returns the chain's id."""
        if self._sent:
            raise ChainError(f"chain {self.name or self.id} was enqueued already (id {self.id})")
        ChainRecords(self.runtime.store, ttl=self.runtime.settings.record_ttl).create(
            self.id, list(self.messages), name=self.name, now=self.runtime.clock())
        self._sent = True
        self.runtime.send(self.messages[0])
        return self.id


def chain(*steps: JobMessage, name: str | None = None) -> Chain:
    """A chain of ``steps`` (``job.message(...)``s of jobs registered on one app), ready to ``enqueue()``.

    Example:
        >>> chain()
        Traceback (most recent call last):
        ...
        sqsjobs.ChainError: a chain needs at least one step: chain(a.message(...), b.message(...))
    """
    runtime = next((s.source.runtime for s in steps if isinstance(s, JobMessage) and isinstance(s.source, Job)), None)
    if runtime is None:
        if not steps:
            raise ChainError("a chain needs at least one step: chain(a.message(...), b.message(...))")
        raise ChainError("no step of this chain was built by job.message(...) of a registered job, so it names no "
                         f"app (step 0 is {type(steps[0]).__name__}); build the steps with job.message(...)")
    return Chain(runtime=runtime, steps=tuple(steps), name=name)
