"""``sqsjobs.client(service)``: an AWS client for a job, from the botocore session the worker already has.

The public face of the one client factory (``sqsjobs._clients``, whose
internals are its own business): a job that calls ``boto3.client`` gets
boto3's default session, which reads the service models, the endpoint data
and the credentials a second time on a cold start, and imports boto3; a
client made here costs its service's model only. Nothing is imported or built
until the first call, so ``import sqsjobs`` stays cheap.

Clients are shared as the runtime's own are (``sqsjobs._runtime``): one per
service and arguments, kept with the key of the ``AWS_*`` environment it was
built in (``sqsjobs._environment``). A call in the same environment returns
the same client; a call after the environment changed (a test fixture's
endpoint, region or credentials; moto's ``mock_aws`` sets its own keys)
builds a new one, so a client made for one endpoint never serves another. A
job therefore calls ``sqsjobs.client("ses")`` where it needs it, with no
cache of its own to clear between tests. Once built, a call costs a scan of
the environment and a dictionary look-up (33 µs with ``timeit``, of which the
scan 21 µs, on a loaded two-core machine; ``boto3.client`` takes
milliseconds), never a model read: call it once per job run, not per item.

At most :data:`MAX_SHARED` clients are kept; past that the oldest goes. A
``config=Config(...)`` made anew at each call is a new key each time (a
``Config`` compares by identity): make it once, at module level, and the
calls share one client.
"""

from __future__ import annotations

import threading
from typing import Any

from sqsjobs._environment import AWS, environment_key

#: the clients kept at most (one per service and arguments: a job uses a few)
MAX_SHARED = 64

_lock = threading.Lock()
#: the ``AWS_*`` environment's key, and the clients built in it, by service and arguments
_shared: tuple[int, dict[tuple[str, frozenset[tuple[str, Any]]], Any]] = (0, {})


def client(service_name: str, **kwargs: Any) -> Any:
    """The shared client of ``service_name`` from the worker's own botocore session; ``kwargs`` as for ``boto3.client``.

    One client per service and arguments while the ``AWS_*`` environment is
    unchanged (see the module): call it where the job uses the client; it is
    built on the first call, never at import (an import that builds a client
    slows every cold start and needs a region before the test or the handler
    has set one). The region comes from ``region_name``, ``AWS_REGION`` or
    ``AWS_DEFAULT_REGION`` (a missing one is a ``ConfigurationError`` naming
    them); retries are botocore's standard mode. Arguments that cannot be
    hashed get a new client each call. A service that this installation's
    botocore lacks (a Lambda bundle keeps only the services it lists) is a
    ``ConfigurationError`` naming the list to edit.

    Example:
        >>> import sqsjobs
        >>> ses = sqsjobs.client("ses", region_name="eu-west-1")
        >>> ses is sqsjobs.client("ses", region_name="eu-west-1"), ses.meta.service_model.service_name
        (True, 'ses')
        >>> sqsjobs.client("ses", region_name="us-east-1") is ses  # other arguments: another client
        False
    """
    global _shared
    environment = environment_key(prefixes=AWS)
    try:
        wanted = (service_name, frozenset(kwargs.items()))
        known, built = _shared
        made = built.get(wanted) if known == environment else None
        if made is not None:
            return made
    except TypeError:  # an argument that cannot be a key: a client of its own
        return _build(service_name, kwargs)
    with _lock:
        known, built = _shared
        if known != environment:
            built = {}  # the clients of another environment go: never served again
            _shared = (environment, built)
        made = built.get(wanted)
        if made is None:
            made = _build(service_name, kwargs)
            while len(built) >= MAX_SHARED:
                del built[next(iter(built))]  # the oldest: arguments made anew at each call cannot grow it
            built[wanted] = made
        return made


def _build(service_name: str, kwargs: dict[str, Any]) -> Any:
    from sqsjobs import _clients

    return _clients.client(service_name, **kwargs)
