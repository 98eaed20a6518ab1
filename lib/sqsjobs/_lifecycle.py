"""Cancelling a key (``app.cancel``): the marker first, then the pending delayed enqueue, then a running flag;
and cancelling a group (``app.cancel_group``), each member's key so.

Here, not in lib/sqsjobs/_app.py, so that the facade only hands over: the
order of the writes is the contract (docs on ``JobApp.cancel``), and a
delivery racing any step is acknowledged without running, because the
marker is written before anything else (worker/_job_records.py's rules).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqsjobs._errors import ConfigurationError, GroupError, StoreError
from sqsjobs.store._lease import LeaseState, expiry
from sqsjobs.worker import _job_records as guard

if TYPE_CHECKING:
    from sqsjobs._runtime import Runtime
    from sqsjobs.workflows._groups import CancelledGroup

__all__ = ["cancel_group", "cancel_key"]


def cancel_key(runtime: Runtime, key: str, reason: str | None) -> str:
    """Cancel the job of ``key`` (see ``JobApp.cancel``); one of ``CancelResult``'s values.

    Example:
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
        >>> cancel_key(app.runtime, "report:1", None), cancel_key(app.runtime, "report:1", None)
        ('not_found_but_cancelled', 'already_finished')
    """
    key = guard.checked_key(key)
    if reason is not None and not isinstance(reason, str):
        raise ConfigurationError(f"cancel: reason must be text, got {reason!r}")
    now = runtime.clock()
    store = runtime.store
    written = store.write(guard.cancel_marker(key, now=now, expires_at=expiry(now, runtime.settings.record_ttl),
                                              reason=(reason or "")[:guard.MAX_ERROR_TEXT] or None))
    if written.error is not None:
        raise StoreError(written.error)
    if runtime.settings.schedule_group:
        runtime.unschedule(key)
    if written.ok:
        return (guard.CancelResult.CANCELLED if written.item is not None else guard.CancelResult.NOT_FOUND).value
    found = written.item
    if found is not None and found.state is LeaseState.HELD:
        flagged = store.write(guard.cancel_request(key, now=now))
        if flagged.error is not None:
            raise StoreError(flagged.error)
        if flagged.ok:
            return guard.CancelResult.RUNNING.value
        return cancel_key(runtime, key, reason)  # it finished (or died) in between: look again
    return guard.CancelResult.ALREADY_FINISHED.value


def cancel_group(runtime: Runtime, group_id: str, reason: str | None) -> CancelledGroup:
    """Cancel the group ``group_id`` (see ``JobApp.cancel_group``): its members' keys get the cancel marker.

    Example:
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
        >>> cancel_group(app.runtime, "no-such-group", None)
        Traceback (most recent call last):
        ...
        sqsjobs.GroupError: no group 'no-such-group': it was never enqueued, or its records expired
    """
    from sqsjobs.workflows._groups import MAX_NAME, GroupRecords

    if reason is not None and not isinstance(reason, str):
        raise ConfigurationError(f"cancel_group: reason must be text, got {reason!r}")
    if not isinstance(group_id, str):
        raise GroupError(f"a group id is text, got {type(group_id).__name__}")
    return GroupRecords(runtime.store, ttl=runtime.settings.record_ttl).cancel(
        group_id, now=runtime.clock(), reason=(reason or "")[:MAX_NAME] or None)
