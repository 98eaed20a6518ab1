"""Sending each message the way its due time needs: to SQS (now, or with DelaySeconds) or into a schedule.

``JobApp.send`` and ``JobApp.enqueue_many`` go through here. A message due
within 900 s goes to its queue's producer (SQS); one due later becomes a one-time
EventBridge Scheduler schedule (``sqsjobs.schedules._one_time``). The decision
is taken at send time from the message's ``due_at``, so a message built long
before it is sent is not held back longer than asked.

``replace=True`` on a message SQS takes deletes the key's pending schedule
*after* the send (a failed send leaves it in place: nothing is lost; a failed
delete leaves a schedule whose delivery the guard takes for a duplicate).

Schedules created or moved are counted in the metric ``JobScheduled`` (EMF,
through the app's ``emit_metrics``; the worker counts its own long retries).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from sqsjobs import _metrics as m
from sqsjobs import _otel
from sqsjobs._errors import ConfigurationError, ScheduleError
from sqsjobs.enqueue._delays import remaining_delay, schedule_name
from sqsjobs.enqueue._producer import EnqueueReport, FailedEntry, _group_id
from sqsjobs.schedules._one_time import DelayedMessage, missing_settings
from sqsjobs.schedules._receipt import ScheduledJob, ScheduleOutcome

if TYPE_CHECKING:
    from sqsjobs._settings import Settings
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.enqueue._routing import QueueRouter
    from sqsjobs.schedules._one_time import OneTimeSchedules

#: schedules created at once by ``enqueue_many`` (Scheduler has no batch call)
SCHEDULE_CONCURRENCY = 10


class Dispatcher:
    """Routes messages between their queues (``router``: one producer per queue) and the schedule group.

    ``schedules`` is called only when a message needs a schedule, so an app
    without a schedule group sends short delays as before and fails with a
    ``ConfigurationError`` (naming the setting) only for a long one.
    """

    def __init__(
        self,
        *,
        settings: Settings,
        router: QueueRouter,
        schedules: Callable[[], OneTimeSchedules],
        clock: Callable[[], float],
        emit: Callable[[str], None],
        warn: Callable[[str, dict[str, Any]], None],
    ) -> None:
        self.settings = settings
        self.router = router
        self._schedules = schedules
        self.clock = clock
        self.emit = emit
        self.warn = warn

    def send(self, message: JobMessage) -> str:
        """Send one message; the SQS message id, or a ``ScheduledJob`` when it waits in a schedule."""
        if message.due_at is not None:
            delay = remaining_delay(message.due_at, self.clock())
            if delay is None:
                span = _otel.send_span(self.router.url(message.queue), 1)
                if span is None:
                    scheduled = self._creator([message]).create(self._delayed(message))
                else:
                    with span:
                        scheduled = self._creator([message]).create(self._delayed(message))
                self._count([scheduled])
                return scheduled
            message = dataclasses.replace(message, delay=delay, due_at=None)
        message_id = self.router.send(message)
        if message.replace:
            self._drop_pending([message])
        return message_id

    def send_many(self, messages: Sequence[JobMessage],
                  on_progress: Callable[[int], None] | None = None) -> EnqueueReport:
        """Send in SQS batches and schedules; one report for both, by input position (never raises per entry).

        ``on_progress(n)`` is told how many more messages were sent or scheduled.

        A ``ConfigurationError`` (a long delay without a schedule group) is
        raised before anything is sent.
        """
        now = self.clock()
        to_sqs: list[tuple[int, JobMessage]] = []
        to_schedule: list[tuple[int, JobMessage]] = []
        for i, message in enumerate(messages):
            delay = None if message.due_at is None else remaining_delay(message.due_at, now)
            if message.due_at is None:
                to_sqs.append((i, message))
            elif delay is None:
                to_schedule.append((i, message))
            else:
                to_sqs.append((i, dataclasses.replace(message, delay=delay, due_at=None)))
        schedules = self._creator([m for _, m in to_schedule]) if to_schedule else None
        sent = self.router.send_many([m for _, m in to_sqs], on_progress) if to_sqs else EnqueueReport()
        positions = [i for i, _ in to_sqs]
        message_ids = {positions[j]: mid for j, mid in sent.message_ids.items()}
        failed = [dataclasses.replace(f, index=positions[f.index]) for f in sent.failed]
        calls = sent.calls
        scheduled: dict[int, ScheduledJob] = {}
        if schedules is not None:
            before = schedules.calls
            for i, outcome in self._create_all(schedules, to_schedule):
                if isinstance(outcome, ScheduledJob):
                    scheduled[i] = outcome
                else:
                    failed.append(FailedEntry(index=i, key=messages[i].key, code=type(outcome).__name__,
                                              message=str(outcome), sender_fault=False))
            calls += schedules.calls - before
            self._count(list(scheduled.values()))
            if on_progress is not None and scheduled:
                on_progress(len(scheduled))
        replaced = [messages[i] for i in message_ids if messages[i].replace]
        if replaced:
            self._drop_pending(replaced)
        return EnqueueReport(message_ids=dict(sorted(message_ids.items())),
                             failed=tuple(sorted(failed, key=lambda f: f.index)), calls=calls,
                             scheduled=dict(sorted(scheduled.items())))

    # ------------------------------------------------------------ helpers
    def _creator(self, messages: Sequence[JobMessage]) -> OneTimeSchedules:
        """The schedules, once the settings creating one needs are all there (else a ``ConfigurationError``)."""
        missing = missing_settings(self.settings, to_create=True)
        if missing:
            first = messages[0]
            due = datetime.fromtimestamp(first.due_at or 0, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            raise ConfigurationError(
                f"job {first.job!r} (key {first.key!r}) is due at {due}, more than SQS's 900 s from now, so it "
                f"waits in an EventBridge Scheduler one-time schedule; missing: {missing}. The template gives "
                "its functions all three (docs/delays.md); nothing was sent"
            )
        return self._schedules()

    def _create_all(self, schedules: OneTimeSchedules,
                    pending: list[tuple[int, JobMessage]]) -> list[tuple[int, ScheduledJob | Exception]]:
        def create(item: tuple[int, JobMessage]) -> tuple[int, ScheduledJob | Exception]:
            i, message = item
            try:
                return i, schedules.create(self._delayed(message))
            except ScheduleError as error:
                return i, error

        if len(pending) == 1:
            return [create(pending[0])]
        with ThreadPoolExecutor(max_workers=min(SCHEDULE_CONCURRENCY, len(pending))) as pool:
            return list(pool.map(create, pending))

    def _delayed(self, message: JobMessage) -> DelayedMessage:
        assert message.due_at is not None
        url = self.router.url(message.queue)  # the schedule sends it to its job's own queue
        schedules = self._schedules()
        # Scheduler sends a body and no attributes: the trace context travels in the envelope (sqsjobs._otel).
        carrier = _otel.attribute_carrier(
            {n: {"stringValue": v} for n, v in message.extra_attributes.items()}) or _otel.current_carrier()
        return DelayedMessage(
            name=schedule_name(message.key), job=message.job, key=message.key,
            body=_otel.body_carrying(message.body, carrier),
            due_at=message.due_at, queue_arn=schedules.queue_arn(url),
            message_group_id=_group_id(message) if url.endswith(".fifo") else None, replace=message.replace,
        )

    def _drop_pending(self, messages: Sequence[JobMessage]) -> None:
        """``replace=True`` on a message sent now: its key's pending schedule would deliver it again later."""
        if not self.settings.schedule_group:
            return  # this app never scheduled anything
        schedules = self._schedules()
        for message in messages:
            try:
                schedules.delete(schedule_name(message.key))
            except ScheduleError as error:
                self.warn("sent, but the key's pending schedule could not be deleted: it will deliver a duplicate "
                          "the guard acknowledges", {"key": message.key, "error": str(error)})

    def _count(self, scheduled: Sequence[ScheduledJob]) -> None:
        """``JobScheduled`` per job for schedules created or moved (not for keys already scheduled)."""
        counted = [s for s in scheduled if s.outcome is not ScheduleOutcome.ALREADY_SCHEDULED]
        if not counted:
            return
        batch = m.BatchMetrics(namespace=self.settings.namespace, service=self.settings.service, emit=self.emit)
        for s in counted:
            batch.count(s.job, m.SCHEDULED)
        batch.flush()
