"""Lambda entry point for the jobs queue: hand the SQS batch to the app.

With the template's ``SnapStart=true``, the first batch's set-up (clients,
store, processor, the reference app's SES and orders clients) happens before
the snapshot instead (``sqsjobs.prepare_snapstart``); without it, this costs nothing.
"""

from __future__ import annotations

from typing import Any

from app import app, orders_client, ses_client  # type: ignore[import-not-found]

from sqsjobs import prepare_snapstart

prepare_snapstart(app, ses_client, orders_client)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``{"batchItemFailures": [...]}`` for Lambda's SQS event source mapping."""
    return app.handle_batch(event, context)
