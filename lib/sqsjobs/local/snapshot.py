"""The local cloud's state kept across restarts: moto's backends, pickled by the moto child when it stops.

moto has no persistence of its own (its recorder replays requests, which loses SQS receipts and
timers), but its backends are plain Python objects. The moto child (``serial_moto.serve``) loads
the snapshot before it serves and writes it again when ``local up`` stops it (SIGTERM), within
the stop grace ``server.MotoServer.stop`` allows. What it holds, as it was:

- every queue with its messages: visible, delayed and in flight, with their ids, receive counts and
  receipt handles (timers are wall-clock times, so a delay keeps running while the cloud is down,
  as on AWS);
- every DynamoDB table with its items and stream records, SNS topics, CloudWatch alarms and
  metric data, SES's sent mail, Scheduler's schedule groups and schedules (delayed jobs).

A snapshot is tied to the moto version that wrote it (pickles are not stable across versions):
another version is refused in one line that says to start with ``--fresh``. A service whose
backend cannot be pickled (moto's Lambda holds weak references; the local cloud creates no
function in moto) is left out and named in the header, so ``local up`` can say what was not kept.

File layout: two pickles, a small header (read without moto: :func:`read_header`) and the
backends. Written to a temporary file and renamed, so a reader never sees half a snapshot.
"""

from __future__ import annotations

import copyreg
import io
import os
import pickle
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqsjobs.local.errors import SnapshotError

#: bump when the layout changes
FORMAT = 1


@dataclass(frozen=True)
class Header:
    """What a snapshot says about itself."""

    format: int
    moto: str
    saved_at: float
    services: tuple[str, ...] = ()
    #: service -> why its backend was not kept
    not_kept: dict[str, str] = field(default_factory=dict)


def installed_moto() -> str:
    """The installed moto's version (read from its metadata: moto is not imported).

    Example:
        >>> installed_moto().count(".") >= 1
        True
    """
    from importlib.metadata import version

    return version("moto")


def read_header(path: Path) -> Header | None:
    """The header of the snapshot at ``path``; None when there is none. Damage is a :class:`SnapshotError`.

    Example:
        >>> read_header(Path("/nonexistent/state.moto")) is None
        True
    """
    try:
        with path.open("rb") as stream:
            raw = pickle.load(stream)
    except FileNotFoundError:
        return None
    except (OSError, pickle.UnpicklingError, EOFError, ValueError) as error:
        raise SnapshotError(f"the saved state {path} cannot be read ({error}); start with `sqsjobs local up "
                            "--fresh` (it discards the saved state)") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise SnapshotError(f"the saved state {path} is not a snapshot this sqsjobs writes; start with "
                            "`sqsjobs local up --fresh` (it discards the saved state)")
    return Header(format=FORMAT, moto=str(raw["moto"]), saved_at=float(raw["saved_at"]),
                  services=tuple(raw.get("services", ())), not_kept=dict(raw.get("not_kept", {})))


def check_resumable(path: Path) -> Header | None:
    """The header of a snapshot this moto can load; None when there is none; a one-line error otherwise."""
    header = read_header(path)
    if header is not None and header.moto != installed_moto():
        raise SnapshotError(f"this project's local cloud was saved by moto {header.moto} and this is moto "
                            f"{installed_moto()}: a snapshot cannot move between versions; start with "
                            "`sqsjobs local up --fresh` (it discards the saved state)")
    return header


def load(path: Path) -> Header | None:
    """Put the snapshot's backends into this process's moto (the moto child, before it serves)."""
    header = check_resumable(path)
    if header is None:
        return None
    from moto.backends import get_backend

    with path.open("rb") as stream:
        pickle.load(stream)  # the header, read above
        services: dict[str, list[tuple[str, str, Any]]] = pickle.load(stream)
    for name, entries in services.items():
        backends: Any = get_backend(name)  # type: ignore[call-overload]
        for account, region, backend in entries:
            dict.__setitem__(backends[account], region, backend)
    return header


def save(path: Path) -> Header:
    """Write every moto backend of this process to ``path`` (atomically); the services left out are named."""
    from moto.core.base_backend import BackendDict, backend_lock

    with backend_lock:
        instances: list[Any] = list(BackendDict._instances)  # type: ignore[misc]
        services = {bd.service_name: list(bd.iter_backends()) for bd in instances}
    not_kept: dict[str, str] = {}
    try:
        blob = _dumps(services)
    except Exception:  # find the services that cannot be pickled, keep the others
        for name in list(services):
            try:
                _dumps(services[name])
            except Exception as error:
                not_kept[name] = f"{type(error).__name__}: {error}"
                del services[name]
        blob = _dumps(services)
    header = Header(format=FORMAT, moto=installed_moto(), saved_at=time.time(), services=tuple(sorted(services)),
                    not_kept=not_kept)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with temporary.open("wb") as stream:
        pickle.dump({"format": header.format, "moto": header.moto, "saved_at": header.saved_at,
                     "services": list(header.services), "not_kept": header.not_kept}, stream)
        stream.write(blob)
    temporary.replace(path)
    return header


def _fresh_condition(_: threading.Condition) -> tuple[Any, tuple[()]]:
    return threading.Condition, ()


def _fresh_lock(_: Any) -> tuple[Any, tuple[()]]:
    return threading.Lock, ()


def _fresh_rlock(_: Any) -> tuple[Any, tuple[()]]:
    return threading.RLock, ()


#: locks are not state: a backend's are made anew when it is loaded (moto's SQS queue holds a Condition)
_REDUCERS = {**copyreg.dispatch_table, threading.Condition: _fresh_condition, type(threading.Lock()): _fresh_lock,
             type(threading.RLock()): _fresh_rlock}


def _dumps(value: Any) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.dispatch_table = _REDUCERS
    pickler.dump(value)
    return buffer.getvalue()
