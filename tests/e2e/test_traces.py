"""A trace crosses a real SQS message: a producer's span, the local cloud's queue, the worker's spans.

The producer and the worker run in a child interpreter (OpenTelemetry's SDK is process-wide: tests/otel), with
the app's environment pointed at the local cloud, on a queue of this test's own (the cloud's poller does not
feed it): the child enqueues under a request span, receives the message back from SQS as Lambda's poller
would, and hands the event to the app's handler; the spans come back as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from sqsjobs.local.pytest_plugin import LocalCloudSession

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
sys.path.insert(0, ".")
from handlers.app import app
from sqsjobs._clients import sqs_client
from sqsjobs.testing.events import FakeContext, queue_arn, record_from_message
invoice = int(sys.argv[1])
with trace.get_tracer("shop").start_as_current_span("POST /invoices"):
    app.jobs["invoice-email"].enqueue(invoice_id=invoice)
sqs = sqs_client()
url = app.settings.queue_url
received = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=1, WaitTimeSeconds=5,
                               MessageAttributeNames=["All"], AttributeNames=["All"])["Messages"]
result = app.handle_batch({"Records": [record_from_message(m, queue_arn(sqs, url)) for m in received]},
                          FakeContext())
def show(s):
    return {"name": s.name, "kind": s.kind.name, "trace": f"{s.context.trace_id:032x}",
            "span": f"{s.context.span_id:016x}", "parent": s.parent and f"{s.parent.span_id:016x}",
            "links": [f"{l.context.span_id:016x}" for l in s.links], "attributes": dict(s.attributes or {})}
print(json.dumps({"carried": received[0]["MessageAttributes"]["traceparent"]["StringValue"],
                  "failures": result.get("batchItemFailures"),
                  "spans": [show(s) for s in exporter.get_finished_spans()]}))
"""


def test_the_trace_context_crosses_a_real_sqs_message(local_cloud: LocalCloudSession) -> None:
    sqs = local_cloud.clients.get("sqs")
    queue = sqs.create_queue(QueueName="e2e-traces")["QueueUrl"]
    env = {**{k: v for k, v in os.environ.items() if not k.startswith(("SQSJOBS_", "AWS_", "PYTEST_"))},
           **local_cloud.app_environment(), "SQSJOBS_QUEUE_URL": queue, "AWS_ENDPOINT_URL": local_cloud.endpoint,
           "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local", "AWS_DEFAULT_REGION": "us-east-1"}
    done = subprocess.run([sys.executable, "-c", CHILD, "7340"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    spans = {s["name"]: s for s in report["spans"] if s["name"] != "e2e-traces process"}
    process = [s for s in report["spans"] if s["name"] == "e2e-traces process"]
    send, request = spans["send e2e-traces"], spans["POST /invoices"]
    assert report["failures"] == []
    assert send["parent"] == request["span"] and send["kind"] == "PRODUCER"
    assert report["carried"].split("-")[1:3] == [send["trace"], send["span"]]  # what SQS delivered
    [batch] = [s for s in process if s["parent"] is None]
    [job] = [s for s in process if s["parent"] == batch["span"]]
    assert batch["links"] == [send["span"]] and job["links"] == [send["span"]]
    assert batch["attributes"]["messaging.destination.name"] == "e2e-traces"
    assert job["attributes"]["sqsjobs.job"] == "invoice-email"
    assert job["attributes"]["sqsjobs.outcome"] == "succeeded"
    assert job["attributes"]["messaging.message.id"] != ""
