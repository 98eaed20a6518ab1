"""A file of the app that cannot be imported, said in one line: ``path:line: Type: message``.

A typo saved in ``handlers/app.py`` should cost one line where it is and what is wrong, not a
traceback through importlib: ``sqsjobs enqueue`` (``sqsjobs._loading``) and the local cloud's
function workers (``sqsjobs.local.runtime``, under ``local up --reload``) both say it this way.
Stdlib only, so a worker pays nothing for it.

Example:
    >>> try:
    ...     compile("def broken(:\\n", "handlers/app.py", "exec")
    ... except SyntaxError as error:
    ...     print(one_line(error))
    handlers/app.py:1: SyntaxError: invalid syntax
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterable
from pathlib import Path


def one_line(error: BaseException, roots: Iterable[str | Path] = (), *, base: str | None = None) -> str:
    """Where ``error`` was raised while importing code, and what it says, in one line.

    A syntax error names its own file and line; any other error names the innermost frame under
    one of ``roots`` (the project's directories), else the innermost frame of a real file. Paths
    are shown relative to ``base`` (default: the current directory) when they are under it.
    """
    name = type(error).__name__
    if isinstance(error, SyntaxError) and error.filename:  # IndentationError and TabError too
        return f"{_shown(error.filename, base)}:{error.lineno}: {name}: {error.msg}"
    message = (str(error).strip().splitlines() or [""])[0]
    frames = [f for f in traceback.extract_tb(error.__traceback__) if not f.filename.startswith("<")]
    resolved = [Path(r).resolve() for r in roots]
    own = [f for f in frames if any(_under(Path(f.filename), root) for root in resolved)]
    chosen = own or frames
    where = f"{_shown(chosen[-1].filename, base)}:{chosen[-1].lineno}: " if chosen else ""
    return f"{where}{name}: {message}" if message else f"{where}{name}"


def _under(path: Path, root: Path) -> bool:
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return False
    return True


def _shown(filename: str, base: str | None) -> str:
    """``filename`` relative to ``base`` (the current directory) when it is under it (what a user typed)."""
    try:
        relative = os.path.relpath(os.path.abspath(filename), base or os.getcwd())
    except ValueError:  # another drive
        return filename
    return filename if relative.startswith("..") else relative
