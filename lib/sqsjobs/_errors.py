"""The one exception tree of sqsjobs.

::

    SqsJobsError                     root: catch this to catch everything of ours
    ├── ConfigurationError (ValueError)   a setting or job option is missing or impossible
    ├── UnknownJobError (LookupError)     no job is registered under that name
    ├── InvalidArgumentsError (TypeError) arguments do not fit the job's signature / scalar rule
    │   ├── MessageTooLargeError          the message would be over SQS's size limit
    │   └── InvalidDelayError (also a ConfigurationError)  a delay or eta that cannot be honoured
    ├── InvalidEventError (ValueError)    the Lambda event is not an SQS batch
    ├── EnqueueError                      SQS refused a message (after retries)
    │   ├── ReservedAttributeError (ValueError)  a message names an attribute in the ``sqsjobs.`` namespace
    │   └── ScheduleError                 EventBridge Scheduler refused a delayed job's schedule
    ├── StoreError                        the idempotency store failed (not a conflict)
    ├── PeriodBusyError                   a scheduled period is held past this invocation: Lambda retries
    ├── TransactionError                  a DynamoDB transaction (writes + outbox enqueues) was not committed
    ├── GroupError (ValueError)           a job group cannot be built, enqueued or found as asked
    ├── ChainError (ValueError)           a chain cannot be built or enqueued as asked
    ├── QueueNotFoundError (LookupError)  a queue URL, ARN or name leads to no queue
    ├── JobError                          raised *by job code* to steer what happens next
    │   ├── RetryableError                retry after a full-jitter delay (or ``delay=``)
    │   │   └── TimeLimitExceeded         the job ran past its ``time_limit``
    │   ├── PermanentError                do not retry: dead-letter with the reason
    │   │   └── MalformedMessageError     the body cannot be a job (bad JSON, version, ...)
    │   └── BatchItemsFailed              a batch handler names the items that failed, each with its error
    │
    │   the operator's side and the tools: defined where they are raised, public as ``sqsjobs.<name>`` too
    ├── RedriveError                      redrive options are missing or impossible       (sqsjobs.ops._errors)
    │   └── MoveTaskError                 no SQS message move task to cancel              (sqsjobs.ops._errors)
    ├── StatusError                       status cannot tell which queues to look at      (sqsjobs.ops._errors)
    ├── ConsoleError                      the operator console cannot start as asked      (sqsjobs.console.errors)
    ├── CheckUnavailable                  cfn-lint or the bundled lint rules are missing  (sqsjobs.cli.errors)
    └── LocalCloudError                   the local cloud cannot start, run or be reached (sqsjobs.local.errors,
                                          with its subclasses)

The errors of the last group live beside the code that raises them, so the
runtime imports no tool (tests/unit/test_tool_imports.py): :data:`HOMES`
names each one's module, and ``sqsjobs`` imports it there when the name is
first used (``sqsjobs.ConsoleError``, ``from sqsjobs import StatusError``).

Conflicts in the store (a key already claimed, a fence lost) are outcomes,
not exceptions: they are returned as values, logged and counted.

Example:
    >>> try:
    ...     raise PermanentError("invoice 42 was deleted")
    ... except SqsJobsError as error:
    ...     type(error).__name__
    'PermanentError'
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta
from typing import Final, TypeVar

E = TypeVar("E", bound=type[BaseException])

#: the errors defined outside this module (the tree above): public name -> the module that defines it
HOMES: Final = {
    "RedriveError": "sqsjobs.ops._errors",
    "MoveTaskError": "sqsjobs.ops._errors",
    "StatusError": "sqsjobs.ops._errors",
    "ConsoleError": "sqsjobs.console.errors",
    "CheckUnavailable": "sqsjobs.cli.errors",
    "LocalCloudError": "sqsjobs.local.errors",
}
#: the longest delay a retry may ask for: 365 days, as ``sqsjobs.enqueue._delays.MAX_DELAY_SECONDS`` (a test ties them)
MAX_RETRY_DELAY_SECONDS = 365 * 24 * 3600


def public(error: E) -> E:
    """Name ``error`` as users import it, ``sqsjobs.<name>``, in tracebacks: for an error of :data:`HOMES`.

    ``sqsjobs/__init__.py`` does the same for the errors of this module.
    """
    error.__module__ = "sqsjobs"
    return error


class SqsJobsError(Exception):
    """Raised when anything in sqsjobs fails; the root of the tree."""


class ConfigurationError(SqsJobsError, ValueError):
    """Raised when a setting or a job option is missing, unknown or impossible."""


class UnknownJobError(SqsJobsError, LookupError):
    """Raised when a job name is not registered on the app."""


class InvalidArgumentsError(SqsJobsError, TypeError):
    """Raised when job arguments are missing, extra, mistyped or not IDs/scalars."""


class MessageTooLargeError(InvalidArgumentsError):
    """Raised when a job message would be over SQS's size limit; it names the largest arguments."""


class InvalidEventError(SqsJobsError, ValueError):
    """Raised when ``handle_batch`` gets an event that is not an SQS batch (empty or malformed)."""


class InvalidDelayError(InvalidArgumentsError, ConfigurationError):
    """Raised when an enqueue's ``delay`` or ``eta`` cannot be: negative, past 365 days, a naive datetime...

    It is both an ``InvalidArgumentsError`` (bad input to the call) and a
    ``ConfigurationError`` (what a delay outside SQS's range raised before
    delays beyond 15 minutes existed), so either ``except`` catches it.

    Example:
        >>> issubclass(InvalidDelayError, InvalidArgumentsError) and issubclass(InvalidDelayError, ConfigurationError)
        True
    """


class EnqueueError(SqsJobsError):
    """Raised when SQS did not accept a message, after the producer's retries."""


class ReservedAttributeError(EnqueueError, ValueError):
    """Raised when a message carries an extra attribute in the ``sqsjobs.`` namespace.

    The namespace is the worker's: readers trust ``sqsjobs.*`` attributes to
    say why a letter is in the DLQ and where it came from, so a producer may
    not set them (its own two come from the message's ``job`` and ``trace_id``).
    """


class ScheduleError(EnqueueError):
    """Raised when EventBridge Scheduler refused to create, move or delete a delayed job's schedule."""


class StoreError(SqsJobsError):
    """Raised when the idempotency store fails for a reason other than a conflict."""


class PeriodBusyError(SqsJobsError):
    """Raised when a scheduled job's period is held by a lease that outlasts this invocation.

    The scheduler's invocation fails on purpose: Lambda's asynchronous retry
    comes back after that lease, and takes the period over if its holder died.
    """


class TransactionError(SqsJobsError):
    """Raised when ``app.transaction()`` did not commit: nothing was written and nothing enqueued.

    ``reasons`` holds DynamoDB's cancellation code per item (``"None"`` for an
    item that was fine, ``"ConditionalCheckFailed"`` for a failed condition);
    ``unknown_outcome`` is True when DynamoDB did not answer, so the commit may
    have happened and ``commit()`` may be retried with the same token.

    Example:
        >>> TransactionError("cancelled", reasons=("None", "ConditionalCheckFailed")).condition_failed
        True
    """

    def __init__(self, message: str = "", *, reasons: tuple[str, ...] = (), unknown_outcome: bool = False) -> None:
        super().__init__(message)
        self.reasons = reasons
        self.unknown_outcome = unknown_outcome

    @property
    def condition_failed(self) -> bool:
        """True when a condition expression of the transaction did not hold."""
        return "ConditionalCheckFailed" in self.reasons


class GroupError(SqsJobsError, ValueError):
    """Raised when a job group is built wrong (no members, a member that is not a message of a registered job,
    the same key twice, a callback that is not a message), changed after ``enqueue()``, or unknown."""


class ChainError(SqsJobsError, ValueError):
    """Raised when a chain is built wrong (no steps, a step that is not a message of a registered job)."""


class JobError(SqsJobsError):
    """Raised by job code to choose between a retry and the DLQ."""


class RetryableError(JobError):
    """Raised when the job should run again later.

    ``delay`` (seconds or a ``timedelta``, up to 365 days) replaces the
    full-jitter delay for this attempt, e.g. from a ``Retry-After`` header.
    Up to 12 hours the message waits on its queue (its visibility timeout);
    beyond, the worker re-sends it through a one-time EventBridge Scheduler
    schedule (docs/delays.md).

    Example:
        >>> RetryableError("rate limited", delay=20).delay
        20.0
        >>> from datetime import timedelta
        >>> RetryableError("quota resets tomorrow", delay=timedelta(days=1)).delay
        86400.0
    """

    def __init__(self, message: str = "", *, delay: float | timedelta | None = None) -> None:
        super().__init__(message)
        seconds = delay.total_seconds() if isinstance(delay, timedelta) else delay
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int | float)
                                    or not 0 <= seconds <= MAX_RETRY_DELAY_SECONDS):
            raise InvalidDelayError(
                f"RetryableError delay must be 0..{MAX_RETRY_DELAY_SECONDS} s (365 days), got {delay!r}"
            )
        self.delay = None if seconds is None else float(seconds)


class TimeLimitExceeded(RetryableError):
    """Raised inside a job that ran past its ``time_limit``; it counts as a retryable failure."""


class PermanentError(JobError):
    """Raised when retrying cannot help: the message goes to the DLQ with this reason."""


class MalformedMessageError(PermanentError):
    """Raised when a message body cannot be turned into a job call."""


class BatchItemsFailed(JobError):
    """Raised by a batch handler (``@app.job(..., batch=N)``) to name the items that failed, each with its error.

    ``failures`` maps an item's index in the list the handler was given to the
    exception that item ended with; each is classified as if its item had run
    alone (``PermanentError`` → DLQ, ``RetryableError(delay=...)`` → that
    delay). Items it does not name succeeded (docs/jobs.md, Batch handlers).

    Example:
        >>> error = BatchItemsFailed({2: PermanentError("row 2 is gone")})
        >>> error.failures[2], str(error)
        (PermanentError('row 2 is gone'), '1 of the batch failed: item 2: PermanentError: row 2 is gone')
    """

    def __init__(self, failures: Mapping[int, BaseException]) -> None:
        if not isinstance(failures, Mapping) or not all(
                type(i) is int and isinstance(e, BaseException) for i, e in failures.items()):
            raise InvalidArgumentsError("BatchItemsFailed takes a mapping of item index (int) to the exception "
                                        "it ended with")
        shown = "; ".join(f"item {i}: {type(e).__name__}: {e}" for i, e in sorted(failures.items())[:5])
        super().__init__(f"{len(failures)} of the batch failed: {shown}")
        self.failures: dict[int, BaseException] = dict(failures)


class QueueNotFoundError(SqsJobsError, LookupError):
    """Raised when a queue URL, ARN or name does not lead to a queue."""

