"""`sqsjobs enqueue`: placeholder until its issue lands (it registers nothing yet)."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app`` (none yet)."""
