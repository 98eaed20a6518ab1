"""A user's own moto tests pass on stock moto, with nothing of sqsjobs installed into moto (issue 30, item 1).

project/ is a user's project: its jobs (handlers/app.py), its worker entry point, and the tests a team
writes against moto, making the table and queues from template.yaml's own Properties, enqueueing with the
app, receiving with boto3 and calling the handler with the SQS event, on in-process ``mock_aws``, a
``ThreadedMotoServer`` and a ``python -m moto.server`` process. It runs here in a pytest of its own (a fresh
interpreter, rooted in a copy of the project): this process's moto carries the statement emulation
(tests/aws_support.py), a user's never does, and the inner suite checks that before and after each test.
One inner test opts in to the emulation (the ``sqsjobs_moto_partiql`` fixture) where moto runs in its
process; the checks after it show it was put back.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
BACKENDS = ("mock_aws", "ThreadedMotoServer", "moto.server process")
SCENARIOS = ("test_a_job_runs_once_and_its_status_says_succeeded",
             "test_a_duplicate_delivery_is_acknowledged_without_running",
             "test_a_permanent_failure_lands_in_the_dlq_with_its_reason",
             "test_a_stale_owner_s_completions_are_refused",
             "test_a_rate_limit_reserves_one_slot_a_job_and_defers_the_rest_once_to_their_slots")


def test_a_user_s_stock_moto_suite_passes(tmp_path: Path) -> None:
    project = tmp_path / "shop"
    shutil.copytree(HERE / "project", project, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy2(ROOT / "template.yaml", project / "template.yaml")
    env = {name: value for name, value in os.environ.items()
           if not name.startswith(("SQSJOBS_", "AWS_", "PYTEST_")) and name != "PYTHONPATH"}
    report = tmp_path / "report.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={report}"],
                          cwd=project, env=env, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stdout[-8000:] + done.stderr[-4000:]
    cases = {case.get("name", ""): case for case in ET.parse(report).iter("testcase")}
    opted_in = "test_moto_partiql_keeps_the_batched_path_where_moto_runs_in_this_process"
    assert set(cases) == {f"{scenario}[{backend}]" for scenario in SCENARIOS for backend in BACKENDS} | {
        f"{opted_in}[{backend}]" for backend in BACKENDS[:2]}
    assert not [name for name, case in cases.items() if len(case)]  # no skip, failure or error among them
    order = list(cases)
    assert all(name.startswith(opted_in) for name in order[-2:])  # the stock tests ran before anything opted in
