"""A cheap key of the environment that configures sqsjobs: what chose its settings and its AWS clients.

Settings and clients are resolved on first use and cached (``sqsjobs._runtime``,
``sqsjobs._clients``); the cache is valid while this key is unchanged. The key
covers every variable botocore reads to choose an endpoint, a region or
credentials (``AWS_*``: ``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_PROFILE``,
``AWS_ACCESS_KEY_ID``, ``AWS_CONFIG_FILE``...), every ``SQSJOBS_*`` setting and
Powertools' ``POWERTOOLS_*``. A test fixture that sets any of them gets
settings and clients built for its values; in Lambda they never change, so
everything is built once per process.

The credentials' secrets and tokens are left out (``ROTATING``): they change
under one credentials source, which botocore reads again when it refreshes
(Lambda SnapStart's container token may differ after a restore, and must not
throw away what the snapshot built); the source itself is in (the key id, the
profile, the container credentials' URI). The key is a hash: nothing of the
environment is kept in it. One scan of the environment costs a few
microseconds; the runtime takes it once per batch and once per operation
(``Runtime.pinned``), never per message.

Example:
    >>> key = environment_key({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "HOME": "/root"})
    >>> key == environment_key({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "HOME": "/tmp"})
    True
    >>> key == environment_key({"AWS_ENDPOINT_URL": "http://127.0.0.1:5001", "HOME": "/root"})
    False
    >>> key == environment_key({"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "AWS_SESSION_TOKEN": "refreshed"})
    True
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

#: the variables that configure sqsjobs' settings (``SQSJOBS_*``, ``POWERTOOLS_*``) and botocore (``AWS_*``)
CONFIGURING = ("AWS_", "SQSJOBS_", "POWERTOOLS_")
#: what configures a botocore session and its clients
AWS = ("AWS_",)
#: values that rotate under one credentials source (botocore reads them again when it refreshes)
ROTATING = frozenset({"AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN",
                      "AWS_CONTAINER_AUTHORIZATION_TOKEN"})


def environment_key(environ: Mapping[str, str] | None = None, prefixes: tuple[str, ...] = CONFIGURING) -> int:
    """A hash of the variables of ``environ`` (default ``os.environ``) whose names start with ``prefixes``.

    Example:
        >>> environment_key({"AWS_REGION": "eu-west-1"}, AWS) == environment_key({"AWS_REGION": "us-east-1"}, AWS)
        False
    """
    env = os.environ if environ is None else environ
    return hash(frozenset([(name, env[name]) for name in env if name.startswith(prefixes) and name not in ROTATING]))


F = TypeVar("F", bound=Callable[..., Any])


def pinned_runtime(method: F) -> F:
    """Run ``method`` of an object holding a ``runtime`` under ``runtime.pinned()``: one look at the environment.

    ``Job.enqueue`` is one: its message, its queue and its client then come from one configuration.
    """
    @functools.wraps(method)
    def pinned(self: Any, *args: Any, **kwargs: Any) -> Any:
        with self.runtime.pinned():
            return method(self, *args, **kwargs)

    return cast(F, pinned)
