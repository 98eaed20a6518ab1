"""Where one ``job.enqueue(...)`` goes: into its key's debounce burst, through dedupe's reservation, or straight out.

``Job.enqueue`` hands its request to the runtime (``Runtime.enqueue``), which
calls ``enqueue`` here: the job builds and checks the message
(``Job.message``), and this module decides the way it is sent, from the
job's own options (``DEBOUNCE``/``DEDUPE``, ``enqueue/_debounce.py``) and the
request's ``debounce=`` override. So a job never imports the features an
enqueue may go through.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqsjobs._errors import InvalidArgumentsError
from sqsjobs.enqueue._debounce import (
    DEBOUNCE,
    DEDUPE,
    debounce_seconds,
    dedupe_hold,
    send_debounced,
    send_deduplicated,
)

if TYPE_CHECKING:
    from sqsjobs._job import Job
    from sqsjobs._services import Services
    from sqsjobs.enqueue._message import EnqueueRequest


def enqueue(runtime: Services, job: Job[..., Any], request: EnqueueRequest) -> str:
    """Send ``request`` of ``job`` the way the job's options say; the message id, a schedule or a ``Receipt``."""
    debounce, dedupe = DEBOUNCE.of(job.options), DEDUPE.of(job.options)
    if request.debounce is not None and debounce is None:
        raise InvalidArgumentsError(
            f"job {job.name!r}: debounce= overrides the window of a job declared with debounce=SECONDS; "
            "declare this one with it (its bursts' arguments differ, so its key may not hash them)")
    window = debounce if request.debounce is None else \
        debounce_seconds(job.name, request.debounce, error=InvalidArgumentsError)
    if window is not None:
        if dedupe is not None:
            raise InvalidArgumentsError(f"job {job.name!r}: debounce does not combine with dedupe")
        if request.delay or request.eta is not None:
            raise InvalidArgumentsError(f"job {job.name!r}: a debounced enqueue is due a window after it "
                                        "(debounce=); it takes no delay or eta")
        return send_debounced(runtime, job.message(
            delay=window, replace=True, group=request.group, trace_id=request.trace_id,
            expires_in=request.expires_in, tenant=request.tenant, **request.args))
    message = job.message(delay=request.delay, eta=request.eta, replace=request.replace, group=request.group,
                          trace_id=request.trace_id, expires_in=request.expires_in, tenant=request.tenant,
                          **request.args)
    if dedupe is not None:
        now = runtime.clock()
        wait = message.due_at - now if message.due_at is not None else float(message.delay)
        return send_deduplicated(runtime, message, dedupe, dedupe_hold(job.options, runtime.settings, wait))
    return runtime.send(message)
