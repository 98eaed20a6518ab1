"""Lambda entry point for EventBridge Scheduler: fire a scheduled job once per period.

The schedule's input is ``{"job": "<name>", "scheduled_time": "<aws.scheduler.scheduled-time>"}``;
the app takes the period's lease (``lock#<job>:<period>``) and runs the job
only if no other scheduler has, logging why when it does nothing.
"""

from __future__ import annotations

from typing import Any

from app import app  # type: ignore[import-not-found]


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """What this tick did: ``{"job", "period", "fired", "reason", ...}``."""
    return app.fire_schedule(event, context)
