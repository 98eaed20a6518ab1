"""`sqsjobs local up` with template.yaml, then `sqsjobs enqueue` from another process, as a developer would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from e2e.e2e_support import E2E_PARAMETERS, wait_for

ROOT = Path(__file__).resolve().parents[2]
SQSJOBS = str(Path(sys.executable).with_name("sqsjobs"))


def sent_subjects(endpoint: str) -> list[str] | None:
    """Subjects of the e-mails sent so far; None when moto's dump failed (it can, while models change)."""
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/data.json", timeout=10) as response:
            data = json.loads(response.read())
    except urllib.error.HTTPError:
        return None
    return [str(m["subject"]) for m in data["ses"]["Message"]]


def test_sqsjobs_enqueue_reaches_the_worker_of_a_running_local_up(tmp_path: Path) -> None:
    state_file = tmp_path / "state.json"
    env = {**os.environ, "SQSJOBS_LOCAL_STATE": str(state_file)}
    parameters = [arg for name, value in E2E_PARAMETERS.items() for arg in ("-p", f"{name}={value}")]
    process = subprocess.Popen([SQSJOBS, "local", "up", *parameters], cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)

    def started() -> str | None:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        return str(json.loads(state_file.read_text())["endpoint"]) if state_file.exists() else None

    def invoice_sent() -> list[str] | None:
        subjects = sent_subjects(endpoint)
        return subjects if subjects is not None and "Invoice 4242" in subjects else None

    try:
        endpoint = wait_for(started, "local up to write its state file")
        enqueued = subprocess.run([SQSJOBS, "enqueue", "invoice-email", "invoice_id=4242"], cwd=ROOT, env=env,
                                  capture_output=True, text=True, timeout=120)
        refused = subprocess.run([SQSJOBS, "enqueue", "invoice-email", "invoice_id=oops"], cwd=ROOT, env=env,
                                 capture_output=True, text=True, timeout=120)
        delayed = subprocess.run([SQSJOBS, "enqueue", "invoice-email", "invoice_id=4243", "--delay", "7200"],
                                 cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        naive = subprocess.run([SQSJOBS, "enqueue", "invoice-email", "invoice_id=4244", "--eta", "2030-01-01T00:00:00"],
                               cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        assert enqueued.returncode == 0, enqueued.stderr
        subjects = wait_for(invoice_sent, "the worker to send Invoice 4242")
    finally:
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=120)

    assert subjects.count("Invoice 4242") == 1
    # A delayed enqueue prints the schedule's ARN and nothing else on stdout: no EMF line (issue 25, finding 12).
    assert delayed.returncode == 0, delayed.stderr
    assert len(delayed.stdout.splitlines()) == 1 and delayed.stdout.startswith("arn:aws:scheduler:")
    assert "_aws" not in delayed.stdout + delayed.stderr and "invoice-email:4243" in delayed.stderr
    assert naive.returncode == 2  # a usage error, in rich's box: one sentence once unwrapped
    assert "has no time zone: add Z (UTC) or an offset" in " ".join(naive.stderr.replace("│", " ").split())
    assert refused.returncode == 1
    assert "error:" in refused.stderr
    assert process.returncode == 0
