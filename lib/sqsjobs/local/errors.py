"""Errors of the local cloud, each one telling the developer what to do.

    LocalCloudError (public as sqsjobs.LocalCloudError: the one tree, drawn in sqsjobs._errors)
    ├── PortInUseError        the requested port is taken
    ├── ServerDiedError       the moto server exited under us
    ├── TemplateError         the template cannot be read, translated or resolved
    ├── NotRunningError       no local cloud found for a client command
    ├── AlreadyRunningError   the project's local cloud runs already (``local up`` twice)
    └── SnapshotError         the state saved at the last stop cannot be resumed
"""

from __future__ import annotations

from sqsjobs._errors import SqsJobsError, public

__all__ = ["AlreadyRunningError", "LocalCloudError", "NotRunningError", "PortInUseError", "ServerDiedError",
           "SnapshotError", "TemplateError"]


@public
class LocalCloudError(SqsJobsError):
    """Raised when the local cloud cannot start, run or be reached."""


class PortInUseError(LocalCloudError):
    """Raised when the port asked for is already bound on 127.0.0.1."""


class ServerDiedError(LocalCloudError):
    """Raised when the moto server child process exits while in use."""


class TemplateError(LocalCloudError):
    """Raised when a template cannot be parsed, translated or resolved."""


class NotRunningError(LocalCloudError):
    """Raised when a client command finds no running local cloud."""


class AlreadyRunningError(LocalCloudError):
    """Raised when ``local up`` finds its project's cloud already running (it names the pid)."""


class SnapshotError(LocalCloudError):
    """Raised when the state saved at the last stop cannot be resumed (another moto version, a damaged file)."""
