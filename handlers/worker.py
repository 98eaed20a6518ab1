"""Lambda entry point for the jobs queue: hand the SQS batch to the app."""

from __future__ import annotations

from typing import Any

from app import app  # type: ignore[import-not-found]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``{"batchItemFailures": [...]}`` for Lambda's SQS event source mapping."""
    return app.handle_batch(event, context)
