"""Step 1 of ``Consumer.run`` (``worker/_consumer.py``): the SQS event's records as deliveries, each body decoded.

``parse_event`` refuses an event that is not an SQS batch (the one error the
consumer raises); ``decode`` turns a body into its job call, or concludes the
delivery when it is not one (malformed, or a ``job_version`` newer than this
deploy knows).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import (
    InvalidArgumentsError,
    InvalidEventError,
    MalformedMessageError,
    RetryableError,
    UnknownJobError,
)
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._delivery import Delivery

if TYPE_CHECKING:
    from sqsjobs._job import Job
    from sqsjobs.worker._batch import Batch


def parse_event(event: Any) -> list[Delivery]:
    """The event's records as deliveries; ``InvalidEventError`` when it is not an SQS batch.

    Example:
        >>> parse_event({"Records": []})
        Traceback (most recent call last):
        ...
        sqsjobs.InvalidEventError: the SQS event has no records (an empty batch is not an SQS event)
    """
    if not isinstance(event, dict):
        raise InvalidEventError(f"handle_batch expects the SQS event (a dict), got {type(event).__name__}")
    found = event.get("Records")
    if not isinstance(found, list):
        raise InvalidEventError("the event has no 'Records' list: is this an SQS event?")
    if not found:
        raise InvalidEventError("the SQS event has no records (an empty batch is not an SQS event)")
    return [Delivery.parse(record, i) for i, record in enumerate(found)]


def decode(batch: Batch, d: Delivery, jobs: Mapping[str, Job[Any, Any]]) -> None:
    """Decode ``d``'s body to its job call (job, upcast arguments, their fingerprint, key); a body that is not one
    concludes ``d``."""
    try:
        envelope = d.envelope = Envelope.decode(d.body)  # kept even if what follows fails: it names the job
        job = jobs.get(envelope.job)
        if job is None:
            raise UnknownJobError(f"no job named {envelope.job!r} is registered in this worker")
        args = job.signature.bind(job.upcast(envelope.job_version, envelope.args))
        fingerprint = job.fingerprint(args)
        key = envelope.key or job.key_for(args)
    except Exception as error:
        batch.conclude(d, undecodable(error))
        return
    d.decoded(envelope=envelope, job=job, args=args, key=key, fingerprint=fingerprint)


def undecodable(error: Exception) -> Facts:
    """How a delivery whose body did not decode ends: malformed, or (a newer ``job_version`` than this deploy
    knows) back after the backoff with no attempt used, until new code takes it.

    Example:
        >>> undecodable(UnknownJobError("no job named 'x'")).error
        MalformedMessageError("UnknownJobError: no job named 'x'")
    """
    if isinstance(error, MalformedMessageError):
        return Facts(ending=Ending.MALFORMED, error=error)
    if isinstance(error, (UnknownJobError, InvalidArgumentsError)):
        return Facts(ending=Ending.MALFORMED, error=MalformedMessageError(f"{type(error).__name__}: {error}"))
    if isinstance(error, RetryableError):
        return Facts(ending=Ending.TOO_NEW, error=error)
    # an upcaster that raised is user code failing on this body
    return Facts(ending=Ending.MALFORMED,
                 error=MalformedMessageError(f"{type(error).__name__} while decoding: {error}"))
