"""The bundle's trimmed botocore data resolves every commercial region's endpoints as botocore's own data does.

infra/bundle/Makefile runs lib/sqsjobs/scaffold/bundle.py on the bundle's site-packages,
keeping only the runtime's services and those in infra/bundle/botocore-services.txt.
Here the same trim runs on a copy of this environment's botocore package (its
data must stay at botocore's own path: botocore treats endpoint data found
anywhere else as a custom override). A process importing that copy must
create every kept service's client in every region of the ``aws`` partition
and resolve the same endpoint URL for a call (plain, FIPS, dual-stack) as a
process importing the untrimmed package.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import botocore
import pytest
from template_support import ROOT

from sqsjobs.scaffold import bundle

BUNDLE = ROOT / "infra" / "bundle"
PACKAGE = Path(botocore.__file__).parent
DATA = PACKAGE / "data"
VARIANTS = {"plain": {}, "fips": {"use_fips_endpoint": True}, "dualstack": {"use_dualstack_endpoint": True}}
#: one call per service, whose endpoint is resolved (with its context parameters, where it has some)
CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "dynamodb": ("UpdateItem", {"TableName": "jobs", "Key": {}}),
    "sqs": ("SendMessageBatch", {"QueueUrl": "https://sqs.us-east-1.amazonaws.com/1/q", "Entries": []}),
    "scheduler": ("CreateSchedule", {"Name": "s"}),
    "ses": ("SendEmail", {}),
    "lambda": ("SendDurableExecutionCallbackHeartbeat", {"CallbackId": "YQ=="}),
    "stepfunctions": ("SendTaskHeartbeat", {"taskToken": "t"}),
}
# Run with the botocore to test first on sys.path: every (service, region, variant)'s endpoint, as JSON.
RESOLVE = """
import json, sys
import botocore
from botocore.config import Config
from botocore.session import Session
calls, regions, variants = json.loads(sys.stdin.read())
session = Session()
urls = {}
for service, (operation, params) in calls.items():
    for region in regions:
        for variant, options in variants.items():
            client = session.create_client(service, region_name=region, config=Config(**options),
                                           aws_access_key_id="testing", aws_secret_access_key="testing")
            model = client.meta.service_model.operation_model(operation)
            try:
                url = client._ruleset_resolver.construct_endpoint(operation_model=model, call_args=params,
                                                                  request_context={}).url
            except Exception as error:  # e.g. no FIPS endpoint there: both data sets must refuse alike
                url = type(error).__name__ + ": " + str(error)
            urls[f"{service} {region} {variant}"] = [url, client.meta.endpoint_url]
print(json.dumps({"botocore": botocore.__file__, "urls": urls}))
"""


#: the services the repository's bundle keeps, and the list that names them, as the repository names it
KEPT = bundle.kept_services(BUNDLE / "botocore-services.txt")
LISTING = "infra/bundle/botocore-services.txt"


@pytest.fixture(scope="module")
def trimmed_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding a copy of botocore whose data is trimmed as the bundle's is."""
    site = tmp_path_factory.mktemp("site")
    shutil.copytree(PACKAGE, site / "botocore", ignore=shutil.ignore_patterns("__pycache__"))
    bundle.trim(site / "botocore" / "data", KEPT, LISTING)  # as infra/bundle/Makefile's --services-label names it
    return site


@cache
def commercial_regions() -> list[str]:
    partitions = json.loads((DATA / "partitions.json").read_text())["partitions"]
    (aws,) = [p for p in partitions if p["id"] == "aws"]
    return sorted(aws["regions"])


def _resolve(site: Path | None) -> dict[str, Any]:
    """Every endpoint, resolved in a fresh process with ``site``'s botocore first on the path (None: the venv's)."""
    env = {"PATH": "", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": "/dev/null",
           "AWS_SHARED_CREDENTIALS_FILE": "/dev/null"}
    if site is not None:
        env["PYTHONPATH"] = str(site)
    payload = json.dumps([CALLS, commercial_regions(), VARIANTS])
    done = subprocess.run([sys.executable, "-c", RESOLVE], input=payload, env=env, capture_output=True, text=True,
                          check=True, timeout=600)
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_the_trim_keeps_the_listed_services_and_the_shared_files(trimmed_site: Path) -> None:
    data = trimmed_site / "botocore" / "data"
    services = KEPT
    assert {"dynamodb", "sqs", "scheduler", "ses"} <= set(services)
    assert set(services) == set(CALLS)  # every kept service has its endpoints checked below
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == sorted(services)
    assert all((data / name).is_file() for name in bundle.SHARED_FILES)
    assert json.loads((data / bundle.TRIMMED).read_text()) == {"kept": KEPT, "listing": LISTING}
    size = sum(p.stat().st_size for p in data.rglob("*") if p.is_file())
    assert size < 3_000_000  # from about 23 MB


@pytest.mark.slow
def test_every_commercial_region_resolves_the_same_endpoints_from_the_trimmed_data(trimmed_site: Path) -> None:
    regions = commercial_regions()
    assert len(regions) > 25 and "us-east-1" in regions
    full, trimmed = _resolve(None), _resolve(trimmed_site)
    assert trimmed["botocore"].startswith(str(trimmed_site))  # the trimmed copy was the one imported
    assert not full["botocore"].startswith(str(trimmed_site))
    assert len(trimmed["urls"]) == len(CALLS) * len(regions) * len(VARIANTS)
    differ = {key: (trimmed["urls"][key], urls) for key, urls in full["urls"].items() if trimmed["urls"][key] != urls}
    assert differ == {}
    assert trimmed["urls"]["dynamodb us-east-1 plain"][0] == "https://dynamodb.us-east-1.amazonaws.com"


def test_the_trimmed_data_does_not_know_the_other_services(trimmed_site: Path) -> None:
    probe = "from botocore.session import Session; print(sorted(Session().get_available_services()))"
    done = subprocess.run([sys.executable, "-c", probe], env={"PATH": "", "PYTHONPATH": str(trimmed_site)},
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == str(KEPT)


def test_a_missing_kept_service_stops_the_build(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    for name in bundle.SHARED_FILES:
        (data / name).write_text("{}")
    with pytest.raises(SystemExit, match="has no dynamodb"):
        bundle.trim(data, ["dynamodb"])


# sqsjobs.client of a service the trimmed botocore left out, and of one it kept, in a process importing the copy.
CLIENT_OF = """
import json, sys
import botocore, sqsjobs
from sqsjobs import ConfigurationError
assert botocore.__file__.startswith(sys.argv[1]), botocore.__file__
answer = {}
for service in ("s3", "ses"):
    try:
        answer[service] = sqsjobs.client(service).meta.service_model.service_name
    except ConfigurationError as error:
        chained = error.__cause__ is not None or not error.__suppress_context__
        answer[service] = {"error": str(error), "chained": chained}
print(json.dumps(answer))
"""


def _clients_of(site: Path) -> dict[str, Any]:
    env = {"PATH": "", "PYTHONPATH": str(site), "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}
    done = subprocess.run([sys.executable, "-c", CLIENT_OF, str(site)], env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def test_a_client_of_a_service_the_bundle_left_out_names_the_list_to_edit(trimmed_site: Path) -> None:
    answer = _clients_of(trimmed_site)
    assert answer["ses"] == "ses"  # a kept service's client is built as ever
    error = answer["s3"]["error"]
    assert f"add s3 to {LISTING}" in error and "sam build" in error and ", ".join(KEPT) in error
    assert answer["s3"]["chained"] is False  # one line, not botocore's UnknownServiceError and its traceback


def test_a_botocore_trimmed_by_other_means_says_what_to_keep(trimmed_site: Path, tmp_path: Path) -> None:
    # A bundle built another way: the same models left out, no list of ours beside them.
    site = tmp_path / "site"
    shutil.copytree(trimmed_site, site)
    (site / "botocore" / "data" / bundle.TRIMMED).unlink()
    answer = _clients_of(site)
    assert answer["ses"] == "ses"
    assert "keep botocore/data/s3" in answer["s3"]["error"] and "trimmed" in answer["s3"]["error"]
    # Trimmed too far: a data file every client reads is gone. Not botocore's DataNotFoundError from deep inside.
    (site / "botocore" / "data" / "endpoints.json").unlink()
    answer = _clients_of(site)
    for service in ("s3", "ses"):
        error = answer[service]["error"]
        assert "cannot read botocore/data/endpoints.json" in error and answer[service]["chained"] is False
        assert all(name in error for name in bundle.SHARED_FILES)


def test_the_runtime_reads_the_file_the_bundle_script_writes() -> None:
    from sqsjobs import _botocore_data

    assert _botocore_data.TRIMMED == bundle.TRIMMED
