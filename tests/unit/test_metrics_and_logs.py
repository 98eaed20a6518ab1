"""EMF metrics and JSON log lines, read back from what the worker prints (no network)."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest

from sqsjobs import InMemoryStore, JobApp, PermanentError
from sqsjobs import _metrics as m
from sqsjobs.testing import FakeContext, sqs_event


class NullSqs:
    """Answers the two batch calls the worker makes for failures; records them."""

    class meta:
        endpoint_url = "https://sqs.us-east-1.amazonaws.com"

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def send_message_batch(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("send_message_batch", kwargs))
        return {"Successful": [{"Id": e["Id"], "MessageId": "x"} for e in kwargs["Entries"]], "Failed": []}

    def change_message_visibility_batch(self, **kwargs: Any) -> dict[str, Any]:
        self.calls.append(("change_message_visibility_batch", kwargs))
        return {"Successful": [{"Id": e["Id"]} for e in kwargs["Entries"]], "Failed": []}


def total(value: Any) -> float:
    """EMF carries a metric as a number or a list of values."""
    return float(sum(value)) if isinstance(value, list) else float(value)


@pytest.fixture
def app_and_lines() -> tuple[JobApp, list[str], NullSqs]:
    lines: list[str] = []
    sqs = NullSqs()
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/sqsjobs-jobs",
                 dlq_url="https://sqs.us-east-1.amazonaws.com/123456789012/sqsjobs-dlq", max_attempts=3,
                 store=InMemoryStore(), sqs_client=sqs, emit_metrics=lines.append, service="billing")  # type: ignore[arg-type]

    @app.job("ok", key="ok:{n}")
    def ok(n: int) -> None: ...

    @app.job("bad", key="bad:{n}")
    def bad(n: int) -> None:
        raise PermanentError("no")

    @app.job("flaky", key="flaky:{n}")
    def flaky(n: int) -> None:
        raise TimeoutError("slow")

    return app, lines, sqs


def test_one_emf_document_per_job_with_both_dimension_sets(app_and_lines: Any) -> None:
    app, lines, _ = app_and_lines
    bodies = [json.loads(app.message(name, n=i).body) for name, i in (("ok", 1), ("ok", 2), ("bad", 1), ("flaky", 1))]
    app.process_batch(sqs_event([*bodies, bodies[0]]))  # plus a duplicate of ok:1 in the same batch

    docs = {doc[m.DIMENSION_JOB]: doc for doc in map(json.loads, lines) if m.DIMENSION_JOB in doc}
    assert set(docs) == {"ok", "bad", "flaky"}
    for doc in docs.values():
        directive = doc["_aws"]["CloudWatchMetrics"][0]
        assert directive["Namespace"] == m.DEFAULT_NAMESPACE
        assert sorted(map(sorted, directive["Dimensions"])) == [["Job", "service"], ["service"]]
        assert doc["service"] == "billing"
    assert total(docs["ok"][m.SUCCEEDED]) == 2 and total(docs["ok"][m.DUPLICATE]) == 1
    assert len(docs["ok"][m.DURATION]) == 2
    assert total(docs["bad"][m.FAILED]) == 1 and total(docs["bad"][m.DEAD_LETTERED]) == 1
    assert total(docs["flaky"][m.FAILED]) == 1 and total(docs["flaky"][m.RETRIED]) == 1
    assert m.SUCCEEDED not in docs["bad"]


def test_unstarted_records_are_not_counted_as_failures(app_and_lines: Any) -> None:
    app, lines, _ = app_and_lines
    body = json.loads(app.message("ok", n=1).body)
    result = app.process_batch(sqs_event([body]), FakeContext(remaining_ms=1000))
    assert result.failures == (result.deliveries[0].message_id,)
    counted = [name for doc in map(json.loads, lines) for name in doc if name in m.COUNTS or name == m.DURATION]
    assert counted == []  # nothing ran, nothing failed (what the batch cost is still written)


def test_log_lines_carry_job_key_message_id_and_attempt(app_and_lines: Any) -> None:
    from aws_lambda_powertools import Logger

    app, _, _ = app_and_lines
    stream = io.StringIO()
    # A service name of its own: Powertools shares one stdlib logger per service name.
    body = json.loads(app.message("flaky", n=3).body)
    with app.use(logger=Logger(service="log-fields-test", stream=stream)):
        app.process_batch(sqs_event([body], message_id="mid-1", attempt=2))
        current = app.runtime.logger.get_current_keys()
    logs = [json.loads(line) for line in stream.getvalue().splitlines()]
    failed = [line for line in logs if line.get("message") == "job failed"]
    assert failed, logs
    line = failed[0]
    # The second receive, but the first run: attempts count runs that started, from the job's record.
    assert (line["job"], line["key"], line["message_id"], line["attempt"]) == ("flaky", "flaky:3", "mid-1", 1)
    assert line["error"] == "TimeoutError: slow"
    assert "job" not in current  # removed after the record


def test_the_sqs_calls_for_failures_are_batched(app_and_lines: Any) -> None:
    app, _, sqs = app_and_lines
    bodies = [json.loads(app.message("flaky", n=i).body) for i in range(10)]
    bodies += [json.loads(app.message("bad", n=i).body) for i in range(10)]
    app.process_batch(sqs_event(bodies))
    names = [name for name, _ in sqs.calls]
    assert names.count("change_message_visibility_batch") == 1
    assert names.count("send_message_batch") == 1


def test_a_job_name_with_a_lone_surrogate_is_still_logged(app_and_lines: Any) -> None:
    from aws_lambda_powertools import Logger

    app, _, _ = app_and_lines
    stream = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")  # strict UTF-8, like Lambda's stdout
    with app.use(logger=Logger(service="surrogate-log-test", stream=stream)):
        result = app.process_batch(sqs_event(['{"v": 1, "job": "\\ud800x", "args": {}}']))
    assert [d.outcome.value for d in result.deliveries if d.outcome] == ["dead_lettered"]
    stream.flush()
    lines = [json.loads(line) for line in stream.buffer.getvalue().decode().splitlines()]  # type: ignore[attr-defined]
    (line,) = [entry for entry in lines if entry["message"] == "dead-lettered"]
    assert line["job"] == "\\ud800x"
