"""The operator's errors: what ``sqsjobs redrive``, ``sqsjobs status``, the console and the redrive function raise.

They belong to the one tree drawn in :mod:`sqsjobs._errors` and are public as
``sqsjobs.RedriveError`` and so on; they live here so that the core never
names the operator's side.

Example:
    >>> from sqsjobs import SqsJobsError
    >>> issubclass(MoveTaskError, RedriveError) and issubclass(StatusError, SqsJobsError)
    True
"""

from __future__ import annotations

from sqsjobs._errors import SqsJobsError, public


@public
class RedriveError(SqsJobsError):
    """Raised when redrive options are missing or impossible (no DLQ, a bad rate, filters with --native)."""


@public
class MoveTaskError(RedriveError):
    """Raised when there is no running message move task to cancel."""


@public
class StatusError(SqsJobsError):
    """Raised when status cannot tell which queues to look at."""
