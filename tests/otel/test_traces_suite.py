"""The trace tests (suite/) pass in a pytest of their own, and tracing costs nothing where OpenTelemetry is absent.

suite/ configures OpenTelemetry's SDK with an in-memory exporter: that is process-wide, so it runs in a fresh
interpreter (conftest.py), and this test checks every one of its cases ran and passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
CASES = {
    "test_a_request_enqueued_under_a_span_is_linked_from_the_batch_and_its_job_span",
    "test_a_job_enqueued_by_a_job_carries_the_job_span_s_context",
    "test_a_failure_records_the_exception_and_its_retry_then_its_dead_letter",
    "test_a_permanent_failure_is_dead_lettered_with_its_reason_on_the_span",
    "test_messages_that_do_not_run_say_why_on_their_spans",
    "test_enqueue_many_is_one_send_span_whose_context_every_message_carries",
    "test_the_trace_context_stays_within_the_attribute_limit_and_the_size_limit",
    "test_a_delayed_job_carries_the_context_through_its_schedule",
    "test_an_outbox_item_keeps_the_request_s_context_for_the_relay",
    "test_an_x_ray_trace_header_is_the_link_when_no_traceparent_came",
    "test_a_job_s_span_is_its_own_when_runs_interleave",
    "test_outcome_names_are_the_worker_s",
    "test_a_chain_s_next_step_links_to_the_run_of_the_step_that_completed",
    "test_a_group_s_callback_links_to_a_member_run_that_finished_the_group",
    "test_a_superseded_burst_and_a_deferral_say_so_on_their_spans",
    "test_group_and_chain_sends_under_a_request_carry_its_context",
    "test_a_failing_tracer_never_fails_a_send_or_a_batch",
    "test_async_and_threaded_jobs_in_flight_together_each_run_under_its_own_span",
}


def test_the_trace_suite_passes_in_its_own_interpreter(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    env = {name: value for name, value in os.environ.items() if not name.startswith(("SQSJOBS_", "PYTEST_"))}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={report}"], cwd=HERE / "suite",
                          env=env, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    cases = {case.get("name", ""): case for case in ET.parse(report).iter("testcase")}
    assert set(cases) == CASES
    assert not [name for name, case in cases.items() if len(case)]  # no skip, failure or error among them


#: OpenTelemetry made unimportable (as if not installed); a job enqueued and run through the worker
ABSENT = """
import json, sys
class Absent:
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"{name} is blocked: OpenTelemetry is not installed here")
        return None
sys.meta_path.insert(0, Absent())
from sqsjobs import JobApp
app = JobApp()
ran = []
@app.job("greet", key="greet:{user_id}")
def greet(user_id: int) -> None:
    ran.append(user_id)
with app.testing() as t:
    greet.enqueue(user_id=7)
    app.enqueue_many([greet.message(user_id=8), greet.message(user_id=9, delay=2 * 86_400)])
    t.advance(2 * 86_400)
    t.drain()
    attributes = sorted({name for m in t.sqs.sent_to(t.queue_url) for name in m.attributes})
print(json.dumps({"ran": sorted(ran), "attributes": attributes,
                  "imported": sorted(m for m in sys.modules if m.startswith("opentelemetry"))}))
"""


def test_without_opentelemetry_nothing_of_it_is_imported_and_messages_carry_no_trace() -> None:
    out = subprocess.run([sys.executable, "-c", ABSENT], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PATH": "", "AWS_DEFAULT_REGION": "us-east-1"}, timeout=300)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"ran": [7, 8, 9], "attributes": ["sqsjobs.job"], "imported": []}


#: OpenTelemetry installed (the API and the SDK) but never imported by the application: still nothing imported
UNUSED = ABSENT.replace("sys.meta_path.insert(0, Absent())", "import importlib.metadata\n"
                        "assert importlib.metadata.version('opentelemetry-sdk')")


def test_with_opentelemetry_installed_but_unused_nothing_of_it_is_imported() -> None:
    out = subprocess.run([sys.executable, "-c", UNUSED], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PATH": "", "AWS_DEFAULT_REGION": "us-east-1"}, timeout=300)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"ran": [7, 8, 9], "attributes": ["sqsjobs.job"], "imported": []}
