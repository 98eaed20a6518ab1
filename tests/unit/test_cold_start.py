"""Importing the worker handler creates no AWS client and imports nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json, sys
sys.path.insert(0, "handlers")
import botocore.client
created = []
original = botocore.client.ClientCreator.create_client
botocore.client.ClientCreator.create_client = lambda *a, **k: created.append(a) or original(*a, **k)
import worker
heavy = [m for m in ("boto3", "pynamodb", "aws_lambda_powertools.utilities.batch",
                     "aws_lambda_powertools.logging", "aws_lambda_powertools.metrics") if m in sys.modules]
print(json.dumps({"clients": len(created), "heavy": heavy, "jobs": sorted(worker.app.jobs)}))
"""


def test_importing_the_handler_makes_no_client_and_no_heavy_import() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PATH": "", "AWS_DEFAULT_REGION": "us-east-1"})
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report["clients"] == 0
    assert report["heavy"] == []
    assert "invoice-email" in report["jobs"]


FIRST_BATCH_SET_UP = """
import json, sys
sys.path.insert(0, "handlers")
import botocore.session
sessions = []
original = botocore.session.Session.__init__
def counting(self, *args, **kwargs):
    sessions.append(1)
    original(self, *args, **kwargs)
botocore.session.Session.__init__ = counting
import worker
worker.app.runtime.consumer, worker.app.runtime.sqs, worker.ses_client(), worker.orders_client()
from sqsjobs._clients import session
# botocore caches each full listing of its service directories under this key (loaders.instance_cache).
cached = session().get_component("data_loader")._cache
print(json.dumps({"sessions": len(sessions), "boto3": "boto3" in sys.modules,
                  "listed": [key[1] for key in cached if key[0] == "list_available_services"]}))
"""


def test_the_first_batch_set_up_builds_one_botocore_session_and_never_imports_boto3() -> None:
    # The worker's clients and the reference app's SES and orders clients share one session
    # (sqsjobs._clients), whose loader never lists every service directory botocore ships.
    out = subprocess.run([sys.executable, "-c", FIRST_BATCH_SET_UP], cwd=ROOT, capture_output=True, text=True,
                         check=True, env={"PATH": "", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x",
                                          "AWS_SECRET_ACCESS_KEY": "x", "SQSJOBS_TABLE": "idempotency",
                                          "SQSJOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/jobs"})
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"sessions": 1, "boto3": False, "listed": []}
