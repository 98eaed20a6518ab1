"""The console's error, in the one tree drawn in :mod:`sqsjobs._errors` (public as ``sqsjobs.ConsoleError``).

Example:
    >>> from sqsjobs import SqsJobsError
    >>> issubclass(ConsoleError, SqsJobsError)
    True
"""

from __future__ import annotations

from sqsjobs._errors import SqsJobsError, public


@public
class ConsoleError(SqsJobsError):
    """Raised when ``sqsjobs console`` cannot start as asked: a public host without a token, a missing extra."""
