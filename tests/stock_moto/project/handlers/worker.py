"""Lambda entry point for the jobs queue (as `sqsjobs init` writes it)."""

from __future__ import annotations

from typing import Any

from app import app


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    return app.handle_batch(event, context)
