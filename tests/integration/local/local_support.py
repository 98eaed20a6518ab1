"""Helpers shared by the local cloud's integration tests."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from sqsjobs.local.output import Output

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "fixture" / "template.yaml"
BROKEN = HERE / "broken" / "template.yaml"


class Recorder:
    """Collects the cloud's events and the functions' log lines."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.logs: list[tuple[str, str]] = []

    def output(self) -> Output:
        return Output(event=lambda level, text: self.events.append((level, text)),
                      log=lambda function, line: self.logs.append((function, line)))

    def text(self) -> str:
        return "\n".join(t for _, t in self.events)


def wait_until(condition: Callable[[], object], what: str, *, ceiling: float = 180.0) -> None:
    """Poll ``condition`` until it holds; ``ceiling`` seconds only bound a hang (a loaded machine is slow)."""
    give_up = time.monotonic() + ceiling
    while not condition():
        if time.monotonic() > give_up:
            raise AssertionError(f"still waiting for {what} after {ceiling:.0f} s")
        time.sleep(0.05)
