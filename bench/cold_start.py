"""Cold start, two ways: the first invocation (import + first batch, the figure a Lambda user pays) and import alone.

Both run each handler in fresh processes, sqsjobs and Powertools alternating,
after one warm-up round (so the page cache and .pyc files are warm for both).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.contenders import bodies
from bench.figures import BATCH, ROOT, delete_batch, receive_batch
from bench.support import Stat, client, create_queues, create_table

# ---------------------------------------------------------------- import only
_IMPORT_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\| (.*)$")


def import_time_ms(module: str, path: Path, env: dict[str, str]) -> float:
    """Cumulative import time of ``module`` in a fresh interpreter (``python -X importtime``)."""
    completed = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"], cwd=path, env=env,
        capture_output=True, text=True, check=True,
    )
    for line in completed.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match and match.group(3).strip() == module:
            return int(match.group(2)) / 1000
    raise RuntimeError(f"no import line for {module}: {completed.stderr[-500:]}")


def import_only(reps: int) -> dict[str, Stat]:
    """handlers/worker.py vs bench/cold/pt_worker.py, each in ``reps`` fresh processes (alternating)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "AWS_"))}
    env.update({"SQSJOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs",
                "SQSJOBS_DLQ_URL": "https://sqs.us-east-1.amazonaws.com/123456789012/jobs-dlq",
                "SQSJOBS_TABLE": "idempotency", "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"})
    targets = {"sqsjobs": ("worker", ROOT / "handlers"), "powertools": ("pt_worker", ROOT / "bench" / "cold")}
    values: dict[str, list[float]] = {name: [] for name in targets}
    for module, path in targets.values():
        import_time_ms(module, path, {**env, "PYTHONPATH": str(path)})  # warm the .pyc and page caches
    for _ in range(reps):
        for name, (module, path) in targets.items():
            values[name].append(import_time_ms(module, path, {**env, "PYTHONPATH": str(path)}))
    return {name: Stat(tuple(v)) for name, v in values.items()}


# ---------------------------------------------------------------- first invocation
FIRST_CALL = ROOT / "bench" / "cold" / "first_call.py"
#: the handlers, as (module, directory) for ``bench/cold/first_call.py``: sqsjobs' like-for-like of Powertools'
#: (one job, bench/cold/sq_worker.py), the reference worker (handlers/worker.py: every feature declared), Powertools'
COLD_TARGETS = {"sqsjobs": ("sq_worker", ROOT / "bench" / "cold"), "reference": ("worker", ROOT / "handlers"),
                "powertools": ("pt_worker", ROOT / "bench" / "cold")}
SENDER = "billing@example.com"
#: the runs of each round. "sqsjobs" is the one-job worker as its bundle ships it (botocore's data trimmed to its
#: services, lib/sqsjobs/scaffold/bundle.py); the reference worker declares every feature; the full-data run says
#: what the trimming is worth; the SnapStart pair is the first invocation of an instance restored from a snapshot
SQSJOBS_REFERENCE = "sqsjobs, the reference worker (every feature declared)"
SQSJOBS_UNTRIMMED = "sqsjobs, botocore's full data"
SQSJOBS_SNAPSTART = "sqsjobs after a SnapStart restore"
POWERTOOLS_SNAPSTART = "powertools after a SnapStart restore"
VARIANTS = ("sqsjobs", SQSJOBS_REFERENCE, SQSJOBS_UNTRIMMED, "powertools", SQSJOBS_SNAPSTART, POWERTOOLS_SNAPSTART)
#: each run's handler (``COLD_TARGETS``), whether it plays SnapStart, and what it is compared with
RUNS: dict[str, tuple[str, bool, str]] = {
    "sqsjobs": ("sqsjobs", False, "powertools"),
    SQSJOBS_REFERENCE: ("reference", False, "powertools"),
    SQSJOBS_UNTRIMMED: ("sqsjobs", False, "powertools"),
    "powertools": ("powertools", False, "powertools"),
    SQSJOBS_SNAPSTART: ("sqsjobs", True, POWERTOOLS_SNAPSTART),
    POWERTOOLS_SNAPSTART: ("powertools", True, POWERTOOLS_SNAPSTART),
}
#: the runs on the bundle's trimmed botocore data
TRIMMED = ("sqsjobs", SQSJOBS_REFERENCE, SQSJOBS_SNAPSTART)


@dataclass
class FirstInvocation:
    """Per run kind (``VARIANTS``), one value per fresh process: import and first-batch ms, wall and CPU, and sums."""

    import_ms: dict[str, list[float]] = field(default_factory=dict)
    batch_ms: dict[str, list[float]] = field(default_factory=dict)
    total_ms: dict[str, list[float]] = field(default_factory=dict)
    cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    #: one more run each under ``-X importtime``: import ms of the timed part by top-level package
    imports: dict[str, list[tuple[str, float]]] = field(default_factory=dict)
    #: the moto server's CPU during each run (its answers are in the wall time, not in the client's CPU)
    server_cpu_ms: dict[str, list[float]] = field(default_factory=dict)
    #: the cores the measured processes and the moto server ran on
    cores: tuple[int, int] = (0, 0)
    #: the modules the timed part of one run imported: all of them, and sqsjobs' own
    modules: dict[str, tuple[int, int]] = field(default_factory=dict)

    def add(self, name: str, run: dict[str, Any]) -> None:
        self.import_ms.setdefault(name, []).append(run["import_ms"])
        self.batch_ms.setdefault(name, []).append(run["batch_ms"])
        self.total_ms.setdefault(name, []).append(run["import_ms"] + run["batch_ms"])
        self.cpu_ms.setdefault(name, []).append(run["cpu_import_ms"] + run["cpu_batch_ms"])
        loaded = run["loaded"]
        self.modules[name] = (len(loaded), sum(1 for m in loaded if m == "sqsjobs" or m.startswith("sqsjobs.")))

    def ratio(self, name: str, key: str = "total_ms") -> Stat:
        """``name`` over its Powertools run (``RUNS``), run by run (each round runs every variant back to back)."""
        values = getattr(self, key)
        against = RUNS[name][2]
        return Stat(tuple(a / b for a, b in zip(values[name], values[against], strict=True)))


def trimmed_botocore(into: Path) -> Path:
    """A copy of this environment's botocore under ``into``, its data trimmed as the bundle's (returns ``into``)."""
    import shutil

    import botocore

    from sqsjobs.scaffold import bundle

    shutil.copytree(Path(botocore.__file__).parent, into / "botocore", ignore=shutil.ignore_patterns("__pycache__"))
    bundle.trim(into / "botocore" / "data", bundle.kept_services(ROOT / "infra" / "bundle" / "botocore-services.txt"))
    return into


def first_invocation(reps: int, profile_dir: Path | None = None) -> FirstInvocation:
    """A Lambda cold start per variant and repetition (alternating, fresh processes, pinned).

    Each run imports its handler module in a new interpreter on one core, then
    answers its first batch: 10 new ``invoice-email`` jobs received from a
    queue on a moto server (its own process, on the other core), each job
    sending its e-mail through SES there, behind each framework's DynamoDB
    idempotency table. The run is checked (no failed record, 10 records
    written) so a broken run cannot pass for a fast one.
    """
    import tempfile

    from bench.pinned import cores, moto_process

    client_core, server_core = cores()
    out = FirstInvocation(cores=(client_core, server_core))
    with tempfile.TemporaryDirectory() as scratch, moto_process(server_core) as server:
        trimmed = trimmed_botocore(Path(scratch))
        _runs(server, reps, out, client_core, trimmed, profile_dir)
    return out


def _runs(server: Any, reps: int, out: FirstInvocation, core: int, trimmed: Path, profile_dir: Path | None
          ) -> None:
    from bench.pinned import child_env
    from sqsjobs._settings import ENV_DLQ_URL, ENV_QUEUE_URL, ENV_TABLE

    endpoint = server.url
    sqs, dynamodb, ses = client("sqs", endpoint), client("dynamodb", endpoint), client("ses", endpoint)
    queue, dlq = create_queues(sqs, "bench-first")
    tables = {name: f"bench-first-{i}" for i, name in enumerate(VARIANTS)}
    for name, table in tables.items():
        create_table(dynamodb, table, "id" if RUNS[name][0] == "powertools" else "pk")
    ses.verify_email_identity(EmailAddress=SENDER)
    base = {**child_env(endpoint), ENV_QUEUE_URL: queue, ENV_DLQ_URL: dlq, "SQSJOBS_SENDER": SENDER,
            "POWERTOOLS_SERVICE_NAME": "bench"}
    base.pop("PYTHONPATH")
    envs = {name: {**base, ENV_TABLE: tables[name]} for name in VARIANTS}
    for name in TRIMMED:
        envs[name]["PYTHONPATH"] = str(trimmed)  # its botocore first: the bundle's data
    number = 0
    for rep in range(reps + 1):
        for name in VARIANTS:
            evt = receive_batch(sqs, queue, bodies(10_000 + number * BATCH, BATCH))
            number += 1
            profile = None if profile_dir is None or rep != reps else profile_dir / f"{name}.prof"
            server_before = server.cpu_seconds()
            run = _first_call(name, evt, envs[name], profile, core)
            server_ms = (server.cpu_seconds() - server_before) * 1000
            delete_batch(sqs, queue, evt)
            if rep:  # the first round warms the .pyc and page caches
                out.add(name, run)
                out.server_cpu_ms.setdefault(name, []).append(server_ms)
    for name in LISTED:
        evt = receive_batch(sqs, queue, bodies(90_000 + number * BATCH, BATCH))
        number += 1
        out.imports[name] = _costliest_imports(name, evt, envs[name])
        delete_batch(sqs, queue, evt)
    from sqsjobs.store._statement_trust import WITNESS

    for name, table in tables.items():
        key = "id" if RUNS[name][0] == "powertools" else "pk"
        items = dynamodb.scan(TableName=table, ProjectionExpression="#k", ExpressionAttributeNames={"#k": key})
        written = sum(1 for item in items["Items"] if item[key]["S"] != WITNESS)  # the store's probe's item
        expected = (reps + 1 + (1 if name in LISTED else 0)) * BATCH
        if written != expected:
            raise RuntimeError(f"{name}: {written} idempotency records, expected {expected}")


#: packages listed per framework (at least 3 ms each)
LISTED_PACKAGES = 10
#: the runs whose imports are listed by package
LISTED = ("sqsjobs", SQSJOBS_REFERENCE, "powertools")


def _costliest_imports(name: str, evt: dict[str, Any], env: dict[str, str]) -> list[tuple[str, float]]:
    """Import time of one first invocation by top-level package (``-X importtime`` self times summed), costliest first.

    Self times add up without counting a module twice, so the list says where
    the import part of a cold start goes: botocore, Powertools, pynamodb, the
    standard library modules they pull in (``asyncio``, ``email``...), sqsjobs.
    """
    module, directory = COLD_TARGETS[RUNS[name][0]]
    completed = subprocess.run([sys.executable, "-X", "importtime", str(FIRST_CALL), module, str(directory)],
                               input=json.dumps(evt), env=env, cwd=directory, capture_output=True, text=True,
                               check=True)
    report = json.loads([line for line in completed.stdout.splitlines() if line.startswith('{"import_ms"')][-1])
    before = set(report["loaded_before"])
    by_package: dict[str, float] = {}
    for line in completed.stderr.splitlines():
        match = _IMPORT_LINE.match(line)
        if match and match.group(3).strip() not in before:
            package = match.group(3).strip().split(".")[0]
            by_package[package] = by_package.get(package, 0.0) + int(match.group(1)) / 1000
    ranked = sorted(by_package.items(), key=lambda item: -item[1])
    return [item for item in ranked[:LISTED_PACKAGES] if item[1] >= 3]


def _first_call(name: str, evt: dict[str, Any], env: dict[str, str], profile: Path | None, core: int
                ) -> dict[str, Any]:
    from bench.pinned import pin_to

    target, snapstart, _ = RUNS[name]
    module, directory = COLD_TARGETS[target]
    command = [sys.executable, str(FIRST_CALL), module, str(directory)] + (["--snapstart"] if snapstart else [])
    if profile is not None:
        command += ["--profile", str(profile)]
    completed = subprocess.run(command, input=json.dumps(evt), env=env, cwd=directory, capture_output=True,
                               text=True, check=False, preexec_fn=pin_to(core))
    lines = [line for line in completed.stdout.splitlines() if line.startswith('{"import_ms"')]
    if completed.returncode or not lines:
        raise RuntimeError(f"{name} first call failed ({completed.returncode}): {completed.stderr[-2000:]}")
    report = json.loads(lines[-1])
    if report["response"].get("batchItemFailures"):
        raise RuntimeError(f"{name} first call failed records: {report['response']} {completed.stderr[-2000:]}")
    wanted = env.get("PYTHONPATH")
    if wanted and not str(report["botocore"]).startswith(wanted):
        raise RuntimeError(f"{name} imported {report['botocore']}, not the botocore under {wanted}")
    return {**{key: float(value) for key, value in report.items() if key.endswith("_ms")}, "loaded": report["loaded"]}
