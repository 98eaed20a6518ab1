"""``sqsjobs.client(service)``: an AWS client for a job, from the botocore session the worker already has.

The public face of the one client factory (``sqsjobs._clients``, whose
internals are its own business): a job that calls ``boto3.client`` gets
boto3's default session, which reads the service models, the endpoint data
and the credentials a second time on a cold start, and imports boto3; a
client made here costs its service's model only. Nothing is imported or built
until the first call, so ``import sqsjobs`` stays cheap.
"""

from __future__ import annotations

from typing import Any


def client(service_name: str, **kwargs: Any) -> Any:
    """A client of ``service_name`` from the worker's own botocore session; ``kwargs`` as for ``boto3.client``.

    Make it once per cold start, on first use (``functools.cache``), never at
    import: an import that builds a client slows every cold start and needs a
    region before the test or the handler has set one. The region comes from
    ``region_name``, ``AWS_REGION`` or ``AWS_DEFAULT_REGION`` (a missing one is
    a ``ConfigurationError`` naming them); retries are botocore's standard mode.

    Example:
        >>> from functools import cache
        >>> import sqsjobs
        >>> @cache
        ... def ses():  # a job's client, made on its first call
        ...     return sqsjobs.client("ses", region_name="eu-west-1")
        >>> ses() is ses(), ses().meta.service_model.service_name, ses().meta.region_name
        (True, 'ses', 'eu-west-1')
    """
    from sqsjobs import _clients

    return _clients.client(service_name, **kwargs)
