"""One Lambda cold start in a fresh process: import the handler module, then answer its first batch.

Run by ``bench.figures.first_invocation`` as
``python first_call.py MODULE DIRECTORY < event.json`` with the environment a
function would have (queue, table, ``AWS_ENDPOINT_URL`` of the moto server).
Nothing from sqsjobs, boto3 or Powertools is imported before the clock starts:
this script uses the standard library only, and its own Lambda context.
Prints one JSON line: import and first-batch milliseconds, wall and CPU (this
process, all threads: what a fraction of a vCPU stretches), and the response.
With ``--profile FILE`` it writes a CPU cProfile of the whole (import + batch);
run under ``-X importtime``, ``loaded_before`` tells the imports the clock saw
from those it did not. With ``SQSJOBS_BENCH_NO_GC_PAUSE=1`` in the environment,
sqsjobs' first clients are built with the cyclic collector left running (the
"before" of sqsjobs._clients' pause): the patch is made after the import and
before the batch, where no client exists yet, so it costs the clock nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time


class Context:
    """The part of Lambda's context both frameworks read."""

    function_name = "bench-worker"
    memory_limit_in_mb = 512
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench-worker"
    aws_request_id = "00000000-0000-0000-0000-000000000001"
    log_group_name = "/aws/lambda/bench-worker"
    log_stream_name = "bench"

    def __init__(self, remaining_ms: int = 60_000) -> None:
        self._deadline = time.monotonic() + remaining_ms / 1000

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def main() -> None:
    module, directory = sys.argv[1], sys.argv[2]
    profile = sys.argv[4] if len(sys.argv) > 4 and sys.argv[3] == "--profile" else None
    event = json.load(sys.stdin)
    sys.path.insert(0, directory)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU, not wall: robust to a busy machine
        profiler.enable()
    loaded_before = set(sys.modules)  # what `-X importtime` shows that the timed part did not import
    started, cpu_started = time.perf_counter(), time.process_time()
    handler = __import__(module).handler
    imported, cpu_imported = time.perf_counter(), time.process_time()
    if os.environ.get("SQSJOBS_BENCH_NO_GC_PAUSE") == "1":
        import sqsjobs._clients as factory

        factory._collector_paused_for_first = lambda service_name: contextlib.nullcontext()  # type: ignore[assignment]
    response = handler(event, Context())
    answered, cpu_answered = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    print(json.dumps({"import_ms": (imported - started) * 1000, "batch_ms": (answered - imported) * 1000,
                      "cpu_import_ms": (cpu_imported - cpu_started) * 1000,
                      "cpu_batch_ms": (cpu_answered - cpu_imported) * 1000, "response": response,
                      "botocore": getattr(sys.modules.get("botocore"), "__file__", None),
                      "loaded_before": sorted(loaded_before)}))


if __name__ == "__main__":
    main()
