"""Run docs/producers.md's examples against a moto server on 127.0.0.1 and consume them with the worker.

    .venv/bin/python docs/examples/verify_producers.py [--node-modules DIR] [--skip-node]

Needs the ``aws`` CLI, and ``node`` + ``npm`` for the Node.js example (``@aws-sdk/client-sqs`` is
installed into a temporary directory unless ``--node-modules`` names a directory that has it). Every
body is checked against the published schema before the worker runs it. Exits non-zero on any failure.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import boto3
from jsonschema import Draft202012Validator
from moto.server import ThreadedMotoServer
from sqsjobs import JobApp, Outcome, current_trace_id
from sqsjobs.cli.schema import load_schema
from sqsjobs.testing import receive_event

HERE = Path(__file__).resolve().parent
REGION = "us-east-1"
CREDENTIALS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION,
               "AWS_REGION": REGION}


def create_queue(sqs: Any, name: str, fifo: bool) -> tuple[str, str]:
    extra = {"FifoQueue": "true"} if fifo else {}
    suffix = ".fifo" if fifo else ""
    dlq = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes=extra)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(QueueName=f"{name}{suffix}", Attributes={
        **extra, "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "3"})})["QueueUrl"]
    return queue, dlq


def run(command: list[str], env: dict[str, str], cwd: Path | None = None) -> str:
    print("$", " ".join(command), flush=True)
    done = subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise SystemExit(f"failed ({done.returncode}): {done.stderr or done.stdout}")
    return done.stdout


def require_aws_cli() -> None:
    """The AWS CLI examples need ``aws`` (v1 or v2); they pass ``AWS_ENDPOINT_URL`` on as ``--endpoint-url``."""
    if shutil.which("aws") is None:
        raise SystemExit("the aws CLI is needed for the AWS CLI examples")


def node_modules(given: str | None, env: dict[str, str], workdir: Path) -> Path:
    if given:
        return Path(given)
    if shutil.which("node") is None or shutil.which("npm") is None:
        raise SystemExit("node and npm are needed for the Node.js example (or pass --skip-node)")
    (workdir / "package.json").write_text('{"private": true}\n')
    run(["npm", "install", "--no-audit", "--no-fund", "--silent", "@aws-sdk/client-sqs"], env, cwd=workdir)
    return workdir / "node_modules"


def consume(endpoint: str, queue_url: str, dlq_url: str, table: str) -> list[tuple[int, str | None]]:
    """Run the worker over everything on the queue; returns (invoice_id, trace id) per run.

    Every message must validate against the schema and succeed.
    """
    sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)
    dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION)
    app = JobApp(queue_url=queue_url, dlq_url=dlq_url, table_name=table, sqs_client=sqs,
                 dynamodb_client=dynamodb, emit_metrics=lambda line: None)
    runs: list[tuple[int, str | None]] = []

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None:
        runs.append((invoice_id, current_trace_id()))

    validator = Draft202012Validator(load_schema())
    while True:
        event = receive_event(sqs, queue_url)
        if not event["Records"]:
            return runs
        for record in event["Records"]:
            problems = [e.message for e in validator.iter_errors(json.loads(record["body"]))]
            if problems:
                raise SystemExit(f"body does not match the schema: {record['body']}: {problems}")
        result = app.process_batch(event)
        bad = [(d.outcome, d.error) for d in result.deliveries if d.outcome is not Outcome.SUCCEEDED]
        if bad:
            raise SystemExit(f"the worker did not run every message: {bad}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node-modules", help="a node_modules directory that has @aws-sdk/client-sqs")
    parser.add_argument("--skip-node", action="store_true", help="verify the AWS CLI examples only")
    options = parser.parse_args()

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # the moto server's per-request lines
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    with ExitStack() as cleanup:
        cleanup.callback(server.stop)
        scratch = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="sqsjobs-producers-")))
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        env = {**os.environ, **CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
        env.pop("AWS_PROFILE", None)
        (scratch / "node").mkdir()
        require_aws_cli()
        shell_env = env
        os.environ.update(CREDENTIALS)
        sqs = boto3.client("sqs", endpoint_url=endpoint, region_name=REGION)
        dynamodb = boto3.client("dynamodb", endpoint_url=endpoint, region_name=REGION)
        dynamodb.create_table(TableName="idempotency", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")

        queue, dlq = create_queue(sqs, "jobs", fifo=False)
        run(["sh", str(HERE / "send-message.sh")], {**shell_env, "SQSJOBS_QUEUE_URL": queue})
        expected = [(42, "req-7f3a")]
        if not options.skip_node:
            modules = node_modules(options.node_modules, env, scratch / "node")
            workdir = scratch / "run"
            workdir.mkdir()
            shutil.copy(HERE / "enqueue.mjs", workdir)
            (workdir / "node_modules").symlink_to(modules.resolve())
            run(["node", "enqueue.mjs"], {**env, "SQSJOBS_QUEUE_URL": queue}, cwd=workdir)
            expected.append((43, "req-node-1"))
        runs = consume(endpoint, queue, dlq, "idempotency")
        if sorted(runs) != sorted(expected):
            raise SystemExit(f"standard queue: expected runs {expected}, got {runs}")
        print("standard queue: ran", runs)

        fifo_queue, fifo_dlq = create_queue(sqs, "jobs", fifo=True)
        dynamodb.create_table(TableName="idempotency-fifo", KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}],
                              AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                              BillingMode="PAY_PER_REQUEST")
        for _ in range(2):  # the resend carries the same deduplication id: SQS keeps one message
            run(["sh", str(HERE / "send-message-fifo.sh")], {**shell_env, "SQSJOBS_QUEUE_URL": fifo_queue})
        fifo_runs = consume(endpoint, fifo_queue, fifo_dlq, "idempotency-fifo")
        if [invoice_id for invoice_id, _ in fifo_runs] != [42]:
            raise SystemExit(f"FIFO queue: expected one run of invoice 42, got {fifo_runs}")
        print("FIFO queue: ran", fifo_runs, "(the resend was deduplicated)")
    print("docs/producers.md examples: OK")


if __name__ == "__main__":
    sys.exit(main())
