"""The worker's side of callbacks: answer each request's workflow once its fate is final (a stage).

Written as a group's callback is (``workflows/_stage.py``), after the batch's
records and dead letters (``after_records``):

1. each delivery carrying a ``callback`` whose fate is final is answered
   (``workflows/_callbacks.py`` says with what): it succeeded and its record
   says so; it was a duplicate of a completed, dead-lettered or cancelled key
   (the record answers); it expired or was cancelled; it reached the DLQ with
   its reason. The keys' records are read once, consistently, *after* they
   were written: the answer tells what the record says;
2. one callback carried by several deliveries of the batch is sent once;
3. a callback the record says was told is not sent again; once the service
   took an answer, or said the callback is closed (logged), the record
   remembers it (``callbacks_told``);
4. a send that failed otherwise holds its deliveries back: they come back,
   duplicates of the completed key, and answer from the record then;
5. a delivery going back to wait (a retry, a deferral) sends a heartbeat when
   its callback asked for one; a heartbeat that fails is logged, nothing more.

``GroupCallbacks`` answers a group's callback, once no member is pending,
from ``WorkflowStage`` (the same finishing step that sends ``on_success``).

Nothing here raises out of a batch.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from sqsjobs.enqueue._envelope import CallbackTo
from sqsjobs.store._lease import LeaseState
from sqsjobs.store._lease_ops import Amend
from sqsjobs.worker._decision import Action
from sqsjobs.worker._delivery import Delivery
from sqsjobs.worker._job_records import error_text
from sqsjobs.worker._stages import Stage
from sqsjobs.workflows._callback_sender import CallbackClosed, CallbackSender
from sqsjobs.workflows._callbacks import (
    DEAD_LETTERED,
    NOTE,
    TOLD,
    TOLD_AS,
    Answer,
    callback_number,
    failed,
    from_record,
    group_answer,
)
from sqsjobs.workflows._stage import counts_as

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseItem, LeaseStore
    from sqsjobs.worker._batch import Batch
    from sqsjobs.workflows._groups import GroupState

#: deliveries that go back to wait: a heartbeat, when asked
WAITING = frozenset({Action.RETURN, Action.RESEND, Action.SCHEDULE})
#: the group head's fields: the callback (its envelope wire, as JSON) and when it was told
GROUP_CALLBACK, GROUP_TOLD = "workflow_callback", "workflow_callback_told"


def callback_of(d: Delivery) -> CallbackTo | None:
    """The callback ``d``'s request carries, if any."""
    return d.envelope.callback if d.envelope is not None else None


def final_answer(d: Delivery, record: LeaseItem | None, *, recorded: bool) -> Answer | None:
    """What ``d``'s callback is told now, or None while its fate is not final.

    Example:
        >>> d = Delivery.parse({"messageId": "m", "receiptHandle": "r", "body": "{}"}, 0)
        >>> final_answer(d, None, recorded=True) is None
        True
    """
    job = d.job_name if d.job_name != "?" else None
    if d.action is Action.DEAD_LETTER:
        reason = d.reason.value if d.reason is not None else None
        last = error_text(d.error) if d.error is not None else None
        return failed(DEAD_LETTERED, key=d.key, job=job, reason=reason, last_error=last)
    kind = counts_as(d, recorded=recorded)
    if kind is None:
        return None
    return from_record(kind, record, key=d.key, job=job)


class CallbackStage(Stage):
    """Answers the workflows that await this batch's requests (the module docstring says when and how)."""

    def __init__(self, *, store: LeaseStore, sender: Callable[[], CallbackSender], clock: Callable[[], float],
                 logger: Any) -> None:
        self.store = store
        self._sender = sender
        self.clock = clock
        self.log = logger

    def concerns(self, d: Delivery) -> bool:
        return callback_of(d) is not None

    def after_records(self, batch: Batch) -> Mapping[int, str]:
        carrying = [d for d in batch.deliveries if callback_of(d) is not None]
        if not carrying:
            return {}
        failed_: dict[int, str] = {}
        final: list[Delivery] = []
        for d in carrying:
            if d.action is Action.DEAD_LETTER or counts_as(d, recorded=batch.writes.failure(d) is None):
                final.append(d)
            elif d.action in WAITING and (cb := callback_of(d)) is not None and cb.heartbeat:
                self._heartbeat(d, cb)
        if not final:
            return failed_
        try:
            records = self.store.get_many([d.key for d in final if d.key])
        except Exception as error:  # the records cannot be read: the deliveries come back and answer then
            self.log.error("could not read the records a callback answers from", extra={"error": str(error)})
            return {d.index: f"its callback's record could not be read ({error})" for d in final}
        by_callback: dict[int, list[Delivery]] = {}
        for d in final:
            cb = callback_of(d)
            assert cb is not None
            by_callback.setdefault(callback_number(cb), []).append(d)
        for number, deliveries in by_callback.items():
            first = deliveries[0]
            record = records.get(first.key)
            if counts_as(first, recorded=True) == "succeeded" and (record is None
                                                                   or record.state is not LeaseState.DONE):
                # a success is told from its record: a copy that followed a run whose completion is not written
                # yet comes back and answers once it is (tests/model: "told success, but its record says running")
                for d in deliveries:
                    failed_[d.index] = "its key's completion is not written yet; its callback answers then"
                continue
            answer = final_answer(first, record, recorded=True)
            assert answer is not None
            why = self._tell(first, number, answer, record)
            if why is not None:
                for d in deliveries:
                    failed_[d.index] = why
        return failed_

    # ------------------------------------------------------------ telling
    def _tell(self, d: Delivery, number: int, answer: Answer, record: LeaseItem | None) -> str | None:
        """Send ``answer`` unless the record says it was told; None, or why the delivery must come back."""
        cb = callback_of(d)
        assert cb is not None
        fields = {"key": d.key, "job": d.job_name, "callback_to": cb.service, "answer": answer.told}
        told = record.get(TOLD) if record is not None else None
        if told and number in told:
            before = record.get(TOLD_AS) if record is not None else None
            if before != answer.told:  # a redriven job the workflow was told about already
                self.log.warning("the workflow was told before; not told again", extra={**fields, "told": before})
                self._note(d, f"the workflow was told '{before}' before this delivery ended '{answer.told}'; "
                              "it is not told again")
            return None
        try:
            self._sender().answer(cb, answer)
        except CallbackClosed as closed:
            self.log.warning("callback already closed; nothing more to tell it",
                             extra={**fields, "code": closed.code})
            self._mark(d, number, answer, note=f"the callback was closed ({closed.code}) before it was told "
                                               f"'{answer.told}'")
            return None
        except Exception as error:
            self.log.error("could not answer a callback; the delivery comes back and answers again",
                           extra={**fields, "error": f"{type(error).__name__}: {error}"})
            return f"its workflow's callback could not be answered ({type(error).__name__}: {error})"
        self.log.debug("callback answered", extra=fields)
        self._mark(d, number, answer)
        return None

    def _mark(self, d: Delivery, number: int, answer: Answer, note: str | None = None) -> None:
        """The record remembers the callback as told (a write that fails is logged: a repeat finds it closed)."""
        if not d.key:
            return
        data: dict[str, Any] = {TOLD_AS: answer.told, "callback_told_at": self.clock()}
        if note is not None:
            data[NOTE] = note
        written = self.store.write(Amend(key=d.key, data=data, add_to_set={TOLD: number}))
        if written.error is not None:
            self.log.warning("could not record that a callback was told", extra={"key": d.key,
                                                                                  "error": written.error})

    def _note(self, d: Delivery, note: str) -> None:
        written = self.store.write(Amend(key=d.key, data={NOTE: note}))
        if written.error is not None:
            self.log.warning("could not record a callback's note", extra={"key": d.key, "error": written.error})

    def _heartbeat(self, d: Delivery, cb: CallbackTo) -> None:
        try:
            self._sender().heartbeat(cb)
        except Exception as error:
            self.log.warning("callback heartbeat not sent", extra={"key": d.key, "callback_to": cb.service,
                                                                   "error": f"{type(error).__name__}: {error}"})


class GroupCallbacks:
    """A group's callback, answered once no member is pending (called by ``WorkflowStage``)."""

    def __init__(self, *, store: LeaseStore, sender: Callable[[], CallbackSender], logger: Any) -> None:
        self.store = store
        self._sender = sender
        self.log = logger

    def finished(self, group_id: str, state: GroupState, now: float) -> str | None:
        """Answer the group's callback if it has one not yet told; None, or why its members must come back."""
        from sqsjobs.workflows._groups import GroupState, head_key

        try:
            head = self.store.get(head_key(group_id))
        except Exception as error:
            return f"its group's head could not be read ({error})"
        wire = head.get(GROUP_CALLBACK) if head is not None else None
        if head is None or not wire or head.get(GROUP_TOLD) is not None:
            return None
        from sqsjobs.enqueue._envelope import callback_from_wire
        from sqsjobs.workflows._groups import GroupRecords

        cb = callback_from_wire(json.loads(wire))
        assert cb is not None
        try:
            status = GroupRecords(self.store, ttl=0).status(group_id)
        except Exception as error:
            return f"its group's counts could not be read ({error})"
        if status is None:
            return None
        counts = {"group": group_id, "name": status.name, "state": state.value, "total": status.total,
                  "succeeded": status.succeeded, "failed": status.failed, "dead_lettered": status.dead_lettered,
                  "cancelled": status.cancelled, "expired": status.expired}
        answer = group_answer(counts, cancelled=state is GroupState.CANCELLED)
        fields = {"group": group_id, "callback_to": cb.service, "answer": answer.told}
        note = None
        try:
            self._sender().answer(cb, answer)
        except CallbackClosed as closed:
            self.log.warning("group callback already closed; nothing more to tell it",
                             extra={**fields, "code": closed.code})
            note = f"the callback was closed ({closed.code}) before it was told '{answer.told}'"
        except Exception as error:
            self.log.error("could not answer a group's callback; its members come back and answer again",
                           extra={**fields, "error": f"{type(error).__name__}: {error}"})
            return f"group {group_id}'s callback could not be answered ({type(error).__name__}: {error})"
        else:
            self.log.debug("group callback answered", extra=fields)
        data: dict[str, Any] = {GROUP_TOLD: now, TOLD_AS: answer.told, **({NOTE: note} if note else {})}
        written = self.store.write(Amend(key=head_key(group_id), data=data))
        if written.error is not None:
            self.log.warning("could not record that a group's callback was told",
                             extra={"group": group_id, "error": written.error})
        return None
