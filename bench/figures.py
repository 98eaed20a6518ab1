"""Each benchmark figure: how it is measured, for sqsjobs and for the Powertools equivalent.

Every function returns plain data (``Stat`` or numbers); ``bench.report``
turns them into BENCHMARKS.md. Nothing here asserts anything: a missed goal
is a figure to report, not a failure.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.contenders import Handler, Job, bodies, event, powertools_handler, sqsjobs_handler
from bench.support import (
    CallLog,
    Stat,
    add_latency,
    client,
    create_queues,
    create_table,
    item_bytes,
    sequential_depth,
)

ROOT = Path(__file__).resolve().parent.parent
#: the per-request latency model (seconds) added at botocore's before-send
LATENCY = 0.005
BATCH = 10
WRITES = ("PutItem", "UpdateItem", "DeleteItem")
#: each statement of a BatchExecuteStatement is a write of its own (store/_statements.py)
STATEMENTS = "BatchExecuteStatement"
SCENARIOS = ("success", "duplicate", "retried")
FRAMEWORKS = ("sqsjobs", "powertools")


def _context() -> Any:
    from sqsjobs.testing import FakeContext

    return FakeContext(remaining_ms=60_000)


def _call(handler: Callable[[dict[str, Any], Any], Any], evt: dict[str, Any]) -> None:
    from aws_lambda_powertools.utilities.batch.exceptions import BatchProcessingError

    # Powertools' documented default when every record failed: raise, so Lambda retries the whole batch.
    with contextlib.suppress(BatchProcessingError):
        handler(evt, _context())


# ---------------------------------------------------------------- AWS calls, WCU, round trips, wall time
@dataclass
class ScenarioFigures:
    """Per framework and scenario: one value per repetition."""

    dynamodb_calls: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    dynamodb_writes: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    sqs_calls: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    depth: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    wall_ms: dict[tuple[str, str], list[float]] = field(default_factory=dict)
    max_item_bytes: dict[str, int] = field(default_factory=dict)
    operations: dict[tuple[str, str], str] = field(default_factory=dict)

    def add(self, table: dict[tuple[str, str], list[float]], key: tuple[str, str], value: float) -> None:
        table.setdefault(key, []).append(value)

    def wcu_per_message(self, key: tuple[str, str]) -> list[float]:
        """Write units per message: each write is ceil(item KB), and every item here is under 1 KB."""
        unit = max(1, math.ceil(self.max_item_bytes[key[0]] / 1024))
        return [w * unit / BATCH for w in self.dynamodb_writes[key]]


def scenario_figures(endpoint: str, reps: int) -> ScenarioFigures:
    """Batches of 10 received from the same queue, through each framework, with ``LATENCY`` per request.

    success: new jobs; duplicate: the same jobs sent again (completed before);
    retried: new jobs whose function raises a transient error.
    """
    sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint)
    queue, dlq = create_queues(sqs, "bench-calls")
    create_table(dynamodb, "bench-sqsjobs", "pk")
    create_table(dynamodb, "bench-powertools", "id")
    log = CallLog()
    for c in (sqs, dynamodb):
        log.attach(c)
        add_latency(c, LATENCY)
    job = Job()
    handlers = {
        "sqsjobs": sqsjobs_handler(sqs=sqs, dynamodb=dynamodb, queue_url=queue, dlq_url=dlq, table="bench-sqsjobs",
                                   job=job)[0],
        "powertools": powertools_handler(dynamodb=dynamodb, table="bench-powertools", job=job),
    }
    # A warm container's figures: the store's probe of the endpoint is a cold start's (bench/cold_start.py pays it).
    from sqsjobs.store._statement_trust import StatementTrust

    if not StatementTrust.of(dynamodb, "bench-sqsjobs").allows():
        raise RuntimeError("the moto server's statement emulation did not pass the store's probe")
    out = ScenarioFigures()
    for rep in range(reps):
        fresh = bodies(rep * 100, BATCH)
        failing = bodies(rep * 100 + 50, BATCH)
        for name in FRAMEWORKS:
            for scenario, messages in (("success", fresh), ("duplicate", fresh), ("retried", failing)):
                job.fail = scenario == "retried"
                evt = receive_batch(sqs, queue, messages)
                log.clear()
                started = time.perf_counter()
                _call(handlers[name], evt)
                wall = time.perf_counter() - started
                calls = list(log.calls)
                delete_batch(sqs, queue, evt)
                key = (name, scenario)
                ddb = [c for c in calls if c.service == "dynamodb"]
                out.add(out.dynamodb_calls, key, len(ddb) / BATCH)
                out.add(out.dynamodb_writes, key, writes(ddb))
                out.add(out.sqs_calls, key, sum(1 for c in calls if c.service == "sqs") / BATCH)
                out.add(out.depth, key, sequential_depth(ddb))
                out.add(out.wall_ms, key, wall * 1000)
                out.operations[key] = _operations(calls)
    for name, table in (("sqsjobs", "bench-sqsjobs"), ("powertools", "bench-powertools")):
        items = dynamodb.scan(TableName=table)["Items"]
        out.max_item_bytes[name] = max(item_bytes(i) for i in items)
    return out


def writes(calls: list[Any]) -> int:
    """The writes among ``calls``: one a PutItem/UpdateItem/DeleteItem, one a statement of a BatchExecuteStatement."""
    return sum(1 if c.operation in WRITES else len(_statements_of(c)) if c.operation == STATEMENTS else 0
               for c in calls)


def _statements_of(call: Any) -> list[Any]:
    """The statements of a BatchExecuteStatement (botocore's hooks see the serialized request: its body)."""
    import json

    params = call.params
    body = params.get("body")
    request = json.loads(body) if body else params
    return list(request.get("Statements", []))


def _operations(calls: list[Any]) -> str:
    counts: dict[str, int] = {}
    for c in calls:
        counts[c.operation] = counts.get(c.operation, 0) + 1
    return ", ".join(f"{n} {op}" for op, n in counts.items())


def receive_batch(sqs: Any, queue: str, messages: list[str]) -> dict[str, Any]:
    """Send the messages and receive them back as Lambda's poller would hand them over."""
    from sqsjobs.testing import receive_event

    entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(messages)]
    sqs.send_message_batch(QueueUrl=queue, Entries=entries)
    evt = receive_event(sqs, queue, max_messages=BATCH, visibility_timeout=60)
    if len(evt["Records"]) != len(messages):
        raise RuntimeError(f"received {len(evt['Records'])} of {len(messages)} messages")
    return evt


def delete_batch(sqs: Any, queue: str, evt: dict[str, Any]) -> None:
    entries = [{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(evt["Records"])]
    sqs.delete_message_batch(QueueUrl=queue, Entries=entries)


def producer_calls(endpoint: str, messages: int = 100) -> tuple[float, float]:
    """SQS calls per enqueued message: ``enqueue_many`` vs a plain boto3 ``send_message`` per job."""
    from sqsjobs import JobApp

    sqs = client("sqs", endpoint)
    queue, _ = create_queues(sqs, "bench-producer")
    log = CallLog()
    log.attach(sqs)
    app = JobApp(queue_url=queue, sqs_client=sqs)

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None: ...

    log.clear()
    report = app.enqueue_many(send_invoice_email.message(invoice_id=i) for i in range(messages))
    sqsjobs_calls = len(log.calls) / report.sent
    log.clear()
    for body in bodies(0, messages):
        # Powertools has no producer: this is what application code writes without one.
        sqs.send_message(QueueUrl=queue, MessageBody=body)
    return sqsjobs_calls, len(log.calls) / messages


# ---------------------------------------------------------------- CPU with the Stubber
#: the DynamoDB operations each framework sends for a batch of 10 successes, in order (the Stubber answers them).
#: sqsjobs' follow its store's request shapes (sqsjobs/store/_dynamodb.py): change this list with them.
STUB_ORDER = {"sqsjobs": ["batch_execute_statement"] * 2,  # the claims (INSERTs), then the completions (UPDATEs)
              "powertools": ["put_item", "update_item"] * BATCH}  # one record at a time
#: what the Stubber answers each operation (a statement batch answers each of its statements)
STUB_RESPONSES: dict[str, dict[str, Any]] = {"batch_execute_statement": {"Responses": [{}] * BATCH}}
#: DynamoDB's answer to the store's probe (store/_statement_trust.py): both statements refused, the witness returned
PROBE_ANSWER: dict[str, Any] = {"Responses": [
    {"Error": {"Code": "DuplicateItem"}},
    {"Error": {"Code": "ConditionalCheckFailed", "Item": {"pk": {"S": "sqsjobs#partiql"}}}}]}
#: DynamoDB's answer to the statement the store sends first to an endpoint that is not AWS's, as the Stubber's
#: client's is (store/_statement_trust.py ``_first_look``): its false WHERE refused
FIRST_LOOK_ANSWER: dict[str, Any] = {"Responses": [{"Error": {"Code": "ConditionalCheckFailed"}}]}


def stub_probe(stubber: Any) -> None:
    """Queue DynamoDB's answers to the store's probe of the Stubber's client (a cold start's cost)."""
    stubber.add_response("batch_execute_statement", FIRST_LOOK_ANSWER)
    stubber.add_response("batch_execute_statement", PROBE_ANSWER)


def _stubbed(name: str, dynamodb: Any, job: Job, *, batches: int,
             emit: Callable[[str], None] | None = None) -> Handler:
    """``name``'s handler on a Stubber-answered ``dynamodb``, with responses for ``batches`` successful batches."""
    from botocore.stub import Stubber

    if name == "sqsjobs":
        handler = sqsjobs_handler(sqs=client("sqs", None), dynamodb=dynamodb,
                                  queue_url="https://sqs.us-east-1.amazonaws.com/1/q",
                                  dlq_url="https://sqs.us-east-1.amazonaws.com/1/d", table="t", job=job,
                                  emit=emit)[0]
    else:
        handler = powertools_handler(dynamodb=dynamodb, table="t", job=job)
    order = STUB_ORDER[name]
    stubber = Stubber(dynamodb)
    if name == "sqsjobs":  # DynamoDB's answer to the store's probe, before its first batch (a cold start's cost)
        stub_probe(stubber)
    for _ in range(batches):
        for operation in order:
            stubber.add_response(operation, STUB_RESPONSES.get(operation, {}))
    stubber.activate()
    return handler


def cpu_per_message(reps: int, batches: int) -> dict[str, Stat]:
    """Framework CPU (process time, all threads) per successful message, AWS answered by the Stubber."""

    results: dict[str, list[float]] = {name: [] for name in FRAMEWORKS}
    events = [event(bodies(b * BATCH, BATCH)) for b in range(batches)]
    for _ in range(reps):
        for name in FRAMEWORKS:
            dynamodb = client("dynamodb", None, framework=name)
            job = Job()
            handler = _stubbed(name, dynamodb, job, batches=batches + 1)
            _call(handler, events[0])  # first call builds lazy clients, models, the thread pool
            contexts = [_context() for _ in events]
            started = time.process_time()
            for evt, ctx in zip(events, contexts, strict=True):
                handler(evt, ctx)
            spent = time.process_time() - started
            if len(job.effects) != BATCH * (batches + 1):
                raise RuntimeError(f"{name}: {len(job.effects)} effects, expected {BATCH * (batches + 1)}")
            results[name].append(spent / (batches * BATCH) * 1e6)
        results.setdefault("botocore floor", []).append(_botocore_floor(batches))
        results.setdefault("statements", []).append(_statement_building(batches))
    return {name: Stat(tuple(values)) for name, values in results.items()}


def _botocore_floor(batches: int) -> float:
    """µs per message for the two calls both frameworks make (a conditional put, an update), and nothing else.

    No framework can spend less per message while it makes these two calls;
    it is the share of "framework CPU" that is really botocore's.
    """
    from botocore.stub import Stubber

    dynamodb = client("dynamodb", None)
    stubber = Stubber(dynamodb)
    for _ in range(batches * BATCH):
        stubber.add_response("put_item", {})
        stubber.add_response("update_item", {})
    stubber.activate()
    started = time.process_time()
    for i in range(batches * BATCH):
        key = {"pk": {"S": f"invoice-email:{i}"}}
        dynamodb.put_item(TableName="t", Item={**key, "status": {"S": "IN_PROGRESS"}, "owner": {"S": "o"}},
                          ConditionExpression="attribute_not_exists(pk)", ReturnValuesOnConditionCheckFailure="ALL_OLD")
        dynamodb.update_item(TableName="t", Key=key, UpdateExpression="SET #s = :s",
                             ConditionExpression="#o = :o", ExpressionAttributeNames={"#s": "status", "#o": "owner"},
                             ExpressionAttributeValues={":s": {"S": "COMPLETED"}, ":o": {"S": "o"}})
    return (time.process_time() - started) / (batches * BATCH) * 1e6


def _statement_building(batches: int) -> float:
    """µs per message sqsjobs' store spends building its claim and completion statements before botocore.

    Per batch of 10, what ``DynamoDBStore.write_batch`` does before it calls botocore, twice: the claims'
    operations made, planned (``plan``: which go in statements) and bound (``bind``: an ``INSERT`` each),
    then the completions' (an ``UPDATE`` each). Each statement is rendered once per shape and bound per call
    (``sqsjobs/store/_statements.py``); the first batch renders the shapes, as the bench's warm-up does.
    """
    from sqsjobs.store import _statements as statements
    from sqsjobs.worker import _job_records as guard

    def batch(first: int) -> None:
        claims = [guard.Claim(key=f"invoice-email:{i}", job=JOB_NAME, owner="o", now=1.0, lease_until=2.0,
                              expires_at=9.0, fingerprint="f" * 32, fp_version=1, message_id=f"m-{i}",
                              enqueued_at=0.5, fresh=True).operation() for i in range(first, first + BATCH)]
        completions = [guard.succeeded(f"invoice-email:{i}", "o", now=2.0, expires_at=3.0)
                       for i in range(first, first + BATCH)]
        for ops in (claims, completions):
            for chunk in statements.chunks(statements.plan(ops)[0]):
                for index in chunk:
                    statements.bind(ops[index], "t")

    batch(-BATCH)
    started = time.process_time()
    for b in range(batches):
        batch(b * BATCH)
    return (time.process_time() - started) / (batches * BATCH) * 1e6


JOB_NAME = "invoice-email"


# ---------------------------------------------------------------- wall time, moto out
@dataclass
class StubbedBatches:
    """Successful batches of 10, AWS answered by the Stubber after ``LATENCY``: one value per batch."""

    wall_ms: dict[str, Stat]
    depth: dict[str, Stat]
    #: CPU time of the same batches (all threads): the part a fraction of a vCPU stretches
    cpu_ms: dict[str, Stat]
    #: EMF bytes each framework wrote per job (what CloudWatch Logs ingests for its metrics)
    emf_bytes_per_job: dict[str, float]


def stubbed_wall(reps: int) -> StubbedBatches:
    """Wall and CPU ms per successful batch, sequential DynamoDB round trips and EMF bytes, AWS answered by the Stubber.

    Every call first waits ``LATENCY`` in its own thread (a ``before-call``
    hook registered ahead of the Stubber), so the figure is the framework plus
    the latency model, without moto's own time or its contention for the GIL.
    """

    wall: dict[str, list[float]] = {name: [] for name in FRAMEWORKS}
    cpu: dict[str, list[float]] = {name: [] for name in FRAMEWORKS}
    depth: dict[str, list[float]] = {name: [] for name in FRAMEWORKS}
    emf: dict[str, list[str]] = {name: [] for name in FRAMEWORKS}
    events = [event(bodies(b * BATCH, BATCH)) for b in range(reps + 1)]

    def wait(**kwargs: Any) -> None:
        time.sleep(LATENCY)

    for name in FRAMEWORKS:
        dynamodb = client("dynamodb", None, framework=name)
        log = CallLog()
        log.attach(dynamodb)
        dynamodb.meta.events.register_first("before-call.*.*", wait)
        # The Powertools contender, set up as documented for batch + idempotency, writes no metrics.
        handler = _stubbed(name, dynamodb, Job(), batches=len(events), emit=emf[name].append)
        _call(handler, events[0])
        emf[name].clear()
        for evt in events[1:]:
            log.clear()
            started, cpu_started = time.perf_counter(), time.process_time()
            handler(evt, _context())
            wall[name].append((time.perf_counter() - started) * 1000)
            cpu[name].append((time.process_time() - cpu_started) * 1000)
            depth[name].append(sequential_depth(log.calls))
    return StubbedBatches(
        wall_ms={n: Stat(tuple(v)) for n, v in wall.items()},
        depth={n: Stat(tuple(v)) for n, v in depth.items()},
        cpu_ms={n: Stat(tuple(v)) for n, v in cpu.items()},
        emf_bytes_per_job={n: sum(len(line.encode()) + 1 for line in lines) / (reps * BATCH)
                           for n, lines in emf.items()},
    )


# ---------------------------------------------------------------- throughput
def worker_loop_throughput(endpoint: str, messages: int, reps: int) -> dict[str, Stat]:
    """Messages/s: receive → ``handle_batch`` (guard included) → delete, vs a raw receive → delete loop."""
    sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint)
    out: dict[str, list[float]] = {"sqsjobs": [], "raw": []}
    for rep in range(reps):
        queue, dlq = create_queues(sqs, f"bench-loop-{rep}")
        table = f"bench-loop-{rep}"
        create_table(dynamodb, table, "pk")
        job = Job()
        handler = sqsjobs_handler(sqs=sqs, dynamodb=dynamodb, queue_url=queue, dlq_url=dlq, table=table, job=job)[0]
        for name in ("raw", "sqsjobs"):
            _fill(sqs, queue, bodies(rep * 10 * messages + (0 if name == "raw" else messages), messages))
            started = time.perf_counter()
            done = _loop(sqs, queue, handler if name == "sqsjobs" else None)
            elapsed = time.perf_counter() - started
            if done != messages:
                raise RuntimeError(f"{name} loop handled {done} of {messages}")
            out[name].append(messages / elapsed)
    return {name: Stat(tuple(v)) for name, v in out.items()}


def _fill(sqs: Any, queue: str, messages: list[str], attributes: dict[str, Any] | None = None) -> None:
    for i in range(0, len(messages), 10):
        entries = [{"Id": str(j), "MessageBody": b, "MessageAttributes": attributes or {}}
                   for j, b in enumerate(messages[i:i + 10])]
        sqs.send_message_batch(QueueUrl=queue, Entries=entries)


def _loop(sqs: Any, queue: str, handler: Callable[[dict[str, Any], Any], Any] | None) -> int:
    """Lambda's poller in miniature: receive 10, hand them over, delete what was acknowledged."""
    from sqsjobs.testing import queue_arn

    arn = queue_arn(sqs, queue)
    done = 0
    while True:
        received = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, AttributeNames=["All"],
                                       MessageAttributeNames=["All"]).get("Messages", [])
        if not received:
            return done
        failed: set[str] = set()
        if handler is not None:
            records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                        "attributes": m.get("Attributes", {}), "messageAttributes": {}, "eventSource": "aws:sqs",
                        "eventSourceARN": arn, "awsRegion": "us-east-1"} for m in received]
            response = handler({"Records": records}, _context())
            failed = {f["itemIdentifier"] for f in response["batchItemFailures"]}
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)
                   if m["MessageId"] not in failed]
        if entries:
            sqs.delete_message_batch(QueueUrl=queue, Entries=entries)
        done += len(entries)


def local_cloud_throughput(messages: int, reps: int, shallow: int = 40) -> dict[str, Stat] | None:
    """Messages/s through ``sqsjobs local`` (template deployed, emulated poller, worker processes, guard, SES)
    vs a raw receive → delete loop on the same moto server.

    Measured at two queue depths, ``messages`` and ``shallow``: moto's SQS gets
    slower per receive as its queue deepens, which slows the raw loop far
    more than the emulated path, so the ratio depends on the depth.
    """
    from sqsjobs.local.cloud import LocalCloud
    from sqsjobs.local.output import Output

    events: list[str] = []
    cloud = LocalCloud.start(ROOT / "template.yaml", parameters=LOCAL_PARAMETERS,
                             output=Output(event=lambda level, text: events.append(text), log=lambda fn, line: None))
    out: dict[str, list[float]] = {"sqsjobs": [], "raw": [], "sqsjobs shallow": [], "raw shallow": []}
    try:
        sqs = cloud.clients.get("sqs")
        jobs = cloud.queue_url(cloud.app_queue())
        raw_queue = sqs.create_queue(QueueName="bench-raw")["QueueUrl"]
        for rep in range(reps):
            for suffix, count in (("", messages), (" shallow", shallow)):
                batch = bodies((rep * 2 + (1 if suffix else 0)) * 10 * messages, count)
                started = time.perf_counter()
                _fill(sqs, jobs, batch, attributes=JOB_ATTRIBUTE)
                # drain() settles over three quiet 0.2 s checks; that 0.6 s is counted against sqsjobs.
                cloud.drain(timeout=600)
                out["sqsjobs" + suffix].append(len(batch) / (time.perf_counter() - started))
                started = time.perf_counter()
                _fill(sqs, raw_queue, batch)
                done = _loop(sqs, raw_queue, None)
                out["raw" + suffix].append(done / (time.perf_counter() - started))
    finally:
        cloud.stop()
    return {name: Stat(tuple(v)) for name, v in out.items()}


JOB_ATTRIBUTE = {"sqsjobs.job": {"DataType": "String", "StringValue": "invoice-email"}}
#: the template's parameters for the local-cloud figure: the e2e suite's, with room for a loaded machine
LOCAL_PARAMETERS = {"SenderEmail": "billing@example.com", "WorkerTimeoutSeconds": "30",
                    "QueueVisibilityTimeoutSeconds": "60", "MaximumBatchingWindowSeconds": "0", "MaxAttempts": "3"}


def redrive_throughput(endpoint: str, messages: int, reps: int) -> dict[str, Stat]:
    """Messages/s moved DLQ → queue: ``sqsjobs.ops._redrive`` vs a raw receive → send → delete loop."""
    from sqsjobs.ops._redrive import redrive
    from sqsjobs.ops._redrive_options import RedriveOptions

    sqs = client("sqs", endpoint)
    out: dict[str, list[float]] = {"sqsjobs": [], "raw": []}
    for rep in range(reps):
        for name in ("raw", "sqsjobs"):
            queue, dlq = create_queues(sqs, f"bench-redrive-{name}-{rep}")
            _fill_dlq(sqs, dlq, queue, bodies(rep * 10 * messages, messages))
            started = time.perf_counter()
            if name == "sqsjobs":
                summary = redrive(RedriveOptions(dlq=dlq, to=queue, wait_time_seconds=0), sqs_client=sqs)
                moved = summary.moved
            else:
                moved = _raw_redrive(sqs, dlq, queue)
            elapsed = time.perf_counter() - started
            if moved != messages:
                raise RuntimeError(f"{name} redrive moved {moved} of {messages}")
            out[name].append(messages / elapsed)
    return {name: Stat(tuple(v)) for name, v in out.items()}


def _fill_dlq(sqs: Any, dlq: str, queue: str, messages: list[str]) -> None:
    """Dead letters as the worker writes them: body plus reason attributes."""
    for i in range(0, len(messages), 10):
        entries = []
        for j, body in enumerate(messages[i:i + 10]):
            attrs = {"sqsjobs.job": "invoice-email", "sqsjobs.reason": "exhausted",
                     "sqsjobs.error_type": "ConnectionError", "sqsjobs.error_message": "mail server unavailable",
                     "sqsjobs.source_queue": queue,
                     "sqsjobs.original_message_id": f"m-{i + j}"}
            entries.append({"Id": str(j), "MessageBody": body, "MessageAttributes": {
                k: {"DataType": "String", "StringValue": v} for k, v in attrs.items()}})
        sqs.send_message_batch(QueueUrl=dlq, Entries=entries)


def _raw_redrive(sqs: Any, dlq: str, queue: str) -> int:
    moved = 0
    while True:
        received = sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10, MessageAttributeNames=["All"],
                                       VisibilityTimeout=60).get("Messages", [])
        if not received:
            return moved
        sqs.send_message_batch(QueueUrl=queue, Entries=[
            {"Id": str(i), "MessageBody": m["Body"], "MessageAttributes": m.get("MessageAttributes", {})}
            for i, m in enumerate(received)])
        sqs.delete_message_batch(QueueUrl=dlq, Entries=[
            {"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(received)])
        moved += len(received)
