"""A job group on the producer's side: ``app.group(...)`` collects members, ``enqueue()`` writes and sends.

The records it writes and how its members are counted are
:mod:`sqsjobs.workflows._groups` (the worker's side); this module only checks
what the caller adds and sends it, records first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqsjobs._errors import EnqueueError, GroupError
from sqsjobs.enqueue._envelope import MAX_MEMBER_INDEX, CallbackTo, MemberOf, as_callback
from sqsjobs.workflows._groups import MAX_CALLBACK_BYTES, MAX_NAME, MAX_SHARDS, Callback, GroupRecords, shard_count
from sqsjobs.workflows._members import job_of, new_id, related, stored

if TYPE_CHECKING:
    from sqsjobs._job import JobRuntime
    from sqsjobs.enqueue._message import JobMessage

__all__ = ["Group"]


@dataclass(kw_only=True)
class Group:
    """Jobs that run on their own and report together: ``app.group(...)`` builds one.

    ``add`` and ``add_many`` take ``job.message(...)``s of jobs registered on
    the app and return each member's key (the key its job declares);
    ``enqueue()`` writes the group's records and sends the members, and
    returns the group's id. A group's members are fixed once ``enqueue()``
    was called.

    Example:
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
        >>> @app.job("resize", key="resize:{image_id}")
        ... def resize(image_id: int) -> None: ...
        >>> group = app.group(name="thumbnails")
        >>> group.add(resize.message(image_id=1))
        'resize:1'
        >>> group.add(resize.message(image_id=1))
        Traceback (most recent call last):
        ...
        sqsjobs.GroupError: group thumbnails: 'resize:1' is already a member; each member needs its own key
    """

    runtime: JobRuntime = field(repr=False)
    on_success: JobMessage | None = None
    on_complete: JobMessage | None = None
    name: str | None = None
    #: the workflow that awaits the whole group: answered once, with the counts, when no member is pending
    callback: CallbackTo | None = None
    id: str = field(default_factory=new_id)
    _members: list[JobMessage] = field(default_factory=list, init=False, repr=False)
    _keys: set[str] = field(default_factory=set, init=False, repr=False)
    _recorded: bool = field(default=False, init=False, repr=False)
    _unsent: list[JobMessage] | None = field(default=None, init=False, repr=False)
    #: the members as sent (``member_of`` in their envelopes), once ``enqueue()`` built them
    messages: tuple[JobMessage, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        if self.name is not None and (not isinstance(self.name, str) or not 0 < len(self.name) <= MAX_NAME):
            raise GroupError(f"a group's name is text of 1..{MAX_NAME} characters, got {self.name!r}")
        if self.callback is not None:
            as_callback(self.callback, f"group {self.label}", GroupError)
        self._callbacks: dict[Callback, JobMessage] = {}
        for kind, message in ((Callback.ON_SUCCESS, self.on_success), (Callback.ON_COMPLETE, self.on_complete)):
            if message is None:
                continue
            job_of(self.runtime, message, kind.value, GroupError)
            callback = message
            if len(stored(callback).encode("utf-8")) > MAX_CALLBACK_BYTES:
                raise GroupError(f"{kind.value}: the callback's message is over {MAX_CALLBACK_BYTES} bytes; "
                                 "pass ids, not data")
            self._callbacks[kind] = callback

    @property
    def label(self) -> str:
        """The name, else the id (for messages)."""
        return self.name or self.id

    def __len__(self) -> int:
        return len(self._members)

    def add(self, message: JobMessage) -> str:
        """Add one member; returns the key it runs under (its job's own key)."""
        return self.add_many([message])[0]

    def add_many(self, messages: Iterable[JobMessage]) -> list[str]:
        """Add members, all or none (a bad one adds nothing); returns their keys."""
        if self._recorded:
            raise GroupError(f"group {self.label}: enqueue() was called, and a group's members are fixed then; "
                             "start a new group with app.group(...)")
        batch = list(messages)
        keys: list[str] = []
        for i, message in enumerate(batch):
            what = f"member {len(self._members) + i}"
            job_of(self.runtime, message, what, GroupError)
            key = message.key
            if key in self._keys or key in keys:
                raise GroupError(f"group {self.label}: {message.key!r} is already a member; "
                                 "each member needs its own key")
            # Refuse what cannot be sent, with the longest place it may take in the group.
            related(message, what, GroupError, member_of=MemberOf(self.id, MAX_SHARDS - 1, MAX_MEMBER_INDEX),
                    limit=self.runtime.settings.max_message_bytes)
            keys.append(key)
        self._members.extend(batch)
        self._keys.update(keys)
        return keys

    def enqueue(self) -> str:
        """Write the group's records, then send its members; returns the group's id.

        If SQS refuses some members, ``EnqueueError`` says how many; calling
        ``enqueue()`` again sends the rest (a member sent twice runs once).
        """
        if self._unsent == []:
            raise GroupError(f"group {self.label} was enqueued already (id {self.id})")
        if not self._members:
            raise GroupError(f"group {self.label} has no members; add jobs with group.add(job.message(...)) first")
        if not self._recorded:
            shards = shard_count(len(self._members))
            self.messages = tuple(
                related(m, f"member {i}", GroupError, member_of=MemberOf(self.id, i % shards, i))
                for i, m in enumerate(self._members))
            GroupRecords(self.runtime.store, ttl=self.runtime.settings.record_ttl).create(
                self.id, [m.key for m in self.messages], name=self.name, callbacks=self._callbacks,
                now=self.runtime.clock(), awaited_by=self.callback.wire() if self.callback is not None else None)
            self._recorded = True
            self._unsent = list(self.messages)
        pending = self._unsent or []
        report = self.runtime.send_many(pending)
        self._unsent = [pending[f.index] for f in report.failed]
        if self._unsent:
            first = report.failed[0]
            raise EnqueueError(f"group {self.label}: {len(self._unsent)} of {len(self.messages)} members were not "
                               f"sent ({first.code}: {first.message}); call enqueue() again to send them")
        return self.id
