"""What a Lambda function runs of sqsjobs, installed for python3.12: the runtime only, trimmed and compiled.

One script for every bundle sqsjobs makes, so they are all built alike:

- this repository's functions and its release layer (``infra/bundle/Makefile`` runs it from ``lib/``);
- the layer of every project ``sqsjobs init`` writes: a verbatim copy, ``layer/bundle.py``, which the
  project's ``layer/Makefile`` runs when ``sam build`` builds ``SqsjobsLayer`` (docs/deploy.md says why a
  layer). The project needs only python3.12, its pip and make: nothing of this checkout.

It therefore imports nothing but the standard library. ``install`` does, in order:

1. ``pip wheel --no-deps`` of the requirements: a vendored wheel (``--find-links``), a version from an
   index, a VCS URL or a source tree, each made a wheel;
2. ``pip install --target`` of those wheels and their dependencies for Lambda's platform (python3.12,
   manylinux arm64 wheels only, so a native package without a Lambda wheel fails here, not in Lambda);
3. deletes what no function runs: the modules of the extras that the sqsjobs wheel carries
   (:data:`NOT_RUNTIME`), and pip's record of where each wheel came from (``direct_url.json``, a path of
   the building machine), and takes them out of each ``RECORD``;
4. with ``--services``, deletes the botocore service models no function loads: about 22 MB of botocore's
   25. The runtime's services (:data:`RUNTIME_SERVICES`) are always kept; the file adds the ones the
   jobs call (``client("s3")`` needs ``s3`` there). Beside the kept models it writes :data:`TRIMMED`,
   the services kept and the list to edit (``--services-label``, as the project names it), so that
   ``sqsjobs.client`` of another service says which file to edit instead of botocore's "Unknown
   service" (``sqsjobs check`` finds such a client before: :mod:`sqsjobs.validation.services`);
5. compiles bytecode for python3.12, ``unchecked-hash`` (valid whatever the zip does to timestamps) and
   named relative to the target: Lambda's ``/var/task`` and ``/opt`` are read-only, so without ``.pyc``
   files every cold start compiles every module it imports; and the same inputs give the same bytes, so
   ``sam deploy`` uploads a layer again only when its content changed.

Usage (python3.12)::

    python3.12 bundle.py install --target DIR [--services FILE [--services-label NAME]] [pip arguments ...]
    python3.12 bundle.py install --target build/python --services botocore-services.txt -r requirements.txt
    python3.12 bundle.py compile DIR [--top-level]

Example:
    >>> kept_services(None)
    ['dynamodb', 'lambda', 'scheduler', 'sqs', 'stepfunctions']
"""

from __future__ import annotations

import argparse
import compileall
import json
import py_compile
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

#: Lambda's platform for these functions: the templates' ``Architectures: [arm64]``, python3.12
PLATFORM = "manylinux2014_aarch64"
PYTHON_VERSION = "3.12"
#: in the sqsjobs wheel, run by no function: the CLI, the local cloud, the console, ``sqsjobs init``, the shared
#: validation, the test helpers (with their pytest plugin), the cfn-lint rules, and the console scripts pip writes
NOT_RUNTIME = ("sqsjobs/cli", "sqsjobs/local", "sqsjobs/console", "sqsjobs/scaffold", "sqsjobs/validation",
               "sqsjobs/testing", "sqsjobs_rules", "bin")
#: the botocore services sqsjobs' runtime calls (sqsjobs/_clients.py): the table, the queues, delayed jobs
#: lambda and stepfunctions: the worker answers the workflows awaiting jobs (workflows/_callback_sender.py)
RUNTIME_SERVICES = ("dynamodb", "lambda", "scheduler", "sqs", "stepfunctions")
#: written by :func:`trim` at the top of botocore/data: the services kept and the list that chose them
#: (sqsjobs/_clients.py reads it when botocore knows no model of a service; a test ties the two names)
TRIMMED = "sqsjobs-trimmed.json"
#: the files at the top of botocore/data that botocore reads whatever the service
SHARED_FILES = ("endpoints.json", "partitions.json", "sdk-default-configuration.json", "_retry.json")


def kept_services(listing: Path | None) -> list[str]:
    """The runtime's services and those in ``listing`` (one a line; ``#`` starts a comment), sorted."""
    names = set(RUNTIME_SERVICES)
    if listing is not None:
        names |= {line.split("#", 1)[0].strip() for line in listing.read_text().splitlines()} - {""}
    return sorted(names)


def trim(data: Path, services: list[str], listing: str = "botocore-services.txt") -> list[str]:
    """Delete every service directory under botocore's ``data`` not in ``services``; the names deleted.

    Writes :data:`TRIMMED` beside what is kept: ``services``, and ``listing``, the file a user edits to keep
    another (as the project names it). Refuses (SystemExit) when a kept service or a shared file is missing:
    a bundle without them would fail on its first client, not here.
    """
    missing = [name for name in services if not (data / name).is_dir()]
    missing += [name for name in SHARED_FILES if not (data / name).is_file()]
    if missing:
        raise SystemExit(f"bundle: {data} has no {', '.join(missing)} (a service name as client() takes it?)")
    deleted = []
    for entry in sorted(data.iterdir()):
        if entry.is_dir() and entry.name not in services:
            shutil.rmtree(entry)
            deleted.append(entry.name)
    (data / TRIMMED).write_text(json.dumps({"kept": sorted(services), "listing": listing}, sort_keys=True) + "\n",
                                encoding="utf-8")
    return deleted


def prune(target: Path) -> list[str]:
    """Delete :data:`NOT_RUNTIME` and every ``direct_url.json`` under ``target``, and list them in no ``RECORD``.

    Returns what was deleted.
    """
    deleted = []
    for name in NOT_RUNTIME:
        path = target / name
        if path.is_dir():
            shutil.rmtree(path)
            deleted.append(name)
        elif path.exists():
            path.unlink()
            deleted.append(name)
    for record in sorted(target.glob("*.dist-info/direct_url.json")):
        record.unlink()
        deleted.append(record.relative_to(target).as_posix())
    for record in sorted(target.glob("*.dist-info/RECORD")):
        # pip's list of the files it installed: without the deleted ones, it says what is there, and
        # (without direct_url.json's hash) is the same from build to build.
        lines = record.read_text(encoding="utf-8").splitlines(keepends=True)
        record.write_text("".join(line for line in lines if (target / line.split(",", 1)[0]).exists()),
                          encoding="utf-8")
    return deleted


def compile_tree(directory: Path, *, top_level: bool = False) -> bool:
    """Compile every module under ``directory`` (only its top level with ``top_level``); False on an error.

    Each ``.pyc`` names its source relative to ``directory`` (``sqsjobs/app.py``), not where it was built;
    Python replaces the name with the module's real path when it imports it.
    """
    return bool(compileall.compile_dir(str(directory), maxlevels=0 if top_level else None, quiet=1,
                                       stripdir=str(directory),
                                       invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH))


def install(target: Path, requirements: list[str], services: Path | None, services_label: str | None = None) -> None:
    """Steps 1 to 5 of the module docstring into ``target`` (emptied first)."""
    if sys.version_info[:2] != (3, 12):
        raise SystemExit(f"bundle: run me with python3.12 (Lambda's runtime), not {sys.version.split()[0]}: "
                         "the bytecode is for the runtime that loads it")
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check"]
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="sqsjobs-bundle-") as scratch:
        wheels = Path(scratch)
        _run([*pip, "wheel", "--quiet", "--no-deps", "--wheel-dir", str(wheels), *requirements])
        built = sorted(str(path) for path in wheels.glob("*.whl"))
        if not built:
            raise SystemExit(f"bundle: pip made no wheel of {' '.join(requirements)}")
        _run([*pip, "install", "--quiet", "--no-compile", "--only-binary=:all:", "--platform", PLATFORM,
              "--python-version", PYTHON_VERSION, "--implementation", "cp", "--target", str(target), *built])
    prune(target)
    kept = None
    if services is not None:
        kept = kept_services(services)
        trim(target / "botocore" / "data", kept, services_label or services.as_posix())
    if not compile_tree(target):
        raise SystemExit(f"bundle: compiling {target} failed")
    print(f"bundle: {target}: {', '.join(built_names(target))}"
          + (f"; botocore models kept: {', '.join(kept)}" if kept is not None else ""))


def built_names(target: Path) -> list[str]:
    """The distributions installed in ``target``, as ``name-version``."""
    return sorted(path.name.removesuffix(".dist-info") for path in target.glob("*.dist-info"))


def _run(command: list[str]) -> None:
    done = subprocess.run(command, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bundle: pip {command[4]} failed (exit {done.returncode}): its output is above")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="bundle.py", description=__doc__.split("\n", 1)[0])
    commands = parser.add_subparsers(dest="command", required=True)
    installing = commands.add_parser("install", help="install the runtime of REQUIREMENTS into --target")
    installing.add_argument("--target", required=True, type=Path)
    installing.add_argument("--services", type=Path, help="botocore services to keep besides the runtime's")
    installing.add_argument("--services-label", help="the --services file as the project names it "
                                                     "(what sqsjobs.client's error tells users to edit)")
    compiling = commands.add_parser("compile", help="compile a directory for python3.12")
    compiling.add_argument("directory", type=Path)
    compiling.add_argument("--top-level", action="store_true", help="only the modules at its top")
    # Whatever install does not know is pip's: a requirement, a path, -r FILE, --find-links DIR...
    options, requirements = parser.parse_known_args(argv)
    if options.command == "compile":
        if requirements:
            parser.error(f"unknown arguments: {' '.join(requirements)}")
        return 0 if compile_tree(options.directory, top_level=options.top_level) else 1
    if not requirements:
        parser.error("install: name what to install (a requirement, a wheel, -r requirements.txt)")
    install(options.target, requirements, options.services, options.services_label)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
