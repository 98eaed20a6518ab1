"""`sqsjobs enqueue` as a user's shell sets it up (issue 30, item 7), against moto: the environment's queue, a
deduplicated job refused with a word that says so, and a misspelt variable named."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_support import create_queues, create_table
from moto import mock_aws
from typer.testing import CliRunner

from sqsjobs.cli import build_app
from sqsjobs.testing import messages_in

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[dict[str, Any]]:
    """The reference app's project, no local cloud running, and a queue and table on (in-process) moto."""
    monkeypatch.chdir(ROOT)  # handlers.app:app, and the template whose local cloud is not running
    monkeypatch.setenv("SQSJOBS_LOCAL_STATE", str(tmp_path / "no-local-cloud.json"))
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url, _ = create_queues(sqs, "shell-jobs")
        create_table(boto3.client("dynamodb", region_name="us-east-1"), "shell-records")
        yield {"sqs": sqs, "queue_url": queue_url}


def invoke(*arguments: str) -> Any:
    return CliRunner(env={"COLUMNS": "250"}).invoke(build_app(), list(arguments))


def test_outside_a_local_cloud_the_environments_queue_is_used(shell: dict[str, Any],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    # It said "no local cloud is running" and ignored SQSJOBS_QUEUE_URL.
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", shell["queue_url"])

    result = invoke("enqueue", "invoice-email", "invoice_id=42")

    assert result.exit_code == 0, result.output
    (message,) = messages_in(shell["sqs"], shell["queue_url"])
    assert result.stdout.strip() == message["MessageId"]
    assert json.loads(message["Body"])["args"] == {"invoice_id": 42}


def test_without_a_queue_or_a_local_cloud_the_error_says_both_ways(shell: dict[str, Any]) -> None:
    result = invoke("enqueue", "invoice-email", "invoice_id=42")

    assert result.exit_code == 1
    assert "no local cloud" in result.stderr and "set SQSJOBS_QUEUE_URL" in result.stderr
    assert messages_in(shell["sqs"], shell["queue_url"]) == []


def test_a_misspelt_queue_variable_gets_a_did_you_mean(shell: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE", shell["queue_url"])

    result = invoke("enqueue", "invoice-email", "invoice_id=42")

    assert result.exit_code == 1
    assert "SQSJOBS_QUEUE is set, which sqsjobs does not read: did you mean SQSJOBS_QUEUE_URL?" in result.stderr


def test_a_deduplicated_job_enqueued_twice_is_sent_once_and_the_second_says_duplicate(
        shell: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # It printed the first request's id twice and never said "duplicate".
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", shell["queue_url"])
    monkeypatch.setenv("SQSJOBS_TABLE", "shell-records")

    first = invoke("enqueue", "account-export", "account_id=7")
    second = invoke("enqueue", "account-export", "account_id=7")

    assert (first.exit_code, second.exit_code) == (0, 0), first.output + second.output
    request = first.stdout.strip()
    assert request and "duplicate" not in first.stderr
    assert second.stdout == ""  # nothing was sent: no id to print
    assert second.stderr.startswith(f"duplicate: key 'account-export:7' is held by request {request}")
    assert "nothing sent" in second.stderr
    assert len(messages_in(shell["sqs"], shell["queue_url"])) == 1


def test_a_deduplicated_job_of_a_cancelled_key_says_cancelled_and_sends_nothing(
        shell: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", shell["queue_url"])
    monkeypatch.setenv("SQSJOBS_TABLE", "shell-records")

    cancelled = invoke("cancel", "account-export:8")
    result = invoke("enqueue", "account-export", "account_id=8")

    assert (cancelled.exit_code, result.exit_code) == (0, 0), cancelled.output + result.output
    assert result.stdout == ""
    assert result.stderr.startswith("cancelled: key 'account-export:8' was cancelled")
    assert messages_in(shell["sqs"], shell["queue_url"]) == []


def test_a_file_with_a_duplicate_counts_it_as_not_sent(shell: dict[str, Any], monkeypatch: pytest.MonkeyPatch,
                                                       tmp_path: Path) -> None:
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", shell["queue_url"])
    monkeypatch.setenv("SQSJOBS_TABLE", "shell-records")
    lines = tmp_path / "exports.jsonl"
    lines.write_text("".join(json.dumps({"account_id": n}) + "\n" for n in (1, 2, 1)))

    result = invoke("enqueue", "account-export", "--from", str(lines))

    assert result.exit_code == 0, result.output
    assert "sent 2 message(s)" in result.stderr
    assert "1 duplicate(s) not sent (their key is queued or running)" in result.stderr
    assert len(messages_in(shell["sqs"], shell["queue_url"])) == 2
