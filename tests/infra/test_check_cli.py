"""`sqsjobs check TEMPLATE`: the command users run, end to end (a real cfn-lint child process).

The three templates the issue names are each rejected with a message that
names the resource and the fix; the shipped template passes.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from template_support import DELETE, ROOT, TEMPLATE, load_template, mutate

SQSJOBS = [sys.executable, "-c", "import sys; from sqsjobs.cli import main; sys.argv[0] = 'sqsjobs'; main()"]


def check(template: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*SQSJOBS, "check", str(template), *args], capture_output=True, text=True, cwd=cwd, timeout=120
    )


def write(tmp_path: Path, template: dict[str, Any]) -> Path:
    path = tmp_path / "template.json"
    path.write_text(json.dumps(template, indent=1))
    return path


@pytest.fixture(scope="module")
def shipped() -> dict[str, Any]:
    return load_template()


def test_shipped_template_passes(tmp_path: Path) -> None:
    # From outside the repository: the rules come from the installed package, not .cfnlintrc.
    result = check(TEMPLATE, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    # The success line is the command's answer: stdout, as the problems are (issue 25, finding 14).
    assert result.stdout.strip().splitlines()[-1] == f"{TEMPLATE}: no errors from cfn-lint and the sqsjobs rules"


def test_visibility_equal_to_timeout_is_rejected(tmp_path: Path, shipped: dict[str, Any]) -> None:
    template = mutate(shipped, "Resources/JobsQueue/Properties/VisibilityTimeout", 60)
    result = check(write(tmp_path, template), cwd=tmp_path)
    assert result.returncode != 0
    assert "E9101" in result.stdout
    assert "JobsQueue feeds WorkerFunction" in result.stdout
    assert "Fix: set JobsQueue.VisibilityTimeout to at least 91" in result.stdout


def test_queue_without_dlq_is_rejected(tmp_path: Path, shipped: dict[str, Any]) -> None:
    template = mutate(shipped, "Resources/JobsQueue/Properties/RedrivePolicy", DELETE)
    result = check(write(tmp_path, template), cwd=tmp_path)
    assert result.returncode != 0
    assert "E9102 JobsQueue feeds WorkerFunction but has no RedrivePolicy" in result.stdout
    assert "Fix: add an AWS::SQS::Queue for its dead letters" in result.stdout


def test_event_without_report_batch_item_failures_is_rejected(tmp_path: Path, shipped: dict[str, Any]) -> None:
    path = "Resources/WorkerFunction/Properties/Events/Jobs/Properties/FunctionResponseTypes"
    result = check(write(tmp_path, mutate(shipped, path, DELETE)), cwd=tmp_path)
    assert result.returncode != 0
    assert "E9104 WorkerFunction's SQS event Jobs (queue JobsQueue)" in result.stdout
    assert "Fix: add FunctionResponseTypes: [ReportBatchItemFailures]" in result.stdout


def test_parameter_overrides_are_checked_too(tmp_path: Path) -> None:
    # The template's defaults pass; a deployment overriding the timeout must not.
    result = check(TEMPLATE, "-p", "WorkerTimeoutSeconds=900", cwd=tmp_path)
    assert result.returncode != 0
    assert "Timeout 900 s" in result.stdout
    # The value comes from a parameter, so the fix names the parameter to change.
    assert "Fix: set parameter QueueVisibilityTimeoutSeconds (JobsQueue.VisibilityTimeout) to at least 931" in (
        result.stdout.replace("\n", " ")
    )


def test_warnings_alone_exit_zero_unless_strict(tmp_path: Path) -> None:
    result = check(TEMPLATE, "-p", "MaxAttempts=3", cwd=tmp_path)
    assert result.returncode == 0, result.stdout
    assert "W9103" in result.stdout
    assert check(TEMPLATE, "-p", "MaxAttempts=3", "--strict", cwd=tmp_path).returncode != 0


def test_margin_option_reaches_the_rule(tmp_path: Path) -> None:
    # 360 s visibility vs 60 s timeout + 1 s window: a 300 s margin no longer fits.
    result = check(TEMPLATE, "--margin", "300", cwd=tmp_path)
    assert result.returncode != 0
    assert "margin 300 s" in result.stdout


def test_plain_cfn_lint_from_the_repository_root_uses_the_rules(tmp_path: Path, shipped: dict[str, Any]) -> None:
    bad = write(tmp_path, mutate(shipped, "Resources/JobsQueue/Properties/VisibilityTimeout", 60))
    cfn_lint = Path(sys.executable).with_name("cfn-lint")
    result = subprocess.run([str(cfn_lint), str(bad)], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert result.returncode != 0
    assert "E9101" in result.stdout
