"""``local up --reload``: notice edits under the functions' ``CodeUri`` and restart their workers.

A stdlib poll of file sizes and modification times (no watcher dependency):
cheap for a handlers directory, and the same on every platform. Only the
function workers restart; the moto server, its queues, tables and the DLQ
keep their contents.

Example:
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> watcher = CodeWatcher([folder])
    >>> _ = (folder / "app.py").write_text("x = 1")
    >>> [p.name for p in watcher.poll()]
    ['app.py']
    >>> watcher.poll()
    []
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from pathlib import Path

#: directories whose contents are never code the functions read
IGNORED_DIRECTORIES = frozenset({"__pycache__", ".git", ".pytest_cache", ".mypy_cache", ".ruff_cache", ".venv",
                                 "node_modules", ".aws-sam"})
IGNORED_SUFFIXES = (".pyc", ".pyo", ".swp", "~")
#: seconds between two looks
POLL_INTERVAL = 1.0

Snapshot = dict[Path, tuple[int, int]]


def snapshot(roots: Iterable[Path]) -> Snapshot:
    """``{file: (size, mtime_ns)}`` for every file under ``roots`` that could be code or data the code reads."""
    files: Snapshot = {}
    for root in roots:
        for directory, subdirectories, names in os.walk(root):
            subdirectories[:] = [d for d in subdirectories if d not in IGNORED_DIRECTORIES]
            for name in names:
                if name.endswith(IGNORED_SUFFIXES):
                    continue
                path = Path(directory) / name
                try:
                    stat = path.stat()
                except OSError:  # deleted between the listing and the stat
                    continue
                files[path] = (stat.st_size, stat.st_mtime_ns)
    return files


class CodeWatcher:
    """Tells which files under ``roots`` changed (added, edited, deleted) since the last look."""

    def __init__(self, roots: Iterable[Path]) -> None:
        self.roots = sorted({Path(r).resolve() for r in roots})
        self._last = snapshot(self.roots)

    def poll(self) -> list[Path]:
        """The files that changed since the previous poll (or since the watcher was made), sorted."""
        current = snapshot(self.roots)
        changed = {path for path in current.keys() | self._last.keys() if current.get(path) != self._last.get(path)}
        self._last = current
        return sorted(changed)


class ReloadLoop:
    """A daemon thread polling a ``CodeWatcher`` and calling ``on_change(files)`` after each change."""

    def __init__(self, watcher: CodeWatcher, on_change: Callable[[list[Path]], None],
                 interval: float = POLL_INTERVAL) -> None:
        self.watcher = watcher
        self.on_change = on_change
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="local-reload", daemon=True)

    def start(self) -> None:
        """Start polling."""
        self._thread.start()

    def stop(self) -> None:
        """Stop polling (the current reload, if any, finishes first)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            changed = self.watcher.poll()
            if changed:
                self.on_change(changed)
