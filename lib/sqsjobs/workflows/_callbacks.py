"""Durable workflows await sqsjobs: a job, a batch-handler item or a group answers one callback (docs/durable.md).

A Lambda durable function (``context.wait_for_callback``) or a Step Functions
task (``.waitForTaskToken``) hands sqsjobs a callback with the request::

    resize.enqueue(image_id=7, callback=DurableCallback(callback_id))
    resize.enqueue(image_id=7, callback=TaskToken(task_token, heartbeat=True))
    app.group(name="thumbnails", callback=DurableCallback(callback_id))

The callback travels in the message's envelope (``callback``,
``enqueue/_envelope.py``) and never changes the key: it belongs to the
request, and the worker answers it exactly when the request's fate is final
(``workflows/_callback_stage.py``), with what this module builds:

===========================================  =======================================================
the request's fate                           the answer
===========================================  =======================================================
succeeded (ran, or a duplicate of a          success: the job's stored result as JSON (what
completed key)                               ``app.status(key).result`` says; ``null`` when the job
                                             stores none)
dead-lettered (any reason), cancelled,       failure: ``sqsjobs.DeadLettered`` / ``sqsjobs.Cancelled``
expired                                      / ``sqsjobs.Expired``, the DLQ letter's reason and last
                                             error as the message, the same as JSON data
retrying, deferred, not started              nothing, or a heartbeat when the callback asked for one
a group, once no member is pending           success: the group's counts as JSON (a cancelled group:
                                             failure ``sqsjobs.Cancelled`` with them)
===========================================  =======================================================

**Sizes.** A durable callback's result and a task's output are at most
256 KiB (262,144 bytes: the Lambda API reference, botocore's models up to
1.43.109, and ``SendTaskSuccess``'s ``output``). A job stores at most
``MAX_RESULT_BYTES`` (4 KiB, ``worker/_job_records.py``; ``LARGEST_RESULT_BYTES`` bounds it) and a group's answer
is its counts, so every success fits; ``check_callback`` proves it when a
job is declared with ``callbacks=True``, and a failure's texts are cut to the service's limits
(``ErrorMessage`` 2 KiB here, a task's ``error`` 256 characters and ``cause``
32,768: the cut is marked with ``…``).

**Told, once.** Each answer is sent after the record it tells of is written.
Once the service took it (or said the callback is already closed, which ends
it, logged), the key's record remembers the callback as told
(``callbacks_told``, a number set of digests, and ``callback_told``, what it
was told). A redelivery of a told request sends nothing; a redriven job whose
workflow was told of its failure runs as any redrive does, and its record then
says so (``callback_note``): the workflow is never told twice.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import ConfigurationError
from sqsjobs._job_options import Declaring, JobOption
from sqsjobs.enqueue._envelope import CallbackTo
from sqsjobs.enqueue._sizes import RESULT_ATTRIBUTE_BYTES

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseItem

__all__ = ["DurableCallback", "TaskToken"]

#: the largest answer either service takes (Lambda's ``Result`` in its API reference; Step Functions' ``output``)
MAX_ANSWER_BYTES = 256 * 1024
#: the failure's message, cut to this (Lambda's ``ErrorMessage`` has no documented limit below 1 MB in total)
MAX_ERROR_MESSAGE = 2048
#: Step Functions' ``SendTaskFailure``: ``error`` up to 256 characters, ``cause`` up to 32,768
MAX_TASK_ERROR, MAX_TASK_CAUSE = 256, 32_768
#: what the success of a job that stores its largest result adds around it (``{"...": ...}``), bounded
ANSWER_OVERHEAD = 1024
#: the record's number set of the callbacks told, and what the last one was told
TOLD, TOLD_AS, NOTE = "callbacks_told", "callback_told", "callback_note"
#: the error types a failed request's workflow sees (a durable function: ``CallbackError.message``/``data``)
DEAD_LETTERED, CANCELLED, EXPIRED = "sqsjobs.DeadLettered", "sqsjobs.Cancelled", "sqsjobs.Expired"


class DurableCallback(CallbackTo):
    """A Lambda durable execution's callback id: the job answers it with ``SendDurableExecutionCallback*``.

    Example:
        >>> DurableCallback("Y2FsbGJhY2s=", heartbeat=True).wire()
        {'to': 'lambda', 'id': 'Y2FsbGJhY2s=', 'heartbeat': True}
    """

    def __init__(self, callback_id: str, *, heartbeat: bool = False) -> None:
        super().__init__("lambda", callback_id, heartbeat)


class TaskToken(CallbackTo):
    """A Step Functions task token (``.waitForTaskToken``): the job answers it with ``SendTask*``.

    Example:
        >>> TaskToken("AQCEAAAAKgAAAA").wire()
        {'to': 'states', 'id': 'AQCEAAAAKgAAAA'}
    """

    def __init__(self, token: str, *, heartbeat: bool = False) -> None:
        super().__init__("states", token, heartbeat)


#: the largest result a job's record keeps, bounded from above (``worker/_job_records.py`` ``MAX_RESULT_BYTES``,
#: 4 KiB, plus the room ``enqueue/_sizes.py`` gives it; not imported from there: the worker imports the enqueue)
LARGEST_RESULT_BYTES = RESULT_ATTRIBUTE_BYTES


def check_callback(what: str, error: type[Exception], result_bytes: int = LARGEST_RESULT_BYTES) -> None:
    """Refuse a callback whose success could be larger than the services take (the enqueue's size check).

    Example:
        >>> check_callback("job 'export'", ValueError, result_bytes=300_000)
        Traceback (most recent call last):
        ...
        ValueError: job 'export': its stored result may be 300000 bytes, and a callback's answer is at most ...
    """
    if result_bytes + ANSWER_OVERHEAD > MAX_ANSWER_BYTES:
        raise error(f"{what}: its stored result may be {result_bytes} bytes, and a callback's answer is at most "
                    f"{MAX_ANSWER_BYTES} bytes (256 KiB): return an ID, not the data")


def _declared_callbacks(declaring: Declaring, value: Any) -> bool:
    """``callbacks=``: True or False; not with debounce or dedupe, and only for a job whose answer fits."""
    what = f"job {declaring.job!r}"
    if type(value) is not bool:
        raise ConfigurationError(f"{what}: callbacks must be True or False, got {value!r}")
    if value and (declaring.given.get("debounce") is not None or declaring.given.get("dedupe") is not None):
        raise ConfigurationError(f"{what}: callbacks=True does not combine with debounce or dedupe (an enqueue "
                                 "of those may send nothing, so no callback could travel with it)")
    if value:
        check_callback(what, ConfigurationError)
    return value


#: workflows await the job (``enqueue(callback=...)``, docs/durable.md): its function's role must answer them,
#: and ``sqsjobs check`` says so when it cannot (``validation/callbacks.py``)
CALLBACKS: JobOption[bool] = JobOption("callbacks", False, _declared_callbacks)


def callback_number(callback: CallbackTo) -> int:
    """The callback's digest as a number (52 bits: exact in JSON and DynamoDB), for the record's ``callbacks_told``.

    Example:
        >>> callback_number(DurableCallback("YQ==")) == callback_number(CallbackTo("lambda", "YQ=="))
        True
    """
    digest = hashlib.sha256(f"{callback.service}\0{callback.id}".encode()).hexdigest()
    return int(digest[:13], 16)


# ---------------------------------------------------------------- answers
@dataclass(frozen=True, kw_only=True)
class Answer:
    """What a callback is told: success with ``payload`` (JSON text), or failure with a type, message and data.

    Example:
        >>> Answer(payload="42").succeeded, Answer(error_type=EXPIRED, message="expired").told
        (True, 'failed: sqsjobs.Expired')
    """

    payload: str | None = None
    error_type: str | None = None
    message: str = ""
    data: str | None = None

    @property
    def succeeded(self) -> bool:
        """A success (else a failure)."""
        return self.error_type is None

    @property
    def told(self) -> str:
        """What the record says the workflow was told."""
        return "succeeded" if self.succeeded else f"failed: {self.error_type}"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def succeeded(result: str | None) -> Answer:
    """A success carrying a job's stored result (JSON text; a job that stores none: ``null``).

    Example:
        >>> succeeded('{"thumb": "s3://b/7.png"}').payload, succeeded(None).payload
        ('{"thumb": "s3://b/7.png"}', 'null')
    """
    return Answer(payload=result if result is not None else "null")


def failed(error_type: str, *, key: str, job: str | None, reason: str | None, last_error: str | None) -> Answer:
    """A failure: the reason (and last error) as the message, everything as JSON data.

    Example:
        >>> a = failed(DEAD_LETTERED, key="resize:7", job="resize", reason="exhausted", last_error="IOError: disk")
        >>> a.message, json.loads(a.data)["reason"]
        ('exhausted: IOError: disk', 'exhausted')
    """
    message = ": ".join(part for part in (reason, last_error) if part) or error_type
    data = {"key": key, "job": job, "reason": reason, "last_error": last_error}
    return Answer(error_type=error_type, message=_cut(message, MAX_ERROR_MESSAGE),
                  data=json.dumps(data, separators=(",", ":"), sort_keys=True))


def from_record(kind: str, record: LeaseItem | None, *, key: str, job: str | None) -> Answer:
    """The answer a request whose record says ``kind`` (a group's count: succeeded, dead_lettered...) gets.

    Example:
        >>> from sqsjobs.store._lease import LeaseItem, LeaseState
        >>> done = LeaseItem(key="k", state=LeaseState.DONE, data={"outcome": "succeeded", "result": "[1, 2]"})
        >>> from_record("succeeded", done, key="k", job="j").payload
        '[1, 2]'
    """
    data = record.data if record is not None else {}
    if kind == "succeeded":
        return succeeded(data.get("result"))
    error_type = {"cancelled": CANCELLED, "expired": EXPIRED}.get(kind, DEAD_LETTERED)
    reason = data.get("reason") if kind == "dead_lettered" else data.get("reason") or kind
    return failed(error_type, key=key, job=job, reason=reason if isinstance(reason, str) else kind,
                  last_error=data.get("last_error"))


def group_answer(counts: dict[str, Any], *, cancelled: bool) -> Answer:
    """A finished group's answer: its counts (a cancelled group's: a failure carrying them).

    Example:
        >>> group_answer({"group": "g", "state": "succeeded", "total": 2}, cancelled=False).payload
        '{"group":"g","state":"succeeded","total":2}'
    """
    text = json.dumps(counts, separators=(",", ":"), sort_keys=True)
    if cancelled:
        return Answer(error_type=CANCELLED, message=f"group {counts.get('group')} was cancelled", data=text)
    return Answer(payload=text)


def task_failure(answer: Answer) -> tuple[str, str]:
    """A failure as Step Functions' ``SendTaskFailure`` takes it: ``error`` and ``cause``, cut to their limits.

    Example:
        >>> task_failure(Answer(error_type=EXPIRED, message="expired", data='{"key":"k"}'))
        ('sqsjobs.Expired', '{"key":"k","message":"expired"}')
    """
    data = json.loads(answer.data) if answer.data else {}
    data = data if isinstance(data, dict) else {"data": data}
    cause = json.dumps({**data, "message": answer.message}, separators=(",", ":"), sort_keys=True)
    return _cut(answer.error_type or "sqsjobs.Failed", MAX_TASK_ERROR), _cut(cause, MAX_TASK_CAUSE)
