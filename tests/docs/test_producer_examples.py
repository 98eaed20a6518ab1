"""docs/producers.md's AWS CLI examples (both shell scripts, the FIFO one included) run against a moto server
and their messages through the worker: docs/examples/verify_producers.py, without the Node.js part (npm)."""

from __future__ import annotations

import os
import subprocess
import sys

from doc_snippets import ROOT


def test_the_aws_cli_examples_enqueue_jobs_the_worker_runs() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_ENDPOINT_URL", "SQSJOBS_"))}
    done = subprocess.run([sys.executable, str(ROOT / "docs" / "examples" / "verify_producers.py"), "--skip-node"],
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "send-message-fifo.sh" in done.stdout  # the FIFO script ran too
