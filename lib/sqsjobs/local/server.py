"""The moto server child process: start on 127.0.0.1, watch, stop.

The server runs in its own process (never a thread of ours) so that function
workers, ``sqsjobs enqueue`` and tests in other processes all reach the same
state over real HTTP, and so that its death is observable and reportable.
"""

from __future__ import annotations

import contextlib
import errno
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from sqsjobs.local.errors import LocalCloudError, PortInUseError, ServerDiedError
from sqsjobs.local.spawn import spawn

HOST = "127.0.0.1"
_READY_TIMEOUT_S = 30.0
#: seconds a stopping server has to save its state before it is killed
STOP_GRACE_S = 5.0


def free_port() -> int:
    """A port on 127.0.0.1 that nobody is bound to right now.

    Example:
        >>> 1024 <= free_port() <= 65535
        True
    """
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def ensure_port_free(port: int) -> None:
    """Raise :class:`PortInUseError` when ``port`` is already bound on 127.0.0.1.

    Example:
        >>> ensure_port_free(free_port())  # a free port passes silently"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        # As the server will: connections of a previous run lingering in
        # TIME_WAIT do not make the port unavailable, a listener does.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                raise PortInUseError(
                    f"port {port} on {HOST} is already in use; stop what holds it, "
                    "pass another --port, or leave --port out to get a free one"
                ) from exc
            raise


@dataclass
class MotoServer:
    """A moto server child process on ``127.0.0.1:port``."""

    port: int
    process: subprocess.Popen[bytes]
    log_path: Path
    #: where the server loads its state from and saves it to (None: it starts empty and keeps nothing)
    snapshot: Path | None = None
    #: after ``stop``: the server's last words when it could not save its state ("" when it did, or had none)
    save_failure: str = ""
    _stopped: bool = field(default=False, repr=False)

    @property
    def endpoint(self) -> str:
        """The URL every AWS client of the local cloud uses."""
        return f"http://{HOST}:{self.port}"

    @classmethod
    def start(cls, port: int | None = None, *, snapshot: Path | None = None) -> MotoServer:
        """Start a server on ``port`` (a free one when ``None``) and wait until it answers.

        With ``snapshot`` it resumes the state saved there and saves it there when stopped
        (``sqsjobs.local.snapshot``).
        """
        if port is None:
            port = free_port()
        else:
            ensure_port_free(port)
        log = tempfile.NamedTemporaryFile(prefix="sqsjobs-moto-", suffix=".log", delete=False)  # noqa: SIM115
        env = dict(os.environ)
        env.setdefault("AWS_DEFAULT_REGION", "us-east-1")
        state = ["--state", str(snapshot)] if snapshot is not None else []
        process = spawn(
            [sys.executable, "-m", "sqsjobs.local._child", "moto", "-H", HOST, "-p", str(port), *state],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            # Own process group: the terminal's Ctrl-C reaches only us, and we
            # stop the server after the pollers that still talk to it.
            start_new_session=True,
        )
        log.close()
        server = cls(port=port, process=process, log_path=Path(log.name), snapshot=snapshot)
        try:
            server._wait_ready()
        except BaseException:
            server.stop()
            raise
        return server

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                tail = self.log_tail()
                if "Address already in use" in tail:
                    raise PortInUseError(
                        f"port {self.port} on {HOST} was taken before the moto server could bind it; "
                        "pass another --port or leave it out"
                    )
                raise ServerDiedError(
                    f"the moto server exited with code {self.process.returncode} while starting:\n{tail}"
                )
            if self.answers():
                return
            time.sleep(0.1)
        raise LocalCloudError(f"the moto server did not answer on {self.endpoint} within {_READY_TIMEOUT_S:.0f} s")

    def answers(self) -> bool:
        """True when the server responds to HTTP right now."""
        try:
            with urllib.request.urlopen(f"{self.endpoint}/moto-api/config", timeout=2) as response:
                return bool(200 <= response.status < 300)
        except (urllib.error.URLError, OSError):
            return False

    def alive(self) -> bool:
        """True while the child process runs."""
        return self.process.poll() is None

    def check(self) -> None:
        """Raise :class:`ServerDiedError` with the server's last output if it has exited."""
        if not self._stopped and not self.alive():
            raise ServerDiedError(
                f"the moto server (pid {self.process.pid}) exited with code {self.process.returncode}; "
                f"the local cloud cannot go on. Last output:\n{self.log_tail()}"
            )

    def log_tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines the server wrote (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no output)"
        return "\n".join(text.splitlines()[-lines:]) or "(no output)"

    def stop(self) -> None:
        """Terminate the server (it saves its state first, when it has a snapshot) and wait until the port is free.

        The server gets ``STOP_GRACE_S`` seconds between SIGTERM and SIGKILL: a save takes well under a
        second for a laptop's queues and tables (``tests/integration/local/test_resume.py`` measures it).
        """
        if self._stopped:
            return
        self._stopped = True
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=5)
                if self.snapshot is not None:
                    self.save_failure = f"the moto server did not save within {STOP_GRACE_S:.0f} s and was killed"
        if self.snapshot is not None and not self.save_failure and self.process.returncode != 0:
            self.save_failure = self.log_tail(3)
        with contextlib.suppress(OSError):
            self.log_path.unlink()
