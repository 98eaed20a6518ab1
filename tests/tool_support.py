"""The second tool environment tests need: the SAM CLI of .venv-sam, run offline as the Makefile runs it.

`make test` builds .venv-sam before pytest runs (the `unit` target depends on it); a test that needs the
SAM CLI fails with the command to build it, rather than skipping.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAM = ROOT / ".venv-sam" / "bin" / "sam"
SAM_APP_DIR = ROOT / ".venv-sam" / "app-dir"


def python312_bin() -> str:
    """The directory of a python3.12 (sam build needs the functions' runtime): pyenv's, else PATH's."""
    pyenv = shutil.which("pyenv")
    if pyenv:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False).stdout.strip()
        found = sorted(Path(root).glob("versions/3.12.*/bin")) if root else []
        if found:
            return str(found[0])
    python312 = shutil.which("python3.12")
    if python312:
        return str(Path(python312).parent)
    raise AssertionError("python3.12 is needed for sam build (pyenv install 3.12, or put it on PATH)")


def sam_environment(**extra: str) -> dict[str, str]:
    """The Makefile's SAM_ENV: no telemetry, no update check, dummy credentials, one region, python3.12 first."""
    if not SAM.exists():
        raise AssertionError(f"{SAM} is missing: run `make .venv-sam/.installed .venv-sam/app-dir/metadata.json` "
                             "(make test builds it first)")
    env = dict(os.environ)
    env.update(SAM_CLI_TELEMETRY="0", __SAM_CLI_APP_DIR=str(SAM_APP_DIR), AWS_DEFAULT_REGION="us-east-1",
               AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_EC2_METADATA_DISABLED="true")
    env.pop("AWS_SESSION_TOKEN", None)
    env["PATH"] = f"{python312_bin()}{os.pathsep}{env['PATH']}"
    env.update(extra)
    return env


def sam(*args: str, cwd: Path, timeout: float = 900, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run ``sam ARGS`` in ``cwd``; the result (output captured)."""
    return subprocess.run([str(SAM), *args], cwd=cwd, env=sam_environment(**extra_env), capture_output=True,
                          text=True, timeout=timeout, check=False)
