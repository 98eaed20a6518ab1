"""The worker's side of groups and chains: a stage (``worker/_stages.py``) run once a batch's records are written.

For a batch without group members or chain steps it does nothing. Otherwise,
after the records and dead letters of the batch are written:

1. each member that ended terminally is counted in its group's shard, once
   (``workflows/_groups.py``: it ran; it was a duplicate of a completed,
   cancelled or dead-lettered key; it expired; it was dead-lettered), all
   counts concurrently, one write each;
2. each group whose shard a count emptied (or found empty) is finished: the
   head's final state, then the callbacks;
3. each chain's next step is sent after a step succeeded or was a duplicate
   of a completed key;
4. a delivery whose count, callback or next step could not be written is
   reported: it goes back, and its redelivery (a duplicate) writes it.

Nothing here raises out of a batch.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from sqsjobs.enqueue._envelope import MemberOf
from sqsjobs.worker._decision import Action
from sqsjobs.worker._delivery import Delivery, Outcome
from sqsjobs.worker._stages import Stage
from sqsjobs.workflows._chains import ChainRecords
from sqsjobs.workflows._groups import Count, Counted, GroupRecords, GroupState, count
from sqsjobs.workflows._members import restored

if TYPE_CHECKING:
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._batch import Batch

#: what a group counts a delivery as, by the delivery's outcome (a duplicate: by the record it found)
OUTCOME_COUNTS = {Outcome.SUCCEEDED: "succeeded", Outcome.CANCELLED: "cancelled", Outcome.EXPIRED: "expired"}


def counts_as(d: Delivery, *, recorded: bool = True) -> str | None:
    """The terminal outcome a group counts ``d`` as, or None while it is not terminal.

    A success whose completion could not be recorded (``recorded=False``) is
    not counted yet: its finish copy records it, and counts it then, so a
    group never reports a member done that its record does not.

    Example:
        >>> d = Delivery.parse({"messageId": "m", "receiptHandle": "r", "body": "{}"}, 0)
        >>> counts_as(d) is None
        True
    """
    if d.action is Action.DEAD_LETTER:
        return "dead_lettered"  # the DLQ has it (a refused send went back before this stage)
    if d.action is not Action.ACK or d.outcome is None:
        return None
    if d.outcome is Outcome.DUPLICATE:
        return d.counts_as or "succeeded"
    if d.outcome is Outcome.SUCCEEDED and not recorded:
        return None
    return OUTCOME_COUNTS.get(d.outcome)


def member_index(member: MemberOf, key: str) -> int:
    """The member's index in its group (a message from before members had one: a stable number from its key)."""
    if member.index is not None:
        return member.index
    return 10_000_000 + int(hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:10], 16)


class WorkflowStage(Stage):
    """Groups' counts and callbacks, chains' next steps (``send`` sends messages to the jobs queue)."""

    def __init__(self, *, store: LeaseStore, send: Callable[[Sequence[JobMessage]], list[bool]], record_ttl: float,
                 clock: Callable[[], float], logger: Any,
                 answer_group: Callable[[str, GroupState, float], str | None] | None = None) -> None:
        self.store = store
        #: answers a finished group's workflow callback (``workflows/_callback_stage.py``): None, or why not yet
        self.answer_group = answer_group
        self.send = send
        self.clock = clock
        self.log = logger
        self.groups = GroupRecords(store, ttl=record_ttl)
        self.chains = ChainRecords(store, ttl=record_ttl)

    def concerns(self, d: Delivery) -> bool:
        return d.envelope is not None and (d.envelope.member_of is not None or d.envelope.step_of is not None)

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        related = [d for d in batch.deliveries if d.envelope is not None
                   and (d.envelope.member_of is not None or d.envelope.step_of is not None)]
        if not related:
            return {}
        failed: dict[int, str] = {}
        settled = self._count(batch, related, failed)
        for group_id in sorted(settled):
            self._finish_group(batch, group_id, [d for d in related if _group_of(d) == group_id], failed)
        self._continue_chains(batch, related, failed)
        return failed

    # ------------------------------------------------------------ counting
    def _count(self, batch: Batch, related: Sequence[Delivery], failed: dict[int, str]) -> set[str]:
        """Count each terminal member once (concurrently); the groups whose shard no member is pending in."""
        counting: list[tuple[Delivery, Count]] = []
        seen: set[tuple[str, int]] = set()
        for d in related:
            member = d.envelope.member_of if d.envelope is not None else None
            outcome = counts_as(d, recorded=batch.writes.failure(d) is None)
            if member is None or outcome is None:
                continue
            index = member_index(member, d.key)
            if (member.group, index) in seen:
                continue
            seen.add((member.group, index))
            counting.append((d, Count(member=MemberOf(member.group, member.shard, index), outcome=outcome)))
        futures = [(d, self.store.run(functools.partial(count, self.store, c, self.log))) for d, c in counting]
        results: list[tuple[Delivery, Counted]] = [(d, future.result()) for d, future in futures]
        settled: set[str] = set()
        for d, result in results:
            if result.error is not None:
                self.log.error("could not count a group member's outcome; its redelivery will",
                               extra={"key": d.key, "error": result.error})
                failed[d.index] = f"its group's count failed ({result.error})"
            elif result.settled:
                settled.add(_group_of(d) or "")
        settled.discard("")
        return settled

    def _finish_group(self, batch: Batch, group_id: str, members: Sequence[Delivery],
                      failed: dict[int, str]) -> None:
        """The head's final state, then the callbacks; on failure the members' redeliveries try again."""
        now = self.clock()
        try:
            state, due = self.groups.due(group_id, now)
        except Exception as error:  # a store failure: the members come back and finish it
            self.log.error("could not finish a group", extra={"group": group_id, "error": str(error)})
            for d in members:
                failed.setdefault(d.index, f"its group could not be finished ({error})")
            return
        if state is None:
            return
        if self.answer_group is not None:
            why = self.answer_group(group_id, state, now)
            if why is not None:  # the members come back and finish it: the workflow first, then the callbacks
                for d in members:
                    failed.setdefault(d.index, why)
                return
        callbacks = [restored(text) for _, text in due]
        if batch.trace is not None:  # each callback's run links to the member runs that finished the group
            done = [d for d in members if d.outcome is not None]
            callbacks = [batch.trace.completed_by(done, m) for m in callbacks]
        sent = self.send(callbacks)
        for (callback, _), ok in zip(due, sent, strict=True):
            if ok:
                self.groups.mark_sent(group_id, callback, now)
                self.log.info("group callback sent", extra={"group": group_id, "callback": callback.value,
                                                            "state": state.value})
        if not all(sent):
            for d in members:
                failed.setdefault(d.index, f"a callback of group {group_id} could not be sent")

    # ------------------------------------------------------------ chains
    def _continue_chains(self, batch: Batch, related: Sequence[Delivery], failed: dict[int, str]) -> None:
        """Send each chain's next step after its step succeeded or was a duplicate of a completed key."""
        steps: dict[str, list[JobMessage] | None] = {}
        sends: list[tuple[Delivery, JobMessage]] = []
        for d in related:
            step = d.envelope.step_of if d.envelope is not None else None
            recorded = batch.writes.failure(d) is None
            if step is None or d.action is not Action.ACK or counts_as(d, recorded=recorded) != "succeeded":
                continue
            try:
                if step.chain not in steps:
                    steps[step.chain] = self.chains.steps(step.chain)
            except Exception as error:
                self.log.error("could not read a chain", extra={"chain": step.chain, "error": str(error)})
                failed.setdefault(d.index, f"its chain could not be read ({error})")
                continue
            messages = steps[step.chain]
            if messages is None or step.step + 1 >= len(messages):
                continue  # the chain's record is gone, or this was its last step
            following = messages[step.step + 1]
            if all(following.key != m.key for _, m in sends):
                if batch.trace is not None:  # the next step's run links to this step's
                    following = batch.trace.completed_by([d], following)
                sends.append((d, following))
        for (d, _), ok in zip(sends, self.send([m for _, m in sends]), strict=True):
            if not ok:
                failed.setdefault(d.index, "its chain's next step could not be sent")


def _group_of(d: Delivery) -> str | None:
    member = d.envelope.member_of if d.envelope is not None else None
    return member.group if member is not None else None
