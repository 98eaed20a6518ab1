"""The runbook's commands, as written, against template.yaml on the local cloud.

Starts its own local cloud (moto server on 127.0.0.1, the real worker and
redrive functions), dead-letters jobs through the deployed worker, then runs
`sqsjobs status` and `sqsjobs redrive` as subprocesses with only the
environment `sqsjobs local env` would print, and invokes the deployed
RedriveFunction the way `aws lambda invoke` would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from e2e.e2e_support import E2E_PARAMETERS

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]
SQSJOBS = str(Path(sys.executable).with_name("sqsjobs"))


@pytest.fixture(scope="module")
def cloud() -> Iterator[Any]:
    from sqsjobs.local.cloud import LocalCloud

    with LocalCloud.start(ROOT / "template.yaml", parameters=E2E_PARAMETERS, stack_name="sqsjobs-runbook") as c:
        yield c


@pytest.fixture
def shell_env(cloud: Any) -> dict[str, str]:
    """What an operator's shell has after `eval "$(sqsjobs local env)"`: nothing else from AWS."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SQSJOBS_"))}
    return {**base, **cloud.env(), **cloud.state()["app_env"], "COLUMNS": "200"}


@pytest.fixture
def empty_dlq(cloud: Any) -> None:
    """Each test counts its own dead letters: whatever another test left (in any order) goes first."""
    sqs = cloud.clients.get("sqs")
    dlq = cloud.queue_url("DeadLetterQueue")
    while messages := sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10).get("Messages", []):
        for m in messages:
            sqs.delete_message(QueueUrl=dlq, ReceiptHandle=m["ReceiptHandle"])


def sqsjobs(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([SQSJOBS, *args], env=env, capture_output=True, text=True, timeout=120, check=False)


def enqueue(cloud: Any, invoice_id: int) -> None:
    body = json.dumps({"v": 1, "job": "invoice-email", "job_version": 1, "key": f"invoice-email:{invoice_id}",
                       "args": {"invoice_id": invoice_id}, "enqueued_at": time.time()})
    cloud.send("JobsQueue", body, {"sqsjobs.job": "invoice-email"})


def test_the_deployed_queues_give_the_worker_the_last_word_and_accept_only_the_jobs_queues(cloud: Any) -> None:
    sqs = cloud.clients.get("sqs")
    jobs = sqs.get_queue_attributes(QueueUrl=cloud.queue_url("JobsQueue"), AttributeNames=["All"])["Attributes"]
    critical = sqs.get_queue_attributes(QueueUrl=cloud.queue_url("CriticalQueue"),
                                        AttributeNames=["All"])["Attributes"]
    dlq = sqs.get_queue_attributes(QueueUrl=cloud.queue_url("DeadLetterQueue"), AttributeNames=["All"])["Attributes"]
    # MaxAttempts 3: the worker runs 3 attempts, SQS's backstop moves at the 4th receive.
    assert json.loads(jobs["RedrivePolicy"])["maxReceiveCount"] == 4
    assert json.loads(critical["RedrivePolicy"])["maxReceiveCount"] == 4
    assert cloud.function_env("WorkerFunction")["SQSJOBS_MAX_ATTEMPTS"] == "3"
    # The ARNs built from the stack name are the jobs queues' real ARNs (the local cloud refuses the
    # redrive policy otherwise, as SQS does; moto keeps no allow policy, so it is read from the deployment).
    policy = cloud.deployment.queues["DeadLetterQueue"].redrive_allow_policy
    assert policy == {"redrivePermission": "byQueue", "sourceQueueArns": [jobs["QueueArn"], critical["QueueArn"]]}
    assert int(dlq["MessageRetentionPeriod"]) == 1209600
    for function in ("WorkerFunction", "SchedulerFunction", "RedriveFunction"):
        assert cloud.function_env(function)["SQSJOBS_RECORD_TTL_SECONDS"] == "1814400"


@pytest.mark.usefixtures("empty_dlq")
def test_status_then_dry_run_then_redrive_as_the_runbook_says(cloud: Any, shell_env: dict[str, str]) -> None:
    for invoice_id in (-501, -502):  # invoices that do not exist: PermanentError, dead-lettered
        enqueue(cloud, invoice_id)
    cloud.drain()
    cloud.evaluate_alarms()

    status = sqsjobs(shell_env, "status")
    assert status.returncode == 0, status.stderr
    assert "invoice-email" in status.stdout and "PermanentError" in status.stdout
    report = json.loads(sqsjobs(shell_env, "status", "--json").stdout)
    assert report["dlq"]["depth"] == 2
    assert report["dlq_groups"][0]["reason"] == "permanent"
    assert "sqsjobs-runbook-DeadLetterAlarm" in report["alarms_firing"]
    # The worker's Lambda alarms name no queue; they show because they notify the same topics.
    assert {"sqsjobs-runbook-WorkerErrorsAlarm", "sqsjobs-runbook-OldestMessageAlarm"} <= {
        a["name"] for a in report["alarms"]
    }

    # As written in the runbook; the DLQ comes from the jobs queue's redrive policy if `local env` has none.
    dlq = shell_env.get("SQSJOBS_DLQ_URL", "")
    dry = sqsjobs(shell_env, "redrive", "--dlq", dlq, "--dry-run", "--job", "invoice-email",
                  "--error", "PermanentError")
    assert dry.returncode == 0, dry.stderr
    assert "would move" in dry.stdout and "invoice-email" in dry.stdout
    assert json.loads(sqsjobs(shell_env, "status", "--json").stdout)["dlq"]["depth"] == 2

    moved = sqsjobs(shell_env, "redrive", "--dlq", dlq, "--job", "invoice-email", "--error", "PermanentError",
                    "--rate", "10", "--json")
    assert moved.returncode == 0, moved.stderr
    assert json.loads(moved.stdout)["moved"] == 2
    cloud.drain()
    # The fault is not fixed (the invoices still do not exist): they are back, counted once more.
    after = json.loads(sqsjobs(shell_env, "status", "--json").stdout)
    assert after["dlq"]["depth"] == 2
    assert {f["redrive_count"] for f in after["recent_failures"]} == {1}

    by_name = sqsjobs(shell_env, "status", "--queue", "sqsjobs-runbook-JobsQueue", "--endpoint-url",
                      shell_env["AWS_ENDPOINT_URL"], "--json")
    assert json.loads(by_name.stdout)["queue"]["name"] == "sqsjobs-runbook-JobsQueue"


@pytest.mark.usefixtures("empty_dlq")
def test_the_deployed_redrive_function_moves_through_the_guard(cloud: Any, shell_env: dict[str, str]) -> None:
    from sqsjobs.ops._queues import queue_depth

    sqs = cloud.clients.get("sqs")
    dlq = cloud.queue_url("DeadLetterQueue")
    enqueue(cloud, -601)
    cloud.drain()
    assert queue_depth(sqs, dlq) == 1

    dry = cloud.pools["RedriveFunction"].invoke({"dry_run": True})
    assert dry.ok, dry.traceback
    assert dry.payload["matched"] == 1 and dry.payload["planned"][0]["job"] == "invoice-email"

    result = cloud.pools["RedriveFunction"].invoke({"job": "invoice-email"})
    assert result.ok, result.traceback
    assert (result.payload["moved"], result.payload["stopped"]) == (1, "drained")
    cloud.drain()
    (dead,) = sqs.receive_message(QueueUrl=dlq, MessageAttributeNames=["All"], VisibilityTimeout=0)["Messages"]
    assert dead["MessageAttributes"]["sqsjobs.redrive_count"]["StringValue"] == "1"
