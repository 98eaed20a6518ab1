"""One client factory: every handler, the runtime, the operator tools and the local cloud share one botocore session;
a service's model loads with the cyclic collector off, once per process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sqsjobs import _clients
from sqsjobs.local.aws import Clients

ROOT = Path(__file__).resolve().parents[2]
ENV = {"PATH": "", "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "x",
       "AWS_EC2_METADATA_DISABLED": "true", "SQSJOBS_TABLE": "idempotency",
       "SQSJOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/jobs",
       "SQSJOBS_DLQ_URL": "https://sqs.us-east-1.amazonaws.com/1/jobs-dlq"}

EVERY_HANDLER = """
import json, sys
sys.path.insert(0, "handlers")
import botocore.session
sessions = []
original = botocore.session.Session.__init__
def counting(self, *args, **kwargs):
    sessions.append(1)
    original(self, *args, **kwargs)
botocore.session.Session.__init__ = counting
import worker, redrive, scheduler, outbox_relay
worker.app.runtime.consumer, worker.app.runtime.sqs, worker.ses_client(), worker.orders_client()
redrive.handler.sqs, redrive.handler.records
from sqsjobs._clients import operator_client
operator_client("cloudwatch")
print(json.dumps({"sessions": len(sessions), "boto3": "boto3" in sys.modules}))
"""


@pytest.mark.slow
def test_every_handler_and_the_operator_clients_share_one_botocore_session() -> None:
    out = subprocess.run([sys.executable, "-c", EVERY_HANDLER], cwd=ROOT, capture_output=True, text=True,
                         check=True, env=ENV)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {"sessions": 1, "boto3": False}


COLLECTIONS = """
import gc, json, os, sys
import botocore
from sqsjobs import _clients
collections = []
BOTOCORE = os.path.dirname(botocore.__file__) + os.sep
def in_botocore():
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename.startswith(BOTOCORE):
            return True
        frame = frame.f_back
    return False
# Collections that interrupt botocore's work (the session, the models); those of this script do not count.
gc.callbacks.append(lambda phase, info: phase == "start" and collections.append(in_botocore()))
gc.set_threshold(50)  # a collection every 50 allocations: the session and the model would trigger hundreds
_clients.client("dynamodb")
during_first, before = sum(collections), len(collections)
enabled_after_first = gc.isenabled()
frozen = gc.get_freeze_count()
junk = [[i] for i in range(1000)]  # the collector runs again once the model is loaded
_clients.dynamodb_client()  # the model is cached: no pause, and no freeze
gc.disable()
_clients.sqs_client()  # a collector that was off stays off
print(json.dumps({"during_first": during_first, "enabled_after_first": enabled_after_first,
                  "frozen": frozen > 10000, "collected_after": len(collections) > before,
                  "frozen_again": gc.get_freeze_count() != frozen,
                  "enabled_at_end": gc.isenabled()}))
"""


def test_a_service_s_first_client_loads_its_model_without_a_collection_and_puts_the_collector_back() -> None:
    out = subprocess.run([sys.executable, "-c", COLLECTIONS], cwd=ROOT, capture_output=True, text=True, check=True,
                         env=ENV)
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report == {"during_first": 0, "enabled_after_first": True, "frozen": True, "collected_after": True,
                      "frozen_again": True, "enabled_at_end": False}


def test_the_local_cloud_s_clients_come_from_the_one_session() -> None:
    local = Clients("http://127.0.0.1:5000").get("sqs")
    assert local.meta.endpoint_url == "http://127.0.0.1:5000"
    assert local.meta.config.max_pool_connections == 64
    assert local._request_signer._credentials.access_key == "testing"
    # The same loader (one session): the model object is shared with the runtime's own SQS client.
    assert local.meta.service_model is not None
    loader = _clients.session().get_component("data_loader")
    assert isinstance(loader, _clients.ServiceLoader)
    assert loader.load_service_model("sqs", "service-2") is loader.load_service_model("sqs", "service-2")


def test_a_loopback_operator_client_signs_with_the_local_credentials_whatever_the_environment() -> None:
    local = _clients.operator_client("dynamodb", endpoint_url="http://localhost:4566")
    assert local._request_signer._credentials.access_key == "testing"
    assert local.meta.endpoint_url == "http://localhost:4566"
