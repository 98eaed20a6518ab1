"""Errors of the local cloud, each one telling the developer what to do.

    LocalCloudError (sqsjobs._errors: part of the one tree, under SqsJobsError)
    ├── PortInUseError        the requested port is taken
    ├── ServerDiedError       the moto server exited under us
    ├── TemplateError         the template cannot be read, translated or resolved
    └── NotRunningError       no local cloud found for a client command
"""

from __future__ import annotations

from sqsjobs._errors import LocalCloudError

__all__ = ["LocalCloudError", "NotRunningError", "PortInUseError", "ServerDiedError", "TemplateError"]


class PortInUseError(LocalCloudError):
    """Raised when the port asked for is already bound on 127.0.0.1."""


class ServerDiedError(LocalCloudError):
    """Raised when the moto server child process exits while in use."""


class TemplateError(LocalCloudError):
    """Raised when a template cannot be parsed, translated or resolved."""


class NotRunningError(LocalCloudError):
    """Raised when a client command finds no running local cloud."""
