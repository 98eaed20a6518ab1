"""Helpers shared by the local cloud's integration tests."""

from __future__ import annotations

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
