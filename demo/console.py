"""The operator console beside the demo's local cloud (``make demo`` prints its URL)."""

from __future__ import annotations

import threading
from typing import Any

from rich.console import Console

from sqsjobs import ConsoleError
from sqsjobs.console.config import DEFAULT_PORT, ConsoleConfig
from sqsjobs.console.server import ConsoleServer
from sqsjobs.console.sources import Sources


def start_console(cloud: Any, **options: Any) -> ConsoleServer:
    """Serve the console of ``cloud`` on port 8765, or on any free port when 8765 is taken."""
    try:
        config = ConsoleConfig.for_local_cloud(cloud.state(), **{"port": DEFAULT_PORT, **options})
        return ConsoleServer.start(config, Sources.connect(config))
    except ConsoleError:
        config = ConsoleConfig.for_local_cloud(cloud.state(), **{**options, "port": 0})
        return ConsoleServer.start(config, Sources.connect(config))


def hold_open(out: Console, cloud: Any, server: ConsoleServer) -> None:
    """Keep the local cloud and the console running until Ctrl-C (``make demo KEEP=1``)."""
    out.print(f"KEEP=1: the local cloud ({cloud.endpoint}) and the operator console ({server.url}) keep running; "
              "Ctrl-C stops both.", highlight=False)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        out.print("stopping")
