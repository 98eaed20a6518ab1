"""Clients pointed at the local moto server (fake credentials, one region), from the one client factory.

What is local here is only the endpoint, the fake credentials and the retry
and pool settings; the clients themselves come from ``sqsjobs._clients.client``
(the process's one botocore session). Also the environment a child process
needs to reach the same server: every client built in a function worker, in
``sqsjobs enqueue`` or in a test honours ``AWS_ENDPOINT_URL``, so runtime code
needs no local-only branch.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from botocore.config import _RetryDict

REGION = "us-east-1"
ACCOUNT_ID = "123456789012"


def local_environment(endpoint: str, region: str = REGION) -> dict[str, str]:
    """Environment variables that send any boto3 client to ``endpoint``.

    Example:
        >>> local_environment("http://127.0.0.1:5000")["AWS_ENDPOINT_URL"]
        'http://127.0.0.1:5000'
    """
    return {
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": region,
        "AWS_REGION": region,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        # Current botocore builds account-based DynamoDB endpoints otherwise.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }


#: the local cloud answers at once or not at all: fail fast, and serve many concurrent callers
LOCAL_RETRIES: _RetryDict = {"max_attempts": 2, "mode": "standard"}
LOCAL_POOL_CONNECTIONS = 64


class Clients:
    """One thread-safe client per service on the local endpoint, created on first use."""

    def __init__(self, endpoint: str, region: str = REGION) -> None:
        self.endpoint = endpoint
        self.region = region
        self._clients: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, service: str) -> Any:
        """The client for ``service`` (``"sqs"``, ``"dynamodb"``, ...)."""
        with self._lock:
            client = self._clients.get(service)
            if client is None:
                from botocore.config import Config

                from sqsjobs._clients import client as make_client

                env = local_environment(self.endpoint, self.region)
                client = make_client(
                    service, endpoint_url=self.endpoint, region_name=self.region,
                    aws_access_key_id=env["AWS_ACCESS_KEY_ID"], aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
                    aws_session_token=env["AWS_SESSION_TOKEN"],
                    config=Config(retries=LOCAL_RETRIES, max_pool_connections=LOCAL_POOL_CONNECTIONS))
                self._clients[service] = client
            return client
