"""docs/jobs.md works as written: its Python examples run (against moto), and its Celery table covers
every Celery name the code gives a hint for."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_support import create_queues, create_table
from moto import mock_aws

from sqsjobs._job import CELERY_ENQUEUE_NAMES
from sqsjobs._job_options import CELERY_NAMES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "jobs.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), re.S)


@pytest.mark.moto
def test_the_python_examples_run(monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = [b for b in python_blocks() if "@app.task" not in b]  # the Celery original is not ours to run
    assert len(blocks) >= 4
    with mock_aws():
        sqs = boto3.client("sqs", region_name="us-east-1")
        queue_url, dlq_url = create_queues(sqs, "docs", max_attempts=6)
        create_table(boto3.client("dynamodb", region_name="us-east-1"), "docs-records")
        monkeypatch.setenv("SQSJOBS_TABLE", "docs-records")
        # The environment the template gives the worker, sized for the page's Celery translation.
        monkeypatch.setenv("SQSJOBS_QUEUE_URL", queue_url)
        monkeypatch.setenv("SQSJOBS_DLQ_URL", dlq_url)
        monkeypatch.setenv("SQSJOBS_MAX_ATTEMPTS", "6")
        monkeypatch.setenv("SQSJOBS_FUNCTION_TIMEOUT", "125")
        # Delays beyond 900 s wait in the template's schedule group.
        scheduler = boto3.client("scheduler", region_name="us-east-1")
        scheduler.create_schedule_group(Name="docs-delayed")
        monkeypatch.setenv("SQSJOBS_SCHEDULE_GROUP", "docs-delayed")
        monkeypatch.setenv("SQSJOBS_SCHEDULER_ROLE_ARN", "arn:aws:iam::123456789012:role/docs-delivery")
        namespace: dict[str, Any] = {}
        for block in blocks:
            exec(compile(block, str(PAGE), "exec"), namespace)  # the page's own examples

        app = namespace["app"]
        assert set(app.jobs) == {"invoice-email", "greet", "sync-account", "index-products", "reindex", "export",
                                 "convert-order", "render-thumbnail"}
        assert app.jobs["convert-order"].is_async and app.jobs["render-thumbnail"].options.threads
        assert app.jobs["index-products"].options.batch == 25
        assert app.jobs["greet"].upcast(1, {"user_id": 7}) == {"user_id": 7, "loud": False}
        assert namespace["report"].ok and namespace["report"].sent == 3
        bodies = []
        while batch := sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10,
                                           VisibilityTimeout=600).get("Messages", []):
            bodies.extend(json.loads(m["Body"]) for m in batch)
        # The three immediate sends and the batch; the delayed one is still hidden.
        assert sorted(b["args"]["invoice_id"] for b in bodies) == [42, 44, 101, 102, 103]
        # 45 (two days) waits in a schedule; the rest of delays (moves, unschedule) is docs/delays.md's.
        waiting = scheduler.list_schedules(GroupName="docs-delayed")["Schedules"]
        assert len(waiting) == 1


def table_rows() -> str:
    return PAGE.read_text().split("## Coming from Celery", 1)[1]


@pytest.mark.parametrize("name", sorted(set(CELERY_NAMES) | set(CELERY_ENQUEUE_NAMES) - {"headers"}))
def test_the_celery_table_covers_every_hinted_name(name: str) -> None:
    assert re.search(rf"`[^`]*\b{name}\b[^`]*`", table_rows()), name


@pytest.mark.parametrize("option", ["key", "group", "max_attempts", "backoff_base", "backoff_cap", "jitter",
                                    "retry_on", "permanent_on", "time_limit", "version", "batch"])
def test_every_option_has_a_row(option: str) -> None:
    section = PAGE.read_text().split("## Every option", 1)[1].split("\n## ", 1)[0]
    assert f"| `{option}` |" in section
