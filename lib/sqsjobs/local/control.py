"""How other processes find and talk to a running ``sqsjobs local up``.

``local up`` writes a small state file (endpoint, control URL, queue URLs,
the app's environment) and serves a control endpoint on 127.0.0.1 for what
only it can do, such as running a schedule's function in its workers.
``sqsjobs enqueue`` and ``sqsjobs local fire`` read the state file.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from sqsjobs.local.errors import LocalCloudError, NotRunningError

STATE_ENV = "SQSJOBS_LOCAL_STATE"


def default_state_path() -> Path:
    """Where ``local up`` records itself: ``$SQSJOBS_LOCAL_STATE`` or the user cache directory.

    Example:
        >>> default_state_path().name
        'local-cloud.json'
    """
    override = os.environ.get(STATE_ENV)
    if override:
        return Path(override)
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "sqsjobs" / "local-cloud.json"


def write_state(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (readers never see half a file).

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "state.json"
        >>> write_state(path, {"pid": 1}); json.loads(path.read_text())
        {'pid': 1}"""
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(state, indent=2))
    temporary.replace(path)


def remove_state(path: Path, pid: int) -> None:
    """Remove the state file if it still describes process ``pid``.

    Example:
        >>> remove_state(Path("/nonexistent/state.json"), 1)  # nothing there: nothing to do"""
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == pid:
            path.unlink()


def read_state(path: Path | None = None) -> dict[str, Any]:
    """The state of the running local cloud; :class:`NotRunningError` when there is none.

    Example:
        >>> try:
        ...     read_state(Path("/nonexistent/state.json"))
        ... except NotRunningError as exc:
        ...     print(str(exc)[:29])
        no local cloud is running (no
    """
    path = path or default_state_path()
    try:
        state: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        raise NotRunningError(
            f"no local cloud is running (no {path}); start one with `sqsjobs local up`"
        ) from None
    try:
        os.kill(int(state["pid"]), 0)
    except (OSError, KeyError, ValueError):
        raise NotRunningError(
            f"the local cloud recorded in {path} (pid {state.get('pid')}) is gone; start one with `sqsjobs local up`"
        ) from None
    return state


def call(state: dict[str, Any], action: str, payload: dict[str, Any], timeout: float = 120.0) -> dict[str, Any]:
    """POST ``payload`` to the control endpoint's ``action`` and return its JSON answer."""
    request = urllib.request.Request(
        f"{state['control']}/{action}",
        data=json.dumps(payload).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            answer: dict[str, Any] = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        answer = json.loads(exc.read() or b"{}")
        answer.setdefault("error", f"HTTP {exc.code}")
    except (urllib.error.URLError, OSError) as exc:
        raise NotRunningError(f"the local cloud does not answer at {state['control']}: {exc}") from exc
    return answer


Action = Callable[[dict[str, Any]], dict[str, Any]]


class ControlServer:
    """A tiny JSON-over-HTTP server on 127.0.0.1 dispatching ``POST /<action>``.

    Example:
        >>> server = ControlServer({"ping": lambda payload: {"pong": True}})
        >>> server.start()
        >>> call({"control": server.url}, "ping", {})
        {'pong': True}
        >>> server.stop()
    """

    def __init__(self, actions: dict[str, Action]) -> None:
        actions_ = actions

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                action = actions_.get(self.path.strip("/"))
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    payload = json.loads(self.rfile.read(length) or b"{}")
                    if action is None:
                        status, answer = 404, {"error": f"unknown action {self.path}"}
                    else:
                        status, answer = 200, action(payload)
                except Exception as exc:  # report to the client instead of dropping the connection
                    status, answer = 500, {"error": f"{type(exc).__name__}: {exc}"}
                body = json.dumps(answer, default=str).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return  # the terminal belongs to the functions' logs

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="control", daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the control endpoint."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and free the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def stop_running(path: Path | None = None, *, timeout: float = 60.0) -> int:
    """Ask the running local cloud to stop (its control endpoint, else SIGTERM) and wait until it has; its pid.

    Example:
        >>> stop_running(Path("/nonexistent/state.json"))
        Traceback (most recent call last):
        ...
        sqsjobs.local.errors.NotRunningError: no local cloud is running (no /nonexistent/state.json); start one \
with `sqsjobs local up`
    """
    import signal
    import time

    state = read_state(path)
    pid = int(state["pid"])
    try:
        call(state, "stop", {}, timeout=10)
    except NotRunningError:  # the control endpoint does not answer: the signal does the same
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            return pid
        time.sleep(0.2)
    raise LocalCloudError(f"the local cloud (pid {pid}) did not stop within {timeout:.0f} s; kill it: kill {pid}")


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (an exited child its parent has not reaped yet counts as gone)."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    with contextlib.suppress(OSError, IndexError):
        if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True
