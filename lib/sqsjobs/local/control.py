"""How other processes find and talk to the running ``sqsjobs local up`` of their project.

Each project (a template, by its resolved path) has its own files in the user cache
directory, named after a hash of that path: ``~/.cache/sqsjobs/local/<hash>.json`` records the
running cloud (endpoint, control URL, queue URLs, the app's environment), ``<hash>.lock`` is
held by the ``local up`` that runs it, and ``<hash>.moto`` keeps its state between runs
(``sqsjobs.local.snapshot``). So two projects' clouds run side by side, and every command finds
the cloud of the project it is run in: the template in the current directory, or ``--template``.
``$SQSJOBS_LOCAL_STATE`` names one state file instead (the other files sit beside it).

``local up`` also serves a control endpoint on 127.0.0.1 for what only it can do, such as
running a schedule's function in its workers.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any

from sqsjobs.local.errors import AlreadyRunningError, LocalCloudError, NotRunningError

STATE_ENV = "SQSJOBS_LOCAL_STATE"
#: the template a command looks for when none is given
DEFAULT_TEMPLATE = Path("template.yaml")
_KEY_CHARS = 16


@dataclass(frozen=True)
class ProjectFiles:
    """The files of one project's local cloud."""

    template: Path
    state: Path

    @property
    def lock(self) -> Path:
        """Held (``flock``) by the ``local up`` running the cloud."""
        return self.state.with_suffix(".lock")

    @property
    def snapshot(self) -> Path:
        """moto's state saved at the last stop (what the next ``local up`` resumes)."""
        return self.state.with_suffix(".moto")

    @property
    def streams(self) -> Path:
        """Where the stream mappings had got to in each shard at the last stop."""
        return self.state.with_suffix(".streams.json")


def project_files(template: str | Path = DEFAULT_TEMPLATE) -> ProjectFiles:
    """The files of the project whose template is ``template`` (``$SQSJOBS_LOCAL_STATE`` wins).

    Example:
        >>> files = project_files("/work/billing/template.yaml")
        >>> files.state.parent.name, files.state.name == project_key("/work/billing/template.yaml") + ".json"
        ('local', True)
        >>> files.snapshot.suffix, files.state == project_files("/work/billing/../billing/template.yaml").state
        ('.moto', True)
    """
    resolved = Path(template).resolve()
    override = os.environ.get(STATE_ENV)
    if override:
        return ProjectFiles(template=resolved, state=Path(override))
    return ProjectFiles(template=resolved, state=cache_dir() / f"{project_key(resolved)}.json")


def project_key(template: str | Path) -> str:
    """A project's name in the cache: a hash of its template's resolved path (no path is written anywhere).

    Example:
        >>> len(project_key("template.yaml")), project_key("template.yaml") == project_key("./template.yaml")
        (16, True)
    """
    return hashlib.sha256(str(Path(template).resolve()).encode()).hexdigest()[:_KEY_CHARS]


def cache_dir() -> Path:
    """``$XDG_CACHE_HOME/sqsjobs/local``, else ``~/.cache/sqsjobs/local``."""
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "sqsjobs" / "local"


def default_state_path(template: str | Path = DEFAULT_TEMPLATE) -> Path:
    """Where the ``local up`` of ``template``'s project records itself.

    Example:
        >>> default_state_path("template.yaml").suffix
        '.json'
    """
    return project_files(template).state


class ProjectLock:
    """The one ``local up`` of a project: an exclusive ``flock`` on its lock file, released when it exits.

    The kernel drops the lock when the process dies, so a ``kill -9`` leaves nothing stale.

    Example:
        >>> import tempfile
        >>> path = Path(tempfile.mkdtemp()) / "p.lock"
        >>> first = ProjectLock(path); first.acquire()
        >>> try:
        ...     ProjectLock(path).acquire()
        ... except AlreadyRunningError as refused:
        ...     str(refused).startswith(f"a local cloud of this project is already running (pid {os.getpid()}")
        True
        >>> first.release()
    """

    def __init__(self, path: Path, state: Path | None = None) -> None:
        self.path = path
        self.state = state
        self._file: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`AlreadyRunningError` naming the pid that holds it."""
        import fcntl

        self.path.parent.mkdir(parents=True, exist_ok=True)
        handle = self.path.open("a+")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.seek(0)
            holder = handle.read().strip() or "?"
            handle.close()
            raise AlreadyRunningError(self._refusal(holder)) from None
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._file = handle

    def _refusal(self, pid: str) -> str:
        endpoint = ""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            endpoint = ", " + str(json.loads(self.state.read_text())["endpoint"]) if self.state else ""
        return (f"a local cloud of this project is already running (pid {pid}{endpoint}); use it, or stop it "
                f"first: `sqsjobs local down` (or kill {pid})")

    def release(self) -> None:
        """Let the next ``local up`` of the project start."""
        if self._file is not None:
            self._file.close()  # closing the descriptor drops the flock
            self._file = None


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
    """The state of the running local cloud (of this directory's project by default); :class:`NotRunningError`
    when there is none.

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
            f"no local cloud is running (no {path}) for {_template_hint()}; start one with `sqsjobs local up` "
            "in its project (or pass --template)"
        ) from None
    try:
        os.kill(int(state["pid"]), 0)
    except (OSError, KeyError, ValueError):
        raise NotRunningError(
            f"the local cloud recorded in {path} (pid {state.get('pid')}) is gone; start one with `sqsjobs local up`"
        ) from None
    return state


def _template_hint() -> str:
    return f"this project ({DEFAULT_TEMPLATE} here)" if DEFAULT_TEMPLATE.is_file() else "this directory"


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
        >>> stop_running(Path("/nonexistent/state.json"))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        sqsjobs.local.errors.NotRunningError: no local cloud is running (no /nonexistent/state.json) for ...
    """
    import signal

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
