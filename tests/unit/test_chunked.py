"""Chunked-job units: declaration rules and the page runner's decisions, with a run store in memory."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sqsjobs import ConfigurationError, EnqueueError, JobApp, PermanentError, RetryableError
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.store._lease import LeaseState
from sqsjobs.store._memory import InMemoryStore


@pytest.fixture
def app() -> Any:
    # The real page runner over the in-memory store (the lease contract suite proves it equals DynamoDB's).
    app = JobApp(queue_url="https://sqs.example/q", store=InMemoryStore(), logger=_Quiet())
    sent: list[JobMessage] = []
    app.runtime.send = lambda message: sent.append(message) or "m"  # type: ignore[method-assign]
    app.sent = sent  # type: ignore[attr-defined]
    return app


def run_record(app: JobApp, run_id: str, job: str = "walk") -> Any:
    return app.runtime.store.get(f"run#{job}:{run_id}")


def declare(app: JobApp, fn: Any, key: str = "walk:{run_id}:{cursor}") -> Any:
    return app.job("walk", key=key, chunked=True)(fn)


def test_a_chunked_job_needs_run_id_and_cursor_parameters_and_both_in_its_key(app: JobApp) -> None:
    with pytest.raises(ConfigurationError, match=r"\['cursor'\]"):
        declare(app, lambda run_id: None, key="walk:{run_id}")
    with pytest.raises(ConfigurationError, match=r"must contain \{run_id\} and \{cursor\}"):
        app.job("walk2", key="walk:{run_id}", chunked=True)(_page)
    with pytest.raises(ConfigurationError, match=r"must contain"):
        app.job("walk3", chunked=True)(_page)  # the default key names the arguments as JSON, not as fields


def _page(run_id: str, cursor: int = 0) -> int | None:
    return None if cursor >= 20 else cursor + 10


def test_each_page_sends_its_continuation_and_the_last_finishes_the_run(app: Any) -> None:
    walk = declare(app, _page)
    assert walk.start(run_id="r") == "r"
    for cursor in (0, 10, 20):
        walk.fn(run_id="r", cursor=cursor)
    assert [m.key for m in app.sent] == ["walk:r:0", "walk:r:10", "walk:r:20"]
    assert json.loads(app.sent[-1].body)["args"] == {"run_id": "r", "cursor": 20}
    status = app.run_status("walk", "r")
    assert status.status == "FINISHED" and status.pages_done == 3
    assert run_record(app, "r").state is LeaseState.DONE


def test_a_done_page_only_resends_its_continuation_and_a_stale_page_does_nothing(app: Any) -> None:
    calls: list[int] = []

    def page(run_id: str, cursor: int = 0) -> int | None:
        calls.append(cursor)
        return _page(run_id, cursor)

    walk = declare(app, page)
    walk.fn(run_id="r", cursor=0)
    walk.fn(run_id="r", cursor=0)  # redelivered after the checkpoint: continuation again, page not re-run
    walk.fn(run_id="r", cursor=10)
    walk.fn(run_id="r", cursor=0)  # far behind the run now: stale
    assert calls == [0, 10]
    assert [m.key for m in app.sent] == ["walk:r:10", "walk:r:10", "walk:r:20"]


def test_a_cursor_that_does_not_move_is_a_permanent_error(app: Any) -> None:
    walk = declare(app, lambda run_id, cursor=0: cursor)
    with pytest.raises(PermanentError, match="never end"):
        walk.fn(run_id="r", cursor=5)


def test_a_continuation_sqs_refused_is_retryable(app: Any) -> None:
    walk = declare(app, _page)

    def refuse(message: JobMessage) -> str:
        raise EnqueueError("throttled")

    app.runtime.send = refuse
    with pytest.raises(RetryableError, match="continuation 'walk:r:10' not sent"):
        walk.fn(run_id="r", cursor=0)
    assert run_record(app, "r").get("cursor") == "10"  # checkpointed: the retry only sends


def test_string_and_integer_cursors_stay_different(app: Any) -> None:
    walk = app.job("pages", key="pages:{run_id}:{cursor}", chunked=True)(
        lambda run_id, cursor="": None if cursor == "b" else "b")
    walk.fn(run_id="s", cursor="a")
    assert run_record(app, "s", job="pages").get("cursor") == '"b"'


class _Quiet:
    def info(self, *args: Any, **kwargs: Any) -> None: ...
