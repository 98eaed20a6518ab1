"""`sqsjobs status --run JOB:RUN_ID` shows a chunked run's record (moto)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from typer.testing import CliRunner

from sqsjobs import StatusError
from sqsjobs.cli import build_app
from sqsjobs.ops._status import collect_status
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.workflows._chunked import RunStore, _encode


def test_status_shows_a_runs_pages_and_cursor(aws: Any) -> None:
    runs = RunStore(DynamoDBStore(aws.dynamodb, aws.table), ttl=3600)
    runs.begin("reindex-products", "r1", cursor=_encode(0), now=100.0)
    runs.advance("reindex-products", "r1", page=_encode(0), following=_encode(500), now=110.0)

    report = collect_status(sqs_client=aws.sqs, queue=aws.queue_url, runs=[("reindex-products", "r1"),
                                                                           ("reindex-products", "nope")],
                            dynamodb_client=aws.dynamodb, table=aws.table)

    (run,) = report.runs
    assert (run.status, run.pages_done, run.cursor, run.started_at) == ("RUNNING", 1, 500, 100.0)
    assert any("no run record for reindex-products:nope" in note for note in report.notes)
    assert report.to_dict()["runs"][0]["pages_done"] == 1


def test_runs_need_the_table(aws: Any) -> None:
    with pytest.raises(StatusError, match="--table"):
        collect_status(sqs_client=aws.sqs, queue=aws.queue_url, runs=[("j", "r")])


def test_the_cli_takes_job_colon_run_id(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    runs = RunStore(DynamoDBStore(aws.dynamodb, aws.table), ttl=3600)
    runs.begin("reindex-products", "r9", cursor=_encode(0), now=100.0)
    result = CliRunner().invoke(build_app(), ["status", "--queue", aws.queue_url, "--table", aws.table,
                                              "--run", "reindex-products:r9", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["runs"][0]["run_id"] == "r9"
    bad = CliRunner().invoke(build_app(), ["status", "--queue", aws.queue_url, "--run", "no-colon"])
    assert bad.exit_code == 2 and "JOB:RUN_ID" in bad.output
