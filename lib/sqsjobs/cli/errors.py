"""The command line's error, in the one tree drawn in :mod:`sqsjobs._errors` (public as ``sqsjobs.CheckUnavailable``).

Example:
    >>> from sqsjobs import SqsJobsError
    >>> issubclass(CheckUnavailable, SqsJobsError)
    True
"""

from __future__ import annotations

from sqsjobs._errors import SqsJobsError, public


@public
class CheckUnavailable(SqsJobsError):
    """Raised when cfn-lint or the bundled lint rules are not installed."""
