"""Where an enqueue goes: into its key's debounce burst, through dedupe's reservation, or straight out.

``Job.enqueue`` hands its request to the runtime (``Runtime.enqueue``), which
calls ``enqueue`` here; ``app.enqueue(message)`` and ``app.enqueue_many``
come through ``send_prepared`` and ``send_many``. A job builds and checks the
message (``Job.message``); this module decides the way it is sent. Only a job
that sets ``debounce`` or ``dedupe`` (``JobOptions.sets``), or a request with
``debounce=``, goes through ``enqueue/_debounce.py``, imported then: a job
never imports the features an enqueue may go through, and an app whose jobs
use none never loads them (tests/unit/test_feature_imports.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    from sqsjobs._job import Job, Services
    from sqsjobs._job_options import JobOptions
    from sqsjobs.enqueue._message import EnqueueRequest, JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport


def coalesces(options: JobOptions) -> bool:
    """Whether a job's enqueues go through debounce or dedupe (``enqueue/_debounce.py``)."""
    return options.sets("debounce") or options.sets("dedupe")


def enqueue(runtime: Services, job: Job[..., Any], request: EnqueueRequest) -> str:
    """Send ``request`` of ``job`` the way the job's options say; the message id, a schedule or a ``Receipt``."""
    if request.debounce is not None or coalesces(job.options):
        from sqsjobs.enqueue._debounce import enqueue_coalesced

        return enqueue_coalesced(runtime, job, request)
    return runtime.send(job.message(
        delay=request.delay, eta=request.eta, replace=request.replace, group=request.group,
        trace_id=request.trace_id, expires_in=request.expires_in, tenant=request.tenant, callback=request.callback,
        **request.args))


def send_prepared(runtime: Services, message: JobMessage) -> str:
    """``app.enqueue(message)``: a deduplicated job's key is reserved first; a debounced job's is refused."""
    if message.source is None or not coalesces(message.source.options):
        return runtime.send(message)
    from sqsjobs.enqueue._debounce import send_prepared as send_coalesced

    return send_coalesced(runtime, message)


def send_many(runtime: Services, messages: Sequence[JobMessage],
              on_progress: Callable[[int], None] | None = None) -> EnqueueReport:
    """``app.enqueue_many``: deduplicated jobs' keys reserved first (``dedupe_many``), the rest sent in batches."""
    if not any(m.source is not None and coalesces(m.source.options) for m in messages):
        return runtime.send_many(messages, on_progress=on_progress)
    from sqsjobs.enqueue._debounce import dedupe_many

    return dedupe_many(runtime, messages, lambda kept: runtime.send_many(kept, on_progress=on_progress))
