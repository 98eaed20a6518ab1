"""Entry point of every child process the local cloud starts.

Children ask Linux to kill them when their parent dies (``PR_SET_PDEATHSIG``),
so even a ``kill -9`` of ``sqsjobs local up`` or of pytest leaves no moto
server or function worker behind holding a port.

Usage (by the local cloud, not by hand)::

    python -m sqsjobs.local._child moto -H 127.0.0.1 -p 5123 [--state ~/.cache/sqsjobs/local/<hash>.moto]
    python -m sqsjobs.local._child worker
"""

from __future__ import annotations

import ctypes
import ctypes.util
import signal
import sys
from pathlib import Path

_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """Have the kernel send SIGTERM to this process when its parent exits.

    Strictly: when the parent *thread* that forked it exits, which is why the
    local cloud forks every child from one long-lived thread (``spawn``).
    """
    if not sys.platform.startswith("linux"):
        return  # elsewhere the parent's cleanup is the only guard
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return
    libc = ctypes.CDLL(libc_name, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def main(argv: list[str]) -> None:
    """Run the child named by ``argv[0]`` with the rest of the arguments."""
    die_with_parent()
    # Ctrl-C reaches the whole foreground process group; the parent decides
    # when children stop, so they ignore SIGINT and wait for its SIGTERM.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    kind, rest = argv[0], argv[1:]
    if kind == "moto":
        import argparse

        from sqsjobs.local import serial_moto
        from sqsjobs.local.moto_cloudwatch import install

        install()  # GetMetricData with percentiles and metric math
        parser = argparse.ArgumentParser(prog="moto")
        parser.add_argument("-H", "--host", default="127.0.0.1")
        parser.add_argument("-p", "--port", type=int, required=True)
        parser.add_argument("--state", type=Path, default=None, help="load and save the state here")
        args = parser.parse_args(rest)
        serial_moto.serve(args.host, args.port, args.state)
    elif kind == "worker":
        from sqsjobs.local.runtime import serve

        serve()
    else:
        raise SystemExit(f"unknown child kind {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
