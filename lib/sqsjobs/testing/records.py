"""Records a test starts from: a job that already ran, as its key's record says.

Attempts are counted in the job's record (runs that started), not by SQS's
receive count, so a test of "the last attempt" states the record it starts
from instead of faking ``ApproximateReceiveCount``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.store._lease import expiry
from sqsjobs.store._lease_ops import Release
from sqsjobs.worker._job_records import Claim, JobState

if TYPE_CHECKING:
    from sqsjobs._app import JobApp
    from sqsjobs.enqueue._message import JobMessage


def given_attempts(app: JobApp, message: JobMessage, attempts: int, *, last_error: str = "RuntimeError: earlier",
                   now: float | None = None) -> None:
    """Write ``message``'s record as if its job had already run and failed ``attempts`` times.

    Attempts are counted in the job's record (runs that started), not by SQS's
    receive count, so a test of "the last attempt" states the record it starts from.

    Example:
        >>> from sqsjobs import InMemoryStore, JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore())
        >>> @app.job("sync", key="sync:{n}")
        ... def sync(n: int) -> None: ...
        >>> given_attempts(app, sync.message(n=1), 2)
        >>> app.status("sync:1").state, app.status("sync:1").attempts
        ('retrying', 2)
    """
    envelope = Envelope.decode(message.body)
    job = app.runtime.job(envelope.job)
    args = job.signature.bind(job.upcast(envelope.job_version, envelope.args))
    at = app.runtime.clock() if now is None else now
    expires_at = expiry(at, app.settings.record_ttl)
    claim = Claim(key=message.key, job=job.name, owner="given-attempts", now=at, lease_until=at,
                  expires_at=expires_at, fingerprint=job.fingerprint(args), fp_version=job.options.version,
                  message_id="given-attempts", enqueued_at=envelope.enqueued_at)
    for op in (claim.operation(), Release(key=message.key, owner="given-attempts", expires_at=expires_at,
                                          attempts_delta=attempts - 1,
                                          data={"outcome": JobState.RETRYING.value, "last_error": last_error})):
        written = app.runtime.store.write(op)
        if not written.ok:
            raise RuntimeError(f"given_attempts: could not write {message.key!r}: {written.error or written.item}")
