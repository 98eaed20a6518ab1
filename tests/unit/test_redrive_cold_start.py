"""Importing the redrive handler (and the operator modules) creates no AWS client and imports no boto3."""

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
import redrive
import sqsjobs.ops._status, sqsjobs.ops._redrive_native, sqsjobs.ops._queues, sqsjobs.ops._dlq_letters
print(json.dumps({"clients": len(created), "boto3": "boto3" in sys.modules,
                  "handler": callable(redrive.handler)}))
"""


def test_importing_the_redrive_handler_makes_no_client_and_does_not_import_boto3() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PATH": "", "AWS_DEFAULT_REGION": "us-east-1"})
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"clients": 0, "boto3": False, "handler": True}
