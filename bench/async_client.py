"""One measured client process of the async-jobs figure: a worker answering batches of I/O-bound jobs.

Run by ``bench.async_jobs`` as ``python -m bench.async_client < config.json``, pinned to one core. Each job
calls the slow HTTP server (``bench.slow_server``: it answers after 200 ms) once, on a new connection, behind
each contender's DynamoDB idempotency table on the moto server:

- ``sqsjobs, async jobs``: an ``async def`` job awaiting the call (``asyncio`` streams);
- ``sqsjobs, threads=True``: a plain job making the call with ``http.client``, on the job threads;
- ``sqsjobs, async jobs, flush_after=0``: the async jobs again, each completion written as its job ends
  (docs/reliability.md, "The crash window": what a window of 0 costs);
- ``Powertools BatchProcessor``: the record handler in ``idempotent_function`` (``bench.contenders``),
  making the same ``http.client`` call, one record after another;
- ``Powertools AsyncBatchProcessor``: an async record handler awaiting the same call as sqsjobs' async job.
  ``idempotent_function`` takes no coroutine function, so the handler does what it does around the call
  with the same persistence layer's own steps (``save_inprogress`` before, ``save_success`` after), each
  on a thread (``asyncio.to_thread``: boto3 has no async client) so the records still overlap: two
  DynamoDB requests a record, as Powertools makes them.

The process answers warm-up batches, then the measured ones, and prints one JSON line: wall and CPU time
per batch (``time.process_time``: all its threads), DynamoDB requests per batch and their sequential round
trips (botocore's events, ``bench.support.CallLog``), the sequential calls to the slow server (the same
chain, over each job's call), the process's peak RSS, the Python heap's peak over one more batch (``tracemalloc``, run
after the timed batches so it does not slow them), EMF bytes per job, and how many jobs ran (checked).
"""

from __future__ import annotations

import asyncio
import http.client
import json
import resource
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from bench.contenders import JOB, bodies, event
from bench.support import Call, CallLog, sequential_depth

BATCH = 10
CONTENDERS = ("sqsjobs-async", "sqsjobs-threads", "powertools-batch", "powertools-async", "sqsjobs-async-flush0")


#: each job's call to the slow server, as (start, end): the longest chain of them is the batch's I/O depth
IO_CALLS: list[Call] = []


def call_sync(port: int) -> None:
    """The job's I/O, blocking: one GET on a new connection."""
    started = time.perf_counter()
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        connection.request("GET", "/")
        connection.getresponse().read()
    finally:
        connection.close()
    IO_CALLS.append(Call(service="io", operation="GET", start=started, end=time.perf_counter(), params={}))


async def call_async(port: int) -> None:
    """The same GET, awaited (``asyncio`` streams)."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
    await writer.drain()
    await reader.read()
    writer.close()
    await writer.wait_closed()
    IO_CALLS.append(Call(service="io", operation="GET", start=started, end=time.perf_counter(), params={}))


def counted(client: Any, calls: CallLog) -> Any:
    calls.attach(client)
    return client


def sqsjobs_worker(config: dict[str, Any], done: list[int], calls: CallLog, emitted: list[int]) -> Callable[..., Any]:
    from aws_lambda_powertools import Logger

    from sqsjobs import JobApp
    from sqsjobs._clients import dynamodb_client, sqs_client

    endpoint, port = config["endpoint"], config["port"]
    flush_after = 0.0 if config["contender"].endswith("flush0") else 1.0
    app = JobApp(queue_url=config["queue"], dlq_url=config["dlq"], table_name=config["table"], function_timeout=60,
                 flush_after=flush_after,
                 sqs_client=sqs_client(endpoint_url=endpoint),
                 dynamodb_client=counted(dynamodb_client(endpoint_url=endpoint), calls),
                 emit_metrics=lambda line: emitted.append(len(line.encode()) + 1),
                 logger=Logger(service="bench", level="ERROR"))
    if config["contender"].startswith("sqsjobs-async"):
        @app.job(JOB, key="invoice-email:{invoice_id}")
        async def send_async(invoice_id: int) -> None:
            await call_async(port)
            done.append(invoice_id)
    else:
        @app.job(JOB, key="invoice-email:{invoice_id}", threads=True)
        def send_threaded(invoice_id: int) -> None:
            call_sync(port)
            done.append(invoice_id)
    return app.handle_batch


def powertools_worker(config: dict[str, Any], done: list[int], calls: CallLog) -> Callable[..., Any]:
    import boto3

    from bench.contenders import powertools_handler

    port = config["port"]
    dynamodb = counted(boto3.client("dynamodb", endpoint_url=config["endpoint"]), calls)
    if config["contender"] == "powertools-batch":
        def send(invoice_id: int) -> None:
            call_sync(port)
            done.append(invoice_id)

        return powertools_handler(dynamodb=dynamodb, table=config["table"], job=send)  # type: ignore[arg-type]
    from aws_lambda_powertools.utilities.batch import AsyncBatchProcessor, EventType, async_process_partial_response
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig

    processor = AsyncBatchProcessor(event_type=EventType.SQS)
    persistence = DynamoDBPersistenceLayer(table_name=config["table"], boto3_client=dynamodb)
    persistence.configure(IdempotencyConfig(event_key_jmespath="powertools_json(body).key"), "record_handler")

    async def record_handler(record: Any) -> None:
        data = record.raw_event
        await asyncio.to_thread(persistence.save_inprogress, data=data)
        await call_async(port)
        done.append(json.loads(record.body)["args"]["invoice_id"])
        await asyncio.to_thread(persistence.save_success, data=data, result={})

    def handler(evt: dict[str, Any], context: Any) -> dict[str, Any]:
        response: dict[str, Any] = async_process_partial_response(event=evt, record_handler=record_handler,
                                                                  processor=processor, context=context)
        return response

    return handler


def main() -> None:
    from sqsjobs.testing import FakeContext

    config = json.load(sys.stdin)
    done: list[int] = []
    calls = CallLog()
    emitted: list[int] = []
    if config["contender"].startswith("sqsjobs"):
        handler = sqsjobs_worker(config, done, calls, emitted)
    else:
        handler = powertools_worker(config, done, calls)
    first, warm, batches = config["first"], config["warm"], config["batches"]
    events = [event(bodies(first + b * BATCH, BATCH)) for b in range(warm + batches + 1)]
    for evt in events[:warm]:
        handler(evt, FakeContext(remaining_ms=60_000))
    emitted.clear()
    requests, dynamodb_depth, io_depth = [], [], []
    started, cpu_started = time.perf_counter(), time.process_time()
    for evt in events[warm:warm + batches]:
        calls.clear()
        IO_CALLS.clear()
        failures = handler(evt, FakeContext(remaining_ms=60_000))["batchItemFailures"]
        if failures:
            raise RuntimeError(f"{config['contender']}: {len(failures)} records failed")
        requests.append(len(calls.calls))
        dynamodb_depth.append(sequential_depth(calls.calls))
        io_depth.append(sequential_depth(IO_CALLS))
    cpu, wall = time.process_time() - cpu_started, time.perf_counter() - started
    dynamodb_calls = statistics.median(requests)
    emf_bytes = sum(emitted) / (batches * BATCH)
    tracemalloc.start()
    handler(events[-1], FakeContext(remaining_ms=60_000))
    heap_peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({
        "wall_ms": wall / batches * 1000, "cpu_ms": cpu / batches * 1000, "dynamodb_calls": dynamodb_calls,
        "dynamodb_depth": statistics.median(dynamodb_depth), "io_depth": statistics.median(io_depth),
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "heap_peak_kb": heap_peak / 1024,
        "emf_bytes_per_job": emf_bytes, "jobs_run": len(done), "expected": len(events) * BATCH}))


if __name__ == "__main__":
    main()
