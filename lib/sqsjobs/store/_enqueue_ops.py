"""The enqueue side's operations on a job's record: debounce and dedupe (``sqsjobs.enqueue._debounce``).

``Debounce`` and ``Reserve`` are written by an enqueue, ``Rearm`` by the stage
that holds back a debounced key's stale copies (``sqsjobs.enqueue._debounce_stage``).
Like the lease's own operations (``sqsjobs.store._lease_ops``) each states a
rule once (``sqsjobs.store._rules``) that both stores run. This module must
not import boto3 or pynamodb.
"""

from __future__ import annotations

from typing import Any

from sqsjobs._frozen import Value
from sqsjobs.store._lease_ops import DONE, HELD, RELEASED
from sqsjobs.store._rules import (
    Add,
    Const,
    Contains,
    Eq,
    Ge,
    ItemMissing,
    Lt,
    Missing,
    Not,
    Or,
    Param,
    Rule,
    Set,
    SetIfMissing,
    all_of,
)


class Debounce(Value, kw_only=True):
    """A debounced enqueue: the key's latest burst token, due time and one more coalesced request (1 write).

    Written whoever holds the lease (a run of the previous burst may be going
    on); an absent item (or one past its TTL) is created RELEASED, an existing one keeps its state.
    Refused only when the record belongs to another job. ``debounce_base``
    is the running count when a burst starts (``starts_burst``), so the
    burst's size is ``debounce_count - debounce_base``.
    """

    key: str
    job: str
    token: str
    now: float
    due: float
    expires_at: float

    def rule(self) -> Rule:
        mine = Or(ItemMissing(), Missing("job"), Eq("job", Param("job")))
        return Rule(condition=mine, updates=(
            Set("job", Param("job")), Set("debounce_token", Param("token")), Set("debounce_due", Param("due")),
            Set("updated_at", Param("now")), Set("expires_at", Param("expires_at")),
            SetIfMissing("status", RELEASED), SetIfMissing("outcome", Const("waiting")),
            SetIfMissing("debounce_base", Const(0)),
            Add("debounce_count", Const(1))), replaces_expired=True, returns="new")

    def values(self) -> dict[str, Any]:
        return {"job": self.job, "token": self.token, "due": self.due, "now": self.now,
                "expires_at": self.expires_at}


class Rearm(Value, kw_only=True):
    """A debounced key whose last run completed another request, and this one waits: DONE → RELEASED.

    For a burst (``token``): only when ``token`` is the latest and the key's
    last completed burst was not it (a burst that completed stays DONE: its
    copies are duplicates). For a request without a token (``request``: a
    member's or a step's number, worker/_request.py): only when the key is
    ``job``'s and that request is not among those it completed
    (``ran_requests``). Never for a cancelled key. The new request starts
    with fresh attempts: ``spent`` (the record's ``attempts`` as read) become
    ``spent_attempts``, as a redrive's do (else every ``max_attempts + 1``-th
    burst of a key was dead-lettered unrun, found by tests/model).
    """

    key: str
    now: float
    token: str | None = None
    request: int | None = None
    job: str | None = None
    spent: int = 0

    def rule(self) -> Rule:
        completed = all_of(Eq("status", DONE), Eq("outcome", Const("succeeded")))
        if self.token is not None:
            this = all_of(Eq("debounce_token", Param("token")), Not(Eq("completed_token", Param("token"))))
        else:
            this = all_of(Eq("job", Param("job")), Not(Contains("ran_requests", Param("request"))))
        return Rule(condition=all_of(completed, this),
                    updates=(Set("status", RELEASED), Set("outcome", Const("waiting")),
                             Set("updated_at", Param("now")), Set("spent_attempts", Param("spent"))), returns="new")

    def values(self) -> dict[str, Any]:
        if self.token is not None:
            return {"token": self.token, "now": self.now, "spent": self.spent}
        return {"request": self.request, "job": self.job, "now": self.now, "spent": self.spent}


class FreshAttempts(Value, kw_only=True):
    """A debounced key's latest burst (``token``) takes a record whose attempts a superseded burst spent.

    The superseded burst never runs again, so its attempts are spent (``spent_attempts``), as a dead letter's
    are: else a burst enqueued while an earlier one kept failing inherited its used-up attempts and was
    dead-lettered unrun (found by tests/model). Only while the record is as read: released, ``token`` the
    latest, ``superseded`` its last claim's, ``attempts`` unchanged.
    """

    key: str
    token: str
    superseded: str
    attempts: int
    now: float

    def rule(self) -> Rule:
        return Rule(condition=all_of(Eq("status", RELEASED), Eq("debounce_token", Param("token")),
                                     Eq("ran_token", Param("superseded")), Eq("attempts", Param("attempts"))),
                    updates=(Set("spent_attempts", Param("attempts")), Set("updated_at", Param("now"))))

    def values(self) -> dict[str, Any]:
        return {"token": self.token, "superseded": self.superseded, "attempts": self.attempts, "now": self.now}


class Reserve(Value, kw_only=True):
    """A deduplicated enqueue takes its key (1 write), unless a request of it is queued or running.

    Refused while another request's reservation is live (``queued_until``
    not passed: a lost message blocks the key until then, no longer), and,
    with ``until_done``, while a run holds the key under a live lease. A
    finished record (DONE, or dead-lettered) frees it; for ``until_started``
    the claim does too (``Stage.claim_data``, worker/_stages.py). An absent item (or one past its TTL) is
    created RELEASED; an existing one keeps its state. The refusal returns the item, naming the request that
    holds it. A cancelled key (DONE ``cancelled``, within its TTL) refuses it too: a request of it would only
    be acknowledged ``cancelled`` (docs/jobs.md "Debounce and dedupe").
    """

    key: str
    job: str
    request: str
    now: float
    until: float
    expires_at: float
    until_done: bool = False

    def rule(self) -> Rule:
        mine = Or(Missing("job"), Eq("job", Param("job")))
        # A finished key (DONE, dead-lettered) is free: a delivery of it would be a duplicate or a redrive. An
        # until_started key is also freed by its claim; a delivery that never claims (a duplicate) leaves it so.
        unreserved = Or(Missing("queued_until"), Lt("queued_until", Param("now")), Eq("status", DONE),
                        Eq("outcome", Const("dead_lettered")))
        running = all_of(Eq("status", HELD), Ge("lease_until", Param("now")))
        cancelled = all_of(Eq("status", DONE), Eq("outcome", Const("cancelled")), Ge("expires_at", Param("now")))
        condition = Or(ItemMissing(), all_of(mine, unreserved, Not(cancelled),
                                             Not(running) if self.until_done else None))
        return Rule(condition=condition, updates=(
            Set("job", Param("job")), Set("queued_id", Param("request")), Set("queued_until", Param("until")),
            Set("queued_mode", Const("until_done" if self.until_done else "until_started")),
            Set("updated_at", Param("now")), Set("expires_at", Param("expires_at")),
            SetIfMissing("status", RELEASED), SetIfMissing("outcome", Const("queued"))), replaces_expired=True)

    def values(self) -> dict[str, Any]:
        return {"job": self.job, "request": self.request, "now": self.now, "until": self.until,
                "expires_at": self.expires_at}

