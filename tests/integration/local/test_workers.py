"""Function workers: warm reuse, and survival of the thread that started them."""

from __future__ import annotations

import os
import threading

from integration.local.local_support import FIXTURE

from sqsjobs.local.invoker import FunctionPool
from sqsjobs.local.model import FunctionSpec

# Nothing here is about the Timeout: a generous one, so a loaded machine cannot turn an invocation into one.
SPEC = FunctionSpec(logical_id="Worker", name="fixture-Worker", handler="app.handler", code_dir=FIXTURE.parent,
                    timeout=60, environment={"TABLE": "unused"})


def event(body: str) -> dict[str, object]:
    return {"Records": [{"messageId": "m-1", "body": body}]}


def test_a_worker_started_by_a_finished_thread_keeps_serving() -> None:
    pool = FunctionPool(SPEC, base_env=dict(os.environ), log=lambda function, line: None)
    try:
        starter = threading.Thread(target=pool.warm)
        starter.start()
        starter.join()

        results = [pool.invoke(event("ok")) for _ in range(3)]

        assert [r.ok for r in results] == [True, True, True]
        assert pool.cold_starts == 1
    finally:
        pool.close()


def test_a_crash_is_reported_as_a_crash_and_the_next_invocation_starts_cold() -> None:
    pool = FunctionPool(SPEC, base_env=dict(os.environ), log=lambda function, line: None)
    try:
        pool.crash_next()
        crashed = pool.invoke(event("ok"))
        after = pool.invoke(event("ok"))

        assert crashed.crashed and not crashed.timed_out
        assert after.ok
        assert pool.cold_starts == 2
    finally:
        pool.close()
