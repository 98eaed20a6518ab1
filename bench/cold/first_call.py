"""One Lambda cold start in a fresh process: import the handler module, then answer its first batch.

Run by ``bench.figures.first_invocation`` as
``python first_call.py MODULE DIRECTORY < event.json`` with the environment a
function would have (queue, table, ``AWS_ENDPOINT_URL`` of the moto server).
Nothing from sqsjobs, boto3 or Powertools is imported before the clock starts:
this script uses the standard library only, and its own Lambda context.
Prints one JSON line: import and first-batch milliseconds, wall and CPU (this
process, all threads: what a fraction of a vCPU stretches), and the response.
With ``--profile FILE`` it writes a CPU cProfile of the timed part;
run under ``-X importtime``, ``loaded_before`` tells the imports the clock saw
from those it did not, and ``loaded`` names the modules the timed part imported.
With ``--snapstart`` it plays Lambda SnapStart: the import and the hooks the
handler registers to run before the snapshot (``sqsjobs.prepare_snapstart``;
Powertools' handler registers none) happen before the clock starts, as they
happen before the snapshot; the clock then sees the after-restore hooks and the
first batch, the part of a restored instance's first invocation that is billed.
"""

from __future__ import annotations

import json
import sys
import time
import types
from typing import Any


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


class SnapshotHooks:
    """A stand-in for Lambda's ``snapshot_restore_py``: it keeps the hooks a handler registers at import."""

    def __init__(self) -> None:
        self.before: list[tuple[Any, tuple[Any, ...]]] = []
        self.after: list[tuple[Any, tuple[Any, ...]]] = []

    def register_before_snapshot(self, hook: Any, *args: Any) -> None:
        self.before.append((hook, args))

    def register_after_restore(self, hook: Any, *args: Any) -> None:
        self.after.append((hook, args))


def main() -> None:
    module, directory = sys.argv[1], sys.argv[2]
    flags = sys.argv[3:]
    profile = flags[flags.index("--profile") + 1] if "--profile" in flags else None
    event = json.load(sys.stdin)
    sys.path.insert(0, directory)
    snapshot = None
    if "--snapstart" in flags:  # import and the before-snapshot hooks happen before the snapshot: not billed
        snapshot = SnapshotHooks()
        hooks = types.ModuleType("snapshot_restore_py")
        hooks.register_before_snapshot = snapshot.register_before_snapshot  # type: ignore[attr-defined]
        hooks.register_after_restore = snapshot.register_after_restore  # type: ignore[attr-defined]
        sys.modules["snapshot_restore_py"] = hooks
        handler = __import__(module).handler
        for hook, args in snapshot.before:
            hook(*args)
    profiler = None
    if profile:
        import cProfile

        profiler = cProfile.Profile(time.process_time)  # CPU, not wall: robust to a busy machine
        profiler.enable()
    loaded_before = set(sys.modules)  # what `-X importtime` shows that the timed part did not import
    started, cpu_started = time.perf_counter(), time.process_time()
    if snapshot is None:
        handler = __import__(module).handler
    else:  # the restore: its hooks, then the first batch
        for hook, args in snapshot.after:
            hook(*args)
    imported, cpu_imported = time.perf_counter(), time.process_time()
    response = handler(event, Context())
    answered, cpu_answered = time.perf_counter(), time.process_time()
    if profiler is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    print(json.dumps({"import_ms": (imported - started) * 1000, "batch_ms": (answered - imported) * 1000,
                      "cpu_import_ms": (cpu_imported - cpu_started) * 1000,
                      "cpu_batch_ms": (cpu_answered - cpu_imported) * 1000, "response": response,
                      "botocore": getattr(sys.modules.get("botocore"), "__file__", None),
                      "loaded_before": sorted(loaded_before),
                      "loaded": sorted(set(sys.modules) - loaded_before)}))


if __name__ == "__main__":
    main()
