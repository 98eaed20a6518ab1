"""The second tool environment tests need: the SAM CLI of .venv-sam, run offline as the Makefile runs it.

`make test` builds .venv-sam before pytest runs (the `unit` target depends on it); a test that needs the
SAM CLI fails with the command to build it, rather than skipping. bench/support.py holds it (the bench builds a
scaffolded project with it too).
"""

from __future__ import annotations

from pathlib import Path

from bench.support import SAM, SAM_APP_DIR, python312, sam, sam_environment

ROOT = Path(__file__).resolve().parents[1]

__all__ = ["ROOT", "SAM", "SAM_APP_DIR", "python312_bin", "sam", "sam_environment"]


def python312_bin() -> str:
    """The directory of a python3.12 (sam build needs the functions' runtime): pyenv's, else PATH's."""
    return str(Path(python312()).parent)
