"""The Lambda bundle (``sam build`` output) holds only what Lambda runs, and runs from nothing else.

``make test`` runs the template checks (``make sam-build`` among them) before
pytest, so ``.aws-sam/build`` is fresh here; run alone, this module builds it
first when it is missing or older than the sources (``make sam-build``).
Every function is built by infra/bundle/Makefile; its docstring says how the
extras' packages are kept out.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import cache
from pathlib import Path

import pytest
from template_support import ROOT, TEMPLATE, load_template

import sqsjobs
from bench.bundle import NOT_RUNTIME_PACKAGES, NOT_RUNTIME_SUBPACKAGES, not_runtime_entries
from bench.support import python312
from sqsjobs.scaffold.bundle import kept_services

# A first build installs aws-sam-cli in its own environment: minutes, not seconds.
pytestmark = pytest.mark.timeout(1800)

BUILD = ROOT / ".aws-sam" / "build"
#: what may change the bundle: a build older than any of these is rebuilt before it is inspected
SOURCES = (ROOT / "pyproject.toml", ROOT / "template.yaml", ROOT / "infra" / "bundle", ROOT / "lib" / "sqsjobs",
           ROOT / "handlers")
#: the modules of sqsjobs/ops the redrive function's bundle keeps (the other bundles keep none)
REDRIVE_OPS = sorted(line.split("#", 1)[0].strip()
                     for line in (ROOT / "infra" / "bundle" / "redrive-ops.txt").read_text().splitlines()
                     if line.split("#", 1)[0].strip())
#: the handler of the one function that runs part of sqsjobs/ops
REDRIVE_HANDLER = "redrive.handler"
#: the botocore services the bundle keeps (lib/sqsjobs/scaffold/bundle.py deletes the others)
KEPT_SERVICES = kept_services(ROOT / "infra" / "bundle" / "botocore-services.txt")
# Run in each function's bundle with `python3.12 -I -S` (no site-packages, no environment, no current
# directory): import the handler, then every module of the bundled sqsjobs package (the handler imports
# most of them lazily, on its first event), then build the clients the runtime and the reference app
# build, from the bundle's trimmed botocore data. No AWS call.
PROBE = """
import importlib, json, pkgutil, sys, sysconfig
bundle, handler = sys.argv[1], sys.argv[2]
sys.path.insert(0, bundle)
module_name, _, attribute = handler.rpartition(".")
entry = getattr(importlib.import_module(module_name), attribute)
import sqsjobs
star = {}
exec("from sqsjobs import *", star)  # the tools' errors whose homes the bundle leaves out are not in __all__
for info in pkgutil.walk_packages(sqsjobs.__path__, "sqsjobs."):
    importlib.import_module(info.name)
from sqsjobs import _clients as clients
clients.dynamodb_client(), clients.sqs_client(), clients.scheduler_client(), clients.client("ses")
allowed = (bundle, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"])
outside = sorted(name for name, m in list(sys.modules.items())
                 if getattr(m, "__file__", None) and not m.__file__.startswith(allowed))
print(json.dumps({"callable": callable(entry), "outside": outside, "modules": sorted(sys.modules),
                  "star": sorted(name for name in star if not name.startswith("__"))}))
"""


@cache
def functions() -> dict[str, str]:
    """Every function the bundle Makefile builds: logical id → Handler."""
    resources = load_template(TEMPLATE)["Resources"]
    return {logical_id: resource["Properties"]["Handler"] for logical_id, resource in resources.items()
            if resource["Type"] == "AWS::Serverless::Function"
            and resource.get("Metadata", {}).get("BuildMethod") == "makefile"}


def _newest_source() -> float:
    newest = 0.0
    for source in SOURCES:
        paths = [source] if source.is_file() else [p for p in source.rglob("*") if "__pycache__" not in p.parts]
        newest = max([newest, *(p.stat().st_mtime for p in paths)])
    return newest


@pytest.fixture(scope="module")
def build() -> Path:
    """``.aws-sam/build``, rebuilt by ``make sam-build`` if missing or stale."""
    stamp = BUILD / "template.yaml"
    if not stamp.is_file() or stamp.stat().st_mtime < _newest_source():
        done = subprocess.run(["make", "-s", "sam-build"], cwd=ROOT, capture_output=True, text=True, timeout=1800)
        assert done.returncode == 0, f"make sam-build failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return BUILD


def test_every_function_is_built(build: Path) -> None:
    assert functions(), "no makefile-built function in the template"
    for logical_id, handler in functions().items():
        module = handler.rpartition(".")[0]
        assert (build / logical_id / f"{module}.py").is_file(), f"{logical_id}: no {module}.py"
        assert (build / logical_id / "sqsjobs" / "__init__.py").is_file(), f"{logical_id}: no sqsjobs package"


@pytest.mark.parametrize("logical_id", sorted(functions()))
def test_the_bundle_holds_no_package_of_an_extra(build: Path, logical_id: str) -> None:
    bundle = build / logical_id
    assert not_runtime_entries(bundle) == []
    # What must be there: the runtime, and precompiled bytecode for python3.12 (read-only /var/task).
    top = {path.name for path in bundle.iterdir()}
    assert {"sqsjobs", "botocore", "aws_lambda_powertools", "pynamodb"} <= top
    assert list((bundle / "sqsjobs" / "__pycache__").glob("*.cpython-312.pyc"))
    # botocore's data holds the kept services only (tests/infra/test_botocore_data.py checks their endpoints).
    data = bundle / "botocore" / "data"
    assert sorted(p.name for p in data.iterdir() if p.is_dir()) == KEPT_SERVICES


@pytest.mark.parametrize("logical_id", sorted(functions()))
def test_the_handler_and_the_whole_runtime_import_from_the_bundle_alone(build: Path, logical_id: str) -> None:
    bundle = build / logical_id
    # Fake credentials and an unreachable endpoint: nothing here may call AWS, and nothing would answer.
    env = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bundle",
           "AWS_SECRET_ACCESS_KEY": "bundle", "AWS_EC2_METADATA_DISABLED": "true",
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    done = subprocess.run([python312(), "-I", "-S", "-c", PROBE, str(bundle), functions()[logical_id]],
                          cwd=bundle, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["callable"] is True
    assert report["outside"] == []
    # `from sqsjobs import *` brings every public name but the errors of the tools the bundle leaves out.
    left_out = {"CheckUnavailable", "ConsoleError", "LocalCloudError"}
    if functions()[logical_id] != REDRIVE_HANDLER:
        left_out |= {"MoveTaskError", "RedriveError", "StatusError"}  # sqsjobs/ops is the redrive function's
    assert report["star"] == sorted(set(sqsjobs.__all__) - left_out)
    loaded = {name.split(".")[0] for name in report["modules"]}
    assert sorted(loaded & set(NOT_RUNTIME_PACKAGES)) == []
    extras = tuple(sub.replace("/", ".") for sub in NOT_RUNTIME_SUBPACKAGES)
    assert [m for m in report["modules"] if m in extras or m.startswith(tuple(f"{e}." for e in extras))] == []


@pytest.mark.parametrize("logical_id", sorted(functions()))
def test_only_the_redrive_bundle_holds_ops_and_only_what_redrive_runs(build: Path, logical_id: str) -> None:
    ops = build / logical_id / "sqsjobs" / "ops"
    if functions()[logical_id] != REDRIVE_HANDLER:
        assert not ops.exists(), f"{logical_id}: the operator's side (sqsjobs/ops) is in a bundle that never runs it"
        return
    assert sorted(p.stem for p in ops.glob("*.py")) == REDRIVE_OPS
    # Bytecode of the deleted modules goes too: no stale .pyc of a module that is not there.
    assert sorted(p.name.split(".")[0] for p in (ops / "__pycache__").glob("*.pyc")) == REDRIVE_OPS


def test_the_redrive_function_is_built_with_its_ops_modules() -> None:
    # The Makefile keeps ops/ for the functions it names in REDRIVE_FUNCTIONS: they must be the redrive handlers.
    makefile = (ROOT / "infra" / "bundle" / "Makefile").read_text()
    (line,) = [line for line in makefile.splitlines() if line.startswith("REDRIVE_FUNCTIONS :=")]
    named = line.split(":=", 1)[1].split()
    assert named == sorted(i for i, handler in functions().items() if handler == REDRIVE_HANDLER) != []
