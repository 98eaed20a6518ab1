"""One measured client process: a framework's handler answering batches of no-op jobs over real HTTP.

Run by ``bench.pinned.http_cpu`` as ``python -m bench.http_client < config.json``, already pinned to
one core (the moto server runs in another process, pinned to the other core). The process builds the
framework's handler on clients pointed at the moto server, answers warm-up batches (clients, models,
connections, the thread pool), then answers the measured batches and prints one JSON line: the CPU
this process spent per message in them (``time.process_time``: all its threads, and nothing of the
server's), the wall time, and how many jobs ran (checked, so a broken run cannot pass for a fast one).
"""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from bench.contenders import Job, bodies, event, powertools_handler, sqsjobs_handler

BATCH = 10


def build(config: dict[str, Any], job: Job) -> Any:
    """The handler of ``config["framework"]``, its clients on ``config["endpoint"]``."""
    endpoint = config["endpoint"]
    if config["framework"] == "sqsjobs":
        from sqsjobs._clients import dynamodb_client, sqs_client

        # The runtime's own clients, as in Lambda (the one session, no parameter validation on DynamoDB).
        handler, _ = sqsjobs_handler(sqs=sqs_client(endpoint_url=endpoint), dynamodb=dynamodb_client(
            endpoint_url=endpoint), queue_url=config["queue"], dlq_url=config["dlq"], table=config["table"], job=job)
        return handler
    import boto3

    # What Powertools' persistence layer builds for itself: boto3's default client.
    return powertools_handler(dynamodb=boto3.client("dynamodb", endpoint_url=endpoint), table=config["table"],
                              job=job)


def main() -> None:
    from sqsjobs.testing import FakeContext

    config = json.load(sys.stdin)
    job = Job()
    handler = build(config, job)
    first, warm, batches = config["first"], config["warm"], config["batches"]
    events = [event(bodies(first + b * BATCH, BATCH)) for b in range(warm + batches)]
    contexts = [FakeContext(remaining_ms=60_000) for _ in events]
    for evt, ctx in zip(events[:warm], contexts[:warm], strict=True):
        handler(evt, ctx)
    started, cpu_started = time.perf_counter(), time.process_time()
    for evt, ctx in zip(events[warm:], contexts[warm:], strict=True):
        handler(evt, ctx)
    cpu, wall = time.process_time() - cpu_started, time.perf_counter() - started
    messages = batches * BATCH
    print(json.dumps({"cpu_us_per_message": cpu / messages * 1e6, "wall_ms_per_batch": wall / batches * 1000,
                      "jobs_run": len(job.effects), "expected": (warm + batches) * BATCH}))


if __name__ == "__main__":
    main()
