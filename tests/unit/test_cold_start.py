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
