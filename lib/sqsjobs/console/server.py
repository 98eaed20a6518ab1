"""Serving the console with uvicorn: in the foreground (``sqsjobs console``) or in a thread (demo, tests).

The socket is bound before uvicorn starts, so a port in use is a one-line
error and ``--port 0`` prints the port it got.
"""

from __future__ import annotations

import errno
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from sqsjobs.console.config import ConsoleConfig
from sqsjobs.console.errors import ConsoleError

if TYPE_CHECKING:
    import uvicorn

    from sqsjobs.console.sources import Sources

_STARTED_WITHIN_S: Final = 30.0


def bind(config: ConsoleConfig) -> socket.socket:
    """A listening socket on ``config.host:config.port``; :class:`ConsoleError` when the port is taken.

    Example:
        >>> sock = bind(ConsoleConfig(queue="jobs", port=0))
        >>> sock.getsockname()[0]
        '127.0.0.1'
        >>> sock.close()
    """
    family = socket.AF_INET6 if ":" in config.host.strip("[]") else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((config.host.strip("[]"), config.port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConsoleError(f"port {config.port} on {config.host} is in use: pass another --port "
                               "(or --port 0 for any free one)") from None
        raise ConsoleError(f"cannot listen on {config.host}:{config.port}: {exc.strerror}") from None
    # Listening now: a browser opened on the announced URL waits in the backlog until uvicorn accepts.
    sock.listen(128)
    return sock


def _uvicorn_server(config: ConsoleConfig, sources: Sources) -> uvicorn.Server:
    import uvicorn

    from sqsjobs.console.app import create_app

    return uvicorn.Server(uvicorn.Config(
        create_app(config, sources), log_level="warning", access_log=False, server_header=False,
        proxy_headers=False, lifespan="off",
    ))


def serve(config: ConsoleConfig, sources: Sources, *, announce: Callable[[str], None]) -> None:
    """Serve in the foreground until Ctrl-C; ``announce`` gets the URL once the port is bound."""
    sock = bind(config)
    server = _uvicorn_server(config, sources)
    announce(config.url(sock.getsockname()[1]))
    server.run(sockets=[sock])


class ConsoleServer:
    """The console served from a background thread (the demo's ``KEEP=1`` and the browser tests)."""

    def __init__(self, config: ConsoleConfig, sources: Sources) -> None:
        self._sock = bind(config)
        self.port: int = self._sock.getsockname()[1]
        self.url = config.url(self.port)
        self._server = _uvicorn_server(config, sources)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="sqsjobs-console", daemon=True)

    @classmethod
    def start(cls, config: ConsoleConfig, sources: Sources) -> ConsoleServer:
        """Start serving and return once requests are answered."""
        server = cls(config, sources)
        server._thread.start()
        deadline = time.monotonic() + _STARTED_WITHIN_S
        while not server._server.started:
            if not server._thread.is_alive() or time.monotonic() > deadline:
                server.stop()
                raise ConsoleError(f"the console did not start on port {server.port}")
            time.sleep(0.05)
        return server

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        self._sock.close()
