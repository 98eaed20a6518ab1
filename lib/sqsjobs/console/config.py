"""What ``sqsjobs console`` was asked to serve, checked before anything binds a port.

Example:
    >>> ConsoleConfig(queue="jobs").url(8765)
    'http://127.0.0.1:8765/'
    >>> try:
    ...     ConsoleConfig(queue="jobs", host="0.0.0.0")
    ... except ConsoleError as refused:
    ...     print(str(refused)[:60])
    --host 0.0.0.0 is reachable from other machines: pass --toke
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import quote

from sqsjobs._metrics import DEFAULT_NAMESPACE
from sqsjobs._settings import (
    ENV_CONSOLE_TOKEN,
    ENV_DLQ_URL,
    ENV_NAMESPACE,
    ENV_QUEUE_URL,
    ENV_SCHEDULE_GROUP,
    ENV_SERVICE,
    ENV_TABLE,
)
from sqsjobs.console.errors import ConsoleError
from sqsjobs.ops._cost import CostOptions
from sqsjobs.ops._status_report import DEFAULT_SAMPLE

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8765
DEFAULT_REFRESH_SECONDS: Final = 5.0
#: a token an attacker on the network cannot guess in a lifetime of tries
MIN_TOKEN_CHARS: Final = 16
#: chart windows the pages offer (hours)
WINDOWS_HOURS: Final = (1, 3, 6, 24)


def is_loopback(host: str) -> bool:
    """True when ``host`` is reachable from this machine only.

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, kw_only=True)
class ConsoleConfig:
    """The console's options: the queues and table (as ``sqsjobs status``), where to listen, who may act."""

    queue: str | None = None
    dlq: str | None = None
    table: str | None = None
    endpoint_url: str | None = None
    region: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    #: the ``service`` dimension of the metrics; None: the only one found
    service: str | None = None
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    read_only: bool = False
    token: str | None = None
    refresh_seconds: float = DEFAULT_REFRESH_SECONDS
    sample: int = DEFAULT_SAMPLE
    alarm_prefix: str | None = None
    #: the schedule group delayed jobs wait in (the job lookup finds a key waiting there)
    schedule_group: str | None = None
    #: how the overview prices the jobs (``--cost-days``, ``--sends-per-request``, ``--price``)
    costs: CostOptions = field(default_factory=CostOptions)

    def __post_init__(self) -> None:
        if not self.queue and not self.dlq:
            from sqsjobs._env_names import did_you_mean

            raise ConsoleError(f"which queue? pass --queue (and --dlq) or set {ENV_QUEUE_URL} / {ENV_DLQ_URL}"
                               f"{did_you_mean(ENV_QUEUE_URL, ENV_DLQ_URL)}")
        if self.token is not None and len(self.token) < MIN_TOKEN_CHARS:
            raise ConsoleError(f"--token must be {MIN_TOKEN_CHARS} characters or more, e.g. "
                               "`python -c 'import secrets; print(secrets.token_urlsafe())'`")
        if not is_loopback(self.host) and not self.token:
            raise ConsoleError(f"--host {self.host} is reachable from other machines: pass --token "
                               f"({MIN_TOKEN_CHARS} characters or more) or set {ENV_CONSOLE_TOKEN}")
        if not 0 <= self.port <= 65535:
            raise ConsoleError(f"--port must be 0..65535, got {self.port}")
        if not 1 <= self.refresh_seconds <= 3600:
            raise ConsoleError(f"--refresh must be 1..3600 seconds, got {self.refresh_seconds}")
        if not 1 <= self.sample <= 1000:
            raise ConsoleError(f"--sample must be 1..1000, got {self.sample}")

    @classmethod
    def for_local_cloud(cls, state: Mapping[str, Any], **options: Any) -> ConsoleConfig:
        """The console of a running local cloud, from its ``state()`` (what ``sqsjobs local up`` records).

        Example:
            >>> state = {"endpoint": "http://127.0.0.1:5000", "region": "us-east-1", "app_env": {
            ...     "SQSJOBS_QUEUE_URL": "http://127.0.0.1:5000/123456789012/jobs", "SQSJOBS_TABLE": "records"}}
            >>> config = ConsoleConfig.for_local_cloud(state, port=0)
            >>> (config.queue, config.table, config.endpoint_url, config.port)
            ('http://127.0.0.1:5000/123456789012/jobs', 'records', 'http://127.0.0.1:5000', 0)
        """
        env = state["app_env"]
        values: dict[str, Any] = {
            "queue": env.get(ENV_QUEUE_URL), "dlq": env.get(ENV_DLQ_URL), "table": env.get(ENV_TABLE),
            "endpoint_url": state["endpoint"], "region": state["region"],
            "namespace": env.get(ENV_NAMESPACE) or DEFAULT_NAMESPACE, "service": env.get(ENV_SERVICE),
            "schedule_group": env.get(ENV_SCHEDULE_GROUP),
        }
        return cls(**{**values, **options})

    def url(self, port: int) -> str:
        """The URL to open (with the token, when there is one) for the console listening on ``port``."""
        host = self.host
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"
        base = f"http://{host}:{port}/"
        return f"{base}?token={quote(self.token, safe='')}" if self.token else base
