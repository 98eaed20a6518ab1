"""What the CLI prints when its output is a pipe or a file (issue 25, finding 14): tables at full width."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_table_written_to_a_pipe_is_not_wrapped_at_80_columns() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    done = subprocess.run([sys.executable, "-c", "from sqsjobs.cli import main; main()", "jobs"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    rows = {line.split("│")[1].strip(): line for line in done.stdout.splitlines()
            if line.count("│") > 3 and line.split("│")[1].strip()}
    # one line per job, its key and options beside it (wrapped at 80 they would be cut into several lines)
    assert "invoice-email:{invoice_id}" in rows["invoice-email"]
    assert "cron(0 2 * * ? *)" in rows["nightly-report"]
    assert max(len(line) for line in done.stdout.splitlines()) > 80
