"""Every fenced Python and shell snippet of README.md and docs/ runs as written (tests/doc_snippets.py has the rules).

One test per page and kind: the page's Python blocks in order in one namespace under moto, or its shell
blocks in order in one bash session (a background block starts `sqsjobs local up`, as a second terminal
would). A block that fails fails its page's test, naming the block. Pages added later are covered by the
glob; a block that cannot run carries a skip marker with its reason, and the last test lists them.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import boto3
import pytest
from aws_support import create_queues, create_table
from doc_snippets import PYTHON, ROOT, SHELL, page_script, pages, shell_environment, snippets
from moto import mock_aws

SHELL_TIMEOUT = 900
#: what a shell page's scratch directory holds: what the docs' commands read
WORKDIR_CONTENT = ("template.yaml", "samconfig.toml", "handlers", "infra", "docs", ".cfnlintrc")


def _cases(kinds: frozenset[str]) -> list[Any]:
    cases = []
    for page in pages():
        if any(s.runnable and s.language in kinds for s in snippets(page)):
            cases.append(pytest.param(page, id=str(page.relative_to(ROOT))))
    return cases


@pytest.mark.moto
@pytest.mark.parametrize("page", _cases(PYTHON))
def test_the_python_snippets_of_the_page_run(page: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    run_python_blocks(page, monkeypatch)


@pytest.mark.moto
def test_the_readme_declares_the_queues_its_jobs_name(monkeypatch: pytest.MonkeyPatch) -> None:
    """Its `queue="critical"` job runs on the README's own app, not only where the environment names the queue.

    Issue 25, finding 13: `@app.job(..., queue="critical")` failed on the README's `app = JobApp()` in a
    project whose template has no critical queue; the page passed here only because this test's environment
    gave SQSJOBS_QUEUE_URL_CRITICAL.
    """
    run_python_blocks(ROOT / "README.md", monkeypatch, unset=("SQSJOBS_QUEUE_URL_CRITICAL",))


def run_python_blocks(page: Path, monkeypatch: pytest.MonkeyPatch, *, unset: tuple[str, ...] = ()) -> None:
    """The page's Python blocks, in order, in one namespace, under moto and the worker's environment."""
    blocks = [s for s in snippets(page) if s.runnable and s.language in PYTHON]
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        queue_url, dlq_url = create_queues(sqs, "docs-jobs", max_attempts=5)
        critical_url, _ = create_queues(sqs, "docs-critical", max_attempts=5)
        create_table(dynamodb, "docs-idempotency")
        boto3.client("scheduler", region_name="us-east-1").create_schedule_group(Name="docs-delayed")
        dynamodb.create_table(TableName="docs-outbox", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST",
                              StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_IMAGE"})
        # What the template gives the worker.
        for name, value in (("SQSJOBS_QUEUE_URL", queue_url), ("SQSJOBS_QUEUE_URL_CRITICAL", critical_url),
                            ("SQSJOBS_DLQ_URL", dlq_url),
                            ("SQSJOBS_TABLE", "docs-idempotency"), ("SQSJOBS_OUTBOX_TABLE", "docs-outbox"),
                            ("SQSJOBS_SCHEDULE_GROUP", "docs-delayed"),
                            ("SQSJOBS_SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/docs-delivery")):
            monkeypatch.setenv(name, value)
        for name in unset:
            monkeypatch.delenv(name)
        # A page that imports the reference app gets it fresh, configured by this page's environment
        # (an earlier test may have imported it under another one); the old modules come back afterwards.
        for name in [n for n in sys.modules if n == "handlers" or n.startswith("handlers.")]:
            monkeypatch.delitem(sys.modules, name)
        namespace: dict[str, Any] = {"__name__": "__snippet__"}
        for block in blocks:
            for table in block.names("tables"):
                create_table(dynamodb, table)
            for name, value in block.environment().items():
                monkeypatch.setenv(name, value)
            for name in block.names("stand-ins"):
                namespace.setdefault(name, MagicMock(name=name))
            try:
                exec(compile(block.code, block.where, "exec"), namespace)  # the page's own example
            except Exception as error:
                pytest.fail(f"{block.where} failed: {type(error).__name__}: {error}\n{block.code}")


@pytest.mark.moto
@pytest.mark.local_cloud
@pytest.mark.timeout(SHELL_TIMEOUT + 60)
@pytest.mark.parametrize("page", _cases(SHELL))
def test_the_shell_snippets_of_the_page_run(page: Path, tmp_path: Path) -> None:
    blocks = [s for s in snippets(page) if s.runnable and s.language in SHELL]
    work = tmp_path / "work"
    work.mkdir()
    for name in WORKDIR_CONTENT:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, work / name, ignore=shutil.ignore_patterns("__pycache__", "node_modules"))
        elif source.exists():
            shutil.copy2(source, work / name)
    logs = tmp_path / "logs"
    logs.mkdir()
    script = tmp_path / "page.sh"
    script.write_text(page_script(blocks, logs))
    done = subprocess.run(["bash", str(script)], cwd=work, env=shell_environment(tmp_path),
                          capture_output=True, text=True, timeout=SHELL_TIMEOUT, check=False)
    if done.returncode != 0:
        output = done.stdout + done.stderr
        failed = output.rsplit("### snippet ", 1)[-1] if "### snippet " in output else output
        pytest.fail(f"exit {done.returncode} in snippet {failed[-6000:]}")


def test_every_block_runs_or_says_why_not() -> None:
    """Each page parses (markers well formed), and what is skipped is listed with its reason."""
    skipped = []
    runnable = 0
    for page in pages():
        for block in snippets(page):
            if block.language not in PYTHON | SHELL:
                continue
            if block.runnable:
                runnable += 1
            else:
                skipped.append(f"{block.where}: {block.directives['skip']}")
            assert "background" not in block.directives or block.language in SHELL, (
                f"{block.where}: only shell blocks run in the background")
    assert runnable >= 30, runnable
    print("\n".join(["skipped snippets:", *skipped]))  # shown with -s or -rA
