"""Job groups: run many jobs, then a callback once, when they are all done.

    group = app.group(on_success=report.message(run="2026-01"), name="January invoices")
    group.add_many(invoice_email.message(invoice_id=i) for i in invoice_ids)
    group_id = group.enqueue()
    app.group_status(group_id)          # total, pending, succeeded, failed, state

``on_success`` runs once when every member succeeded; ``on_complete`` runs
once when every member reached a terminal outcome (succeeded, dead-lettered,
cancelled or expired). docs/groups.md is the user's page; this module is the
group's records and its counting.

**A member is its own key.** A member runs under the key its job declares,
like any other delivery of that key (docs/jobs.md "Keys"): membership travels
in the envelope (``member_of``: the group, its shard, the member's index) and
never changes the key. So a member whose key completed before (standalone, or
in another group) counts as succeeded without running again, and a member
also sent on its own runs once. A group's callbacks run under their own
declared keys too: a weekly group needs ``{week}`` in its callback's key, as
a weekly standalone job does.

**Records** (the idempotency table, under the reserved ``group#`` prefix),
all written before the first member is sent:

- the head ``group#<id>``: name, total, shard count, state, the callbacks'
  messages and when each was sent, created and finished times;
- ``shards`` counter items ``group#<id>#shard#<s>``: how many of its members
  are not yet terminal (``members_pending``), how many ended each way, and
  which members it counted (``counted``, a number set of member indexes; those
  counted as dead-lettered also in ``failed``);
- member lists ``group#<id>#members#<p>``: the members' keys (for
  ``cancel_group`` and the CLI's list of failures; read only then).

**Counting, exactly once.** Member *i* is counted in shard *i mod N*. When a
delivery of a member ends terminally (it ran, it was a duplicate of a
completed, cancelled or dead-lettered key, it expired, it was dead-lettered),
the worker writes one conditional update of its shard: "if *i* is not in
``counted``: add it, and move one from pending to the outcome". A repeat
(duplicates, redeliveries, a redrive) finds *i* counted and changes nothing,
so the count needs no transaction with the job's record and is written after
it; if it fails, the delivery goes back and its redelivery counts it. A
dead-lettered member that is redriven and then succeeds *moves* its count
(``failed`` loses *i*, dead-lettered -1, succeeded +1), once.

**Reaching zero.** The update answers the shard as it became; whoever brings
a shard to zero pending (or finds it there) sums all shards (one
``BatchGetItem``); when none is pending, it moves the head to its final state
and sends the callbacks (a repeated send is a duplicate of the callback's key).

**Shards.** A partition takes 1,000 WCU/s; each shard holds at most
``MEMBERS_PER_SHARD`` (100) members, so its item stays under 1 KB (one WCU a
count) and its lifetime of counts is a tenth of one partition-second; a
group gets ``ceil(total / 100)`` shards, at most ``MAX_SHARDS`` (100, one
``BatchGetItem`` to sum them).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import GroupError, StoreError
from sqsjobs.enqueue._envelope import RELATION_ID, MemberOf
from sqsjobs.store._lease import LeaseItem, LeaseState, LeaseStore, Written, expiry
from sqsjobs.store._lease_ops import Amend, Close
from sqsjobs.worker._job_records import JobState, cancel_marker, cancel_request
from sqsjobs.workflows._members import stored

if TYPE_CHECKING:
    from sqsjobs.enqueue._message import JobMessage

GROUP_PREFIX = "group#"
#: a shard's whole lifetime of counts (2 WCU each) stays under a fifth of one partition-second
MEMBERS_PER_SHARD = 100
#: one BatchGetItem sums every shard
MAX_SHARDS = 100
#: a member list page stays well under DynamoDB's 400 KB item limit
MEMBER_PAGE_BYTES = 300_000
#: a callback's message, kept in the head
MAX_CALLBACK_BYTES = 64 * 1024
MAX_NAME = 256


class GroupState(StrEnum):
    """Where a group is (``GroupStatus.state``)."""

    RUNNING = "running"  #: some members are not terminal yet
    SUCCEEDED = "succeeded"  #: every member succeeded
    COMPLETED_WITH_FAILURES = "completed_with_failures"  #: every member is terminal, some did not succeed
    CANCELLED = "cancelled"  #: ``cancel_group``: pending members are acknowledged without running


class Callback(StrEnum):
    """A group's callbacks."""

    ON_SUCCESS = "on_success"
    ON_COMPLETE = "on_complete"


#: a member's terminal outcome → the shard counter that counts it
COUNTERS: Mapping[str, str] = {
    JobState.SUCCEEDED.value: "members_succeeded",
    JobState.DEAD_LETTERED.value: "members_dead_lettered",
    JobState.CANCELLED.value: "members_cancelled",
    JobState.EXPIRED.value: "members_expired",
}
PENDING = "members_pending"


def head_key(group_id: str) -> str:
    """The group's head record.

    Example:
        >>> head_key("3f2a"), shard_key("3f2a", 7), page_key("3f2a", 0)
        ('group#3f2a', 'group#3f2a#shard#7', 'group#3f2a#members#0')
    """
    return f"{GROUP_PREFIX}{group_id}"


def shard_key(group_id: str, shard: int) -> str:
    """A counter shard of the group."""
    return f"{GROUP_PREFIX}{group_id}#shard#{shard}"


def page_key(group_id: str, page: int) -> str:
    """A page of the group's member list."""
    return f"{GROUP_PREFIX}{group_id}#members#{page}"


def shard_count(total: int) -> int:
    """How many counter shards a group of ``total`` members gets.

    Example:
        >>> shard_count(1), shard_count(100), shard_count(2000), shard_count(1_000_000)
        (1, 1, 20, 100)
    """
    return min(MAX_SHARDS, max(1, math.ceil(total / MEMBERS_PER_SHARD)))


# ---------------------------------------------------------------- status
@dataclass(frozen=True, kw_only=True)
class GroupStatus:
    """What ``app.group_status(id)`` says: the counts over the members, and the group's state.

    ``failed`` counts the members that reached a terminal outcome other than
    success (dead-lettered, cancelled, expired), each also counted on its own.

    Example:
        >>> s = GroupStatus(id="3f2a", total=3, pending=0, succeeded=2, failed=1, state="completed_with_failures",
        ...                 dead_lettered=1)
        >>> s.finished
        True
    """

    id: str
    total: int
    pending: int
    succeeded: int
    failed: int
    state: str
    name: str | None = None
    dead_lettered: int = 0
    cancelled: int = 0
    expired: int = 0
    created_at: float | None = None
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        """No member is pending any more."""
        return self.pending == 0


@dataclass(frozen=True, kw_only=True)
class MemberFailure:
    """A member that did not succeed: its key, job, outcome, DLQ reason and last error."""

    key: str
    job: str | None
    state: str
    reason: str | None
    last_error: str | None


@dataclass(frozen=True, kw_only=True)
class CancelledGroup:
    """What ``app.cancel_group(id)`` did to the members: how many will not run, run now, had finished."""

    id: str
    state: str
    cancelled: int = 0
    running: int = 0
    already_finished: int = 0


def totals(shards: Iterable[LeaseItem]) -> dict[str, int]:
    """The shards' counters summed.

    Example:
        >>> a = LeaseItem(key="a", state=LeaseState.DONE, data={"members_pending": 2, "members_succeeded": 3})
        >>> totals([a, a])["members_pending"], totals([a, a])["members_expired"]
        (4, 0)
    """
    summed = dict.fromkeys([PENDING, *COUNTERS.values()], 0)
    for shard in shards:
        for name in summed:
            summed[name] += int(shard.get(name) or 0)
    return summed


def final_state(counts: Mapping[str, int]) -> GroupState:
    """The state a group whose members are all terminal is in."""
    failed = sum(counts[COUNTERS[o]] for o in COUNTERS if o != JobState.SUCCEEDED.value)
    return GroupState.SUCCEEDED if failed == 0 else GroupState.COMPLETED_WITH_FAILURES


# ---------------------------------------------------------------- counting
#: a shard's number sets: every member it counted, and those counted as dead-lettered (a redrive may move them)
COUNTED, FAILED = "counted", "failed"


@dataclass(frozen=True, kw_only=True)
class Count:
    """One member's terminal outcome, to be counted in its shard once.

    Example:
        >>> first = Count(member=MemberOf("g", 0, 7), outcome="dead_lettered").first()
        >>> first.not_in_set, first.add_to_set, first.add
        ({'counted': 7}, {'counted': 7, 'failed': 7}, {'members_dead_lettered': 1, 'members_pending': -1})
    """

    member: MemberOf
    outcome: str

    @property
    def shard(self) -> str:
        """The shard item it is counted in."""
        return shard_key(self.member.group, self.member.shard)

    @property
    def index(self) -> int:
        """The member's index in its group."""
        if self.member.index is None:
            raise ValueError(f"group {self.member.group}: a member to count needs its index")
        return self.member.index

    def first(self) -> Amend:
        """Count it, if its shard has not counted it yet."""
        index = self.index
        sets = {COUNTED: index, **({FAILED: index} if self.outcome == JobState.DEAD_LETTERED.value else {})}
        return Amend(key=self.shard, add={COUNTERS[self.outcome]: 1, PENDING: -1}, not_in_set={COUNTED: index},
                     add_to_set=sets)

    def move(self) -> Amend:
        """A success of a member counted as dead-lettered (it was redriven): move its count, once."""
        index = self.index
        return Amend(key=self.shard, add={COUNTERS[JobState.SUCCEEDED.value]: 1,
                                          COUNTERS[JobState.DEAD_LETTERED.value]: -1},
                     in_set={FAILED: index}, delete_from_set={FAILED: index})


@dataclass(frozen=True, kw_only=True)
class Counted:
    """What a count did: ``error`` when the store failed; ``settled``: no member of its shard is pending."""

    error: str | None = None
    settled: bool = False
    changed: bool = False


def count(store: LeaseStore, counting: Count, log: Any = None) -> Counted:
    """Count one member's outcome in its shard, once (a repeat changes nothing); one write, two for a move.

    Example:
        >>> from sqsjobs import InMemoryStore
        >>> store = InMemoryStore()
        >>> _ = store.write(Close(key=shard_key("g", 0), now=0.0, expires_at=9e9, data={PENDING: 1}))
        >>> once = Count(member=MemberOf("g", 0, 3), outcome="succeeded")
        >>> count(store, once), count(store, once)
        (Counted(error=None, settled=True, changed=True), Counted(error=None, settled=True, changed=False))
    """
    written = store.write(counting.first())
    if written.error is not None:
        return Counted(error=written.error)
    if written.ok:
        return Counted(settled=_settled(written.item), changed=True)
    shard = written.item
    if shard is None:  # its group's records expired, or a forged body: the job's outcome alone stands
        if log is not None:
            log.warning("group member not counted: its group's shard is missing",
                        extra={"group": counting.member.group, "shard": counting.member.shard})
        return Counted()
    failed = shard.get(FAILED) or frozenset()
    if counting.outcome == JobState.SUCCEEDED.value and counting.index in failed:
        moved = store.write(counting.move())
        if moved.error is not None:
            return Counted(error=moved.error)
        return Counted(settled=_settled(moved.item), changed=moved.ok)
    return Counted(settled=_settled(shard))


def _settled(shard: LeaseItem | None) -> bool:
    return shard is not None and shard.get(PENDING) == 0


# ---------------------------------------------------------------- records
class GroupRecords:
    """A group's records in the idempotency table: written, read, finished, cancelled.

    Example:
        >>> from sqsjobs import InMemoryStore
        >>> records = GroupRecords(InMemoryStore(), ttl=86400)
        >>> records.create("g1", ["a@group:g1", "b@group:g1"], name="demo", callbacks={}, now=0.0)
        >>> records.status("g1").pending, records.status("g1").state
        (2, 'running')
    """

    def __init__(self, store: LeaseStore, *, ttl: float) -> None:
        self.store = store
        self.ttl = ttl

    # ------------------------------------------------------------ creating
    def create(self, group_id: str, keys: list[str], *, name: str | None, callbacks: Mapping[Callback, JobMessage],
               now: float, awaited_by: Mapping[str, Any] | None = None) -> None:
        """Write the member lists, the shards, then the head (the group exists once its head does).

        ``awaited_by``: the workflow callback the head keeps (``workflows/_callback_stage.py``), as its wire.
        """
        expires_at = expiry(now, self.ttl)
        shards = shard_count(len(keys))
        pages = _pages(keys)
        lists = [Close(key=page_key(group_id, p), now=now, expires_at=expires_at,
                       data={"members": json.dumps(page, separators=(",", ":"))}) for p, page in enumerate(pages)]
        sizes = [len(range(s, len(keys), shards)) for s in range(shards)]
        counters = [Close(key=shard_key(group_id, s), now=now, expires_at=expires_at,
                          data={"total": size, PENDING: size}) for s, size in enumerate(sizes)]
        for written in self.store.write_many([*lists, *counters]):
            _created(written, group_id)
        head = {"name": name, "group_state": GroupState.RUNNING.value, "total": len(keys), "shards": shards,
                "member_pages": len(pages), "created_at": now,
                **{c.value: stored(m) for c, m in callbacks.items()},
                **({"workflow_callback": json.dumps(awaited_by, separators=(",", ":"))} if awaited_by else {})}
        _created(self.store.write(Close(key=head_key(group_id), now=now, expires_at=expires_at, data=head)), group_id)

    # ------------------------------------------------------------ reading
    def head(self, group_id: str) -> LeaseItem | None:
        """The head record, or None (never enqueued, or expired)."""
        return self.store.get(head_key(group_id))

    def counts(self, group_id: str, shards: int) -> dict[str, int]:
        """Every shard's counters, summed (one consistent BatchGetItem)."""
        return totals(self.store.get_many([shard_key(group_id, s) for s in range(shards)]).values())

    def status(self, group_id: str) -> GroupStatus | None:
        """The group's counts and state, or None when there is no such group."""
        if not isinstance(group_id, str):
            raise GroupError(f"a group id is text, got {type(group_id).__name__}")
        if not RELATION_ID.fullmatch(group_id):
            return None
        head = self.head(group_id)
        if head is None:
            return None
        c = self.counts(group_id, int(head.get("shards") or 1))
        state = str(head.get("group_state") or GroupState.RUNNING.value)
        if state == GroupState.RUNNING.value and c[PENDING] == 0:
            state = final_state(c).value  # all terminal; the member that emptied the last shard is finishing it
        failed = sum(c[COUNTERS[o]] for o in COUNTERS if o != JobState.SUCCEEDED.value)
        return GroupStatus(id=group_id, name=head.get("name"), total=int(head.get("total") or 0), pending=c[PENDING],
                           succeeded=c[COUNTERS[JobState.SUCCEEDED.value]], failed=failed, state=state,
                           dead_lettered=c[COUNTERS[JobState.DEAD_LETTERED.value]],
                           cancelled=c[COUNTERS[JobState.CANCELLED.value]],
                           expired=c[COUNTERS[JobState.EXPIRED.value]], created_at=head.get("created_at"),
                           finished_at=head.get("finished_at"))

    def member_keys(self, group_id: str) -> list[str]:
        """Every member's key (the member lists; empty when there is no such group)."""
        head = self.head(group_id)
        if head is None:
            return []
        found = self.store.get_many([page_key(group_id, p) for p in range(int(head.get("member_pages") or 0))])
        keys: list[str] = []
        for p in range(int(head.get("member_pages") or 0)):
            page = found.get(page_key(group_id, p))
            keys.extend(json.loads(page.get("members") or "[]") if page is not None else [])
        return keys

    def failures(self, group_id: str) -> list[MemberFailure]:
        """The members that reached a terminal outcome other than success, with why."""
        records = self.store.get_many(self.member_keys(group_id))
        failed = []
        for key in sorted(records):
            item = records[key]
            outcome = item.get("outcome")
            if item.state is not LeaseState.HELD and outcome in COUNTERS and outcome != JobState.SUCCEEDED.value:
                failed.append(MemberFailure(key=key, job=item.get("job"), state=str(outcome),
                                            reason=item.get("reason"), last_error=item.get("last_error")))
        return failed

    # ------------------------------------------------------------ finishing
    def due(self, group_id: str, now: float) -> tuple[GroupState | None, list[tuple[Callback, str]]]:
        """Move the head to its final state once no member is pending; returns it and the callbacks not yet sent.

        ``None``: still running (or no such group). A group finished with
        failures is summed again: a redriven member that succeeded may have
        made it a success. A cancelled group sends no callback.
        """
        for _ in range(3):
            head = self.head(group_id)
            if head is None:
                return None, []
            state = GroupState(head.get("group_state") or GroupState.RUNNING.value)
            if state is GroupState.SUCCEEDED or (state is GroupState.CANCELLED and head.get("finished_at")):
                return state, _unsent(head, state)
            counts = self.counts(group_id, int(head.get("shards") or 1))
            if counts[PENDING] > 0:
                return (None if state is GroupState.RUNNING else state), []
            target = state if state is GroupState.CANCELLED else final_state(counts)
            if target is not state or head.get("finished_at") is None:
                data: dict[str, Any] = {"group_state": target.value, "updated_at": now}
                if head.get("finished_at") is None:
                    data["finished_at"] = now
                moved = self.store.write(Amend(key=head_key(group_id), data=data, expect={"group_state": state.value}))
                if moved.error is not None:
                    raise StoreError(moved.error)
                if not moved.ok:
                    continue  # another finisher (or a cancel) moved it first: look again
                head = replace(head, data={**head.data, **data})
            return target, _unsent(head, target)
        return None, []

    def mark_sent(self, group_id: str, callback: Callback, now: float) -> None:
        """Record that ``callback`` was sent (a send repeated after a crash is absorbed by its key)."""
        self.store.write(Amend(key=head_key(group_id), data={f"{callback.value}_sent": now}))

    # ------------------------------------------------------------ cancelling
    def cancel(self, group_id: str, *, now: float, reason: str | None) -> CancelledGroup:
        """Mark the group cancelled and each member's key cancelled (the lifecycle's marker)."""
        head = self.head(group_id) if RELATION_ID.fullmatch(group_id) else None
        if head is None:
            raise GroupError(f"no group {group_id!r}: it was never enqueued, or its records expired")
        state = GroupState(head.get("group_state") or GroupState.RUNNING.value)
        if state is not GroupState.RUNNING:
            return CancelledGroup(id=group_id, state=state.value)
        moved = self.store.write(Amend(key=head_key(group_id), expect={"group_state": GroupState.RUNNING.value},
                                       data={"group_state": GroupState.CANCELLED.value, "cancelled_at": now,
                                             "updated_at": now}))
        if moved.error is not None:
            raise StoreError(moved.error)
        if not moved.ok:
            return self.cancel(group_id, now=now, reason=reason)
        expires_at = expiry(now, self.ttl)
        keys = self.member_keys(group_id)
        answers = self.store.write_many([cancel_marker(k, now=now, expires_at=expires_at, reason=reason)
                                         for k in keys])
        running = [a.key for a in answers if not a.ok and a.item is not None and a.item.held_live(now)]
        flagged = self.store.write_many([cancel_request(k, now=now) for k in running])
        errors = [a.error for a in [*answers, *flagged] if a.error is not None]
        if errors:
            raise StoreError(f"group {group_id} is cancelled, but {len(errors)} members could not be marked "
                             f"({errors[0]}); call cancel_group again")
        cancelled, flagged_running = sum(a.ok for a in answers), sum(a.ok for a in flagged)
        return CancelledGroup(id=group_id, state=GroupState.CANCELLED.value, cancelled=cancelled,
                              running=flagged_running, already_finished=len(keys) - cancelled - flagged_running)


def _unsent(head: LeaseItem, state: GroupState) -> list[tuple[Callback, str]]:
    wanted: list[Callback] = []
    if state in (GroupState.SUCCEEDED, GroupState.COMPLETED_WITH_FAILURES):
        wanted.append(Callback.ON_COMPLETE)
    if state is GroupState.SUCCEEDED:
        wanted.append(Callback.ON_SUCCESS)
    return [(c, head.get(c.value)) for c in wanted if head.get(c.value) and head.get(f"{c.value}_sent") is None]


def _pages(keys: list[str]) -> list[list[str]]:
    pages: list[list[str]] = [[]]
    size = 0
    for key in keys:
        grow = len(key.encode("utf-8")) + 3
        if pages[-1] and size + grow > MEMBER_PAGE_BYTES:
            pages.append([])
            size = 0
        pages[-1].append(key)
        size += grow
    return pages


def _created(written: Written, group_id: str) -> None:
    if written.error is not None:
        raise StoreError(f"group {group_id}: could not write its records ({written.error}); nothing was sent")
    if not written.ok:
        raise GroupError(f"group {group_id}: its records exist already; start a new group")
