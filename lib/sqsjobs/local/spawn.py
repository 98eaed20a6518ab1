"""Start child processes from one long-lived thread.

Children ask the kernel for ``PR_SET_PDEATHSIG`` (see ``_child``), which
fires when the *thread* that forked them exits, not the process. Pollers
start cold workers from short-lived invocation threads, so every ``Popen``
goes through this module's thread, which lives as long as the process.
"""

from __future__ import annotations

import queue
import subprocess
import threading
from concurrent.futures import Future
from typing import Any

_requests: queue.Queue[tuple[list[str], dict[str, Any], Future[subprocess.Popen[bytes]]]] = queue.Queue()
_lock = threading.Lock()
_thread: threading.Thread | None = None


def _serve() -> None:
    while True:
        args, options, future = _requests.get()
        try:
            future.set_result(subprocess.Popen(args, **options))
        except BaseException as exc:  # handed to the caller, who raises it
            future.set_exception(exc)


def spawn(args: list[str], **options: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(args, **options)``, run on the spawner thread.

    Example:
        >>> import sys
        >>> spawn([sys.executable, "-c", "pass"]).wait()
        0
    """
    global _thread
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_serve, name="sqsjobs-local-spawner", daemon=True)
            _thread.start()
    future: Future[subprocess.Popen[bytes]] = Future()
    _requests.put((args, options, future))
    return future.result()
