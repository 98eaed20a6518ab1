"""What the worker does for the jobs of groups and chains, around their records' writes.

The consumer (``consumer.py``) calls three things; for a batch without group
members or chain steps each is a quick no-op:

- ``counting(d, op)`` when it writes a record: a member's terminal write (its
  success, its dead letter) becomes one transaction with its group's count
  (``sqsjobs.workflows._groups.count_written``, on the store's pool like any write);
- ``answered(d, written)`` when a record's write answered;
- ``finish(deliveries)`` once the batch's records are written and before
  anything is acknowledged. It
  1. settles the members that ended without a write of their own: cancelled
     (the lifecycle's marker), expired, or dead-lettered before any claim
     (malformed for this deploy, never started);
  2. finishes each group a member emptied a shard of (the head's final
     state, then the callbacks), and each group of a duplicate whose shard is
     empty (the delivery that emptied it may have died before finishing);
  3. sends each chain's next step after a step's success, or after its
     duplicate when the next step has not arrived;
  4. withholds the acknowledgement of a delivery whose count, callback or
     next step could not be written: its redelivery, a duplicate, does it.

Nothing here raises out of a batch.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from sqsjobs.enqueue._envelope import MemberOf
from sqsjobs.store._lease import (
    Amend,
    Close,
    Complete,
    LeaseState,
    Operation,
    Release,
    TransactedOperation,
    Written,
    expiry,
)
from sqsjobs.worker import _job_records as guard
from sqsjobs.worker._dead_letters import Reason
from sqsjobs.worker._delivery import Delivery, Outcome, State
from sqsjobs.workflows._chains import ChainRecords
from sqsjobs.workflows._groups import PENDING, Count, GroupRecords, count_written, shard_key

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs._backoff import RandomSource
    from sqsjobs._settings import Settings
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.enqueue._producer import Producer
    from sqsjobs.store._lease import LeaseStore

#: outcomes a member's own record write counts
COUNTED_WRITES = frozenset({guard.JobState.SUCCEEDED.value, guard.JobState.DEAD_LETTERED.value})
#: dead letters that never held the key's lease, whose record the member's group count settles
UNCLAIMED_DEAD_LETTERS = frozenset({Reason.MALFORMED, Reason.EXHAUSTED})
#: a withheld delivery comes back after this long (its redelivery is a duplicate that finishes the work)
WITHHELD_DELAY = 5.0


class Followups:
    """The worker's side of groups and chains (``JobBatchProcessor`` builds one)."""

    def __init__(self, *, store: LeaseStore, sqs: Callable[[], SQSClient], settings: Settings,
                 clock: Callable[[], float], random: RandomSource | None, logger: Any) -> None:
        self.store = store
        #: the SQS client, built on first use (as the consumer's): most batches send no callback or next step
        self._sqs = sqs
        self.settings = settings
        self.clock = clock
        self.random = random
        self.log = logger
        self.groups = GroupRecords(store, ttl=settings.record_ttl)
        self.chains = ChainRecords(store, ttl=settings.record_ttl)
        self._producer: Producer | None = None

    def batch(self) -> BatchFollowups:
        """What one batch needs."""
        return BatchFollowups(self)

    def send(self, messages: Sequence[JobMessage]) -> list[bool]:
        """Send ``messages`` to the jobs queue; whether each was sent."""
        if not messages:
            return []
        if self._producer is None:
            from sqsjobs.enqueue._producer import Producer

            if not self.settings.queue_url:
                self.log.error("cannot send a callback or a chain's next step: SQSJOBS_QUEUE_URL is not set")
                return [False] * len(messages)
            self._producer = Producer(self._sqs(), self.settings.queue_url, random=self.random)
        report = self._producer.send_many(list(messages))
        for failed in report.failed:
            self.log.error("could not send a callback or a chain's next step",
                           extra={"key": failed.key, "error": f"{failed.code}: {failed.message}"})
        return [i in report.message_ids for i in range(len(messages))]


class BatchFollowups:
    """Groups and chains for one batch: the counts it started, the groups it emptied."""

    def __init__(self, parent: Followups) -> None:
        self.parent = parent
        self.log = parent.log
        self._lock = threading.Lock()
        #: groups whose shard a count of this batch emptied, or whose counts a redrive moved
        self._touched: set[str] = set()
        #: deliveries whose record write failed (index → error)
        self._failed: dict[int, str] = {}

    # ------------------------------------------------------------ record writes
    def counting(self, d: Delivery, op: Operation) -> Callable[[], Written] | None:
        """The write of ``op`` with its group's count, when ``op`` records a member's terminal outcome."""
        member = d.envelope.member_of if d.envelope is not None else None
        if member is None or not isinstance(op, Complete | Release) or op.data.get("outcome") not in COUNTED_WRITES:
            return None
        outcome = str(op.data["outcome"])
        before = d.previous.get("counted_as") if d.previous is not None else None
        if before == outcome:
            return None  # a redriven member dead-lettered again: counted as that already
        return self._counter(Count(member=member, outcome=outcome, before=before), op)

    def _counter(self, count: Count, record: TransactedOperation) -> Callable[[], Written]:
        def work() -> Written:
            answer, emptied = count_written(self.parent.store, count, record, self.log)
            if answer.ok and (emptied or count.moves):
                with self._lock:
                    self._touched.add(count.member.group)
            return answer

        return work

    def answered(self, d: Delivery, written: Written) -> None:
        """Note a record write that failed (its delivery's acknowledgement may have to wait)."""
        if written.error is not None:
            self._failed[d.index] = written.error

    # ------------------------------------------------------------ after the writes
    def finish(self, deliveries: Sequence[Delivery]) -> None:
        """Settle, finish groups, send chains' next steps, withhold what could not be done."""
        related = [d for d in deliveries if d.envelope is not None
                   and (d.envelope.member_of is not None or d.envelope.step_of is not None)]
        if not related:
            return
        for d in related:
            if d.index in self._failed:  # its group's count or its chain's next step would be lost with it
                self._withhold(d, f"its record's write failed ({self._failed[d.index]})")
        self._settle(related)
        self._recheck(related)
        for group_id in sorted(self._touched):
            self._finish_group(group_id, [d for d in related if d.envelope and d.envelope.member_of
                                          and d.envelope.member_of.group == group_id])
        self._continue_chains(related)

    def _settle(self, related: Sequence[Delivery]) -> None:
        """Count the members whose terminal outcome no write of theirs recorded."""
        now = self.parent.clock()
        expires_at = expiry(now, self.parent.settings.record_ttl)
        work: dict[str, tuple[Delivery, Future[Written]]] = {}
        for d in related:
            member = d.envelope.member_of if d.envelope is not None else None
            key = d.key or (d.envelope.key if d.envelope is not None else "")
            if member is None or not key or key in work:
                continue
            settled = self._settled(d, key, now, expires_at)
            if settled is not None:
                count, record = settled
                work[key] = (d, self.parent.store.run(self._counter(count, record)))
        for d, future in work.values():
            answer = future.result()
            if answer.error is not None:
                self.log.error("could not count a group member's outcome; its redelivery will",
                               extra={"key": d.key, "error": answer.error})
                self._withhold(d, f"its group's count failed ({answer.error})")

    def _settled(self, d: Delivery, key: str, now: float,
                 expires_at: float) -> tuple[Count, TransactedOperation] | None:
        assert d.envelope is not None and d.envelope.member_of is not None
        member: MemberOf = d.envelope.member_of
        state = guard.JobState
        if d.outcome is Outcome.CANCELLED:
            return Count(member=member, outcome=state.CANCELLED.value), Amend(
                key=key, data={"updated_at": now}, expect={"status": LeaseState.DONE.value,
                                                           "outcome": state.CANCELLED.value})
        if d.outcome is Outcome.EXPIRED:
            return Count(member=member, outcome=state.EXPIRED.value), guard.expired(
                key, job=d.job_name, now=now, expires_at=expires_at)
        if d.outcome is Outcome.DEAD_LETTERED and not d.holds_lease and d.reason in UNCLAIMED_DEAD_LETTERS:
            return Count(member=member, outcome=state.DEAD_LETTERED.value), Close(
                key=key, now=now, expires_at=expires_at, state=LeaseState.RELEASED,
                data={"job": d.job_name, "outcome": state.DEAD_LETTERED.value, "reason": d.reason.value
                      if d.reason else None, "dead_letter_of": d.message_id, "finished_at": now, "updated_at": now,
                      "last_error": guard.error_text(d.error) if d.error else None})
        return None

    def _recheck(self, related: Sequence[Delivery]) -> None:
        """Groups of duplicates whose shard is empty: the delivery that emptied it may have died before finishing."""
        shards = {shard_key(d.envelope.member_of.group, d.envelope.member_of.shard): d.envelope.member_of.group
                  for d in related if d.outcome is Outcome.DUPLICATE and d.envelope and d.envelope.member_of}
        if not shards:
            return
        try:
            found = self.parent.store.get_many(list(shards))
        except Exception as error:  # a store failure: the duplicates come back and look again
            self.log.error("could not read groups' shards", extra={"error": str(error)})
            for d in related:
                if d.outcome is Outcome.DUPLICATE and d.envelope and d.envelope.member_of:
                    self._withhold(d, f"its group's shard could not be read ({error})")
            return
        for key, group_id in shards.items():
            item = found.get(key)
            if item is not None and item.get(PENDING) == 0:
                self._touched.add(group_id)

    def _finish_group(self, group_id: str, members: Sequence[Delivery]) -> None:
        """The head's final state, then the callbacks; on failure the members' redeliveries try again."""
        records = self.parent.groups
        now = self.parent.clock()
        try:
            state, due = records.due(group_id, now)
        except Exception as error:
            self.log.error("could not finish a group", extra={"group": group_id, "error": str(error)})
            for d in members:
                self._withhold(d, f"its group could not be finished ({error})")
            return
        if state is None:
            return
        from sqsjobs.workflows._members import restored

        sent = self.parent.send([restored(text) for _, text in due])
        for (callback, _), ok in zip(due, sent, strict=True):
            if ok:
                records.mark_sent(group_id, callback, now)
                self.log.info("group callback sent", extra={"group": group_id, "callback": callback.value,
                                                            "state": state.value})
        if not all(sent):
            for d in members:
                self._withhold(d, f"a callback of group {group_id} could not be sent")

    def _continue_chains(self, related: Sequence[Delivery]) -> None:
        """Send each chain's next step after its step succeeded (or its duplicate, when the next is missing)."""
        steps: dict[str, list[JobMessage] | None] = {}
        sends: list[tuple[Delivery, JobMessage]] = []
        for d in related:
            step = d.envelope.step_of if d.envelope is not None else None
            succeeded = d.outcome is Outcome.SUCCEEDED and d.index not in self._failed
            if step is None or not (succeeded or d.outcome is Outcome.DUPLICATE):
                continue
            try:
                if step.chain not in steps:
                    steps[step.chain] = self.parent.chains.steps(step.chain)
                messages = steps[step.chain]
                if messages is None or step.step + 1 >= len(messages):
                    continue  # the chain's record is gone, or this was its last step
                following = messages[step.step + 1]
                if d.outcome is Outcome.DUPLICATE and self.parent.store.get(following.key) is not None:
                    continue  # the next step arrived already
            except Exception as error:
                self.log.error("could not read a chain", extra={"chain": step.chain, "error": str(error)})
                self._withhold(d, f"its chain could not be read ({error})")
                continue
            if all(following.key != m.key for _, m in sends):
                sends.append((d, following))
        for (d, _), ok in zip(sends, self.parent.send([m for _, m in sends]), strict=True):
            if not ok:
                self._withhold(d, "its chain's next step could not be sent")

    def _withhold(self, d: Delivery, why: str) -> None:
        if d.state is State.TO_ACK:
            d.withhold(why, delay=WITHHELD_DELAY)
