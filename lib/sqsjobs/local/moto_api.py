"""What only moto's own API tells: the mail SES "sent".

``/moto-api/data.json`` dumps moto's models. It is built while other requests
change them, so it can fail with a 500 now and then: reads are retried.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from typing import Any

_ATTEMPTS = 5


def model_data(endpoint: str) -> dict[str, Any]:
    """moto's model dump (service -> model -> instances)."""
    for attempt in range(_ATTEMPTS):
        try:
            with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=30) as response:
                data: dict[str, Any] = json.loads(response.read())
                return data
        except urllib.error.HTTPError:
            if attempt == _ATTEMPTS - 1:
                raise
            time.sleep(0.2)
    raise AssertionError("unreachable")


def sent_emails(endpoint: str) -> list[dict[str, Any]]:
    """Every e-mail SES accepted, as ``{"id", "source", "destinations", "subject", "body"}``.
    """
    ses = model_data(endpoint).get("ses", {})
    sent: list[dict[str, Any]] = []
    for kind in ("Message", "TemplateMessage", "RawMessage"):
        for message in ses.get(kind, []):
            sent.append(
                {
                    "id": message.get("id"),
                    "source": message.get("source"),
                    "destinations": message.get("destinations"),
                    "subject": message.get("subject"),
                    "body": message.get("body"),
                    **({"raw_data": message["raw_data"]} if "raw_data" in message else {}),
                }
            )
    return sent
