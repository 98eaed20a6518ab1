"""The Lambda bundle: each function's unzipped size, and what its precompiled bytecode saves a cold start.

Reads ``sam build``'s output (``.aws-sam/build``, which ``make bench`` builds
first). Lambda's /var/task is read-only, so a function whose bundle has no
``.pyc`` files compiles every module it imports on every cold start;
infra/bundle/Makefile ships bytecode compiled for python3.12, and
``bytecode_saving`` measures what that buys with the runtime's interpreter.
``scaffold_bundle_sizes`` builds what a user deploys: a project ``sqsjobs init``
writes (issue 30's options), carrying a wheel of this checkout, through ``sam build``.

``python -m bench.bundle`` (``make bench-bundle``) measures only these and rewrites
their rows and section of BENCHMARKS.md in place; ``make bench`` writes them with
everything else.
"""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from bench.support import Stat, python312, sam
from sqsjobs.scaffold.bundle import NOT_RUNTIME

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / ".aws-sam" / "build"
#: the scaffolded project measured: the options of issue 30's user
SCAFFOLD_OPTIONS = ("delays", "groups", "limits")
#: the largest top-level entries listed per function
TOP = 6
#: packages of the [cli], [check], [local] and [console] extras (and what they pull in), by import name
NOT_RUNTIME_PACKAGES = ("typer", "click", "rich", "pygments", "shellingham", "markdown_it", "moto", "flask",
                        "werkzeug", "samtranslator", "cfnlint", "sqsjobs_rules", "starlette", "uvicorn", "jinja2",
                        "anyio", "h11")
#: the same, as distributions (``<name>-<version>.dist-info``, names normalized with underscores)
NOT_RUNTIME_DISTRIBUTIONS = ("typer", "click", "rich", "pygments", "shellingham", "markdown_it_py", "moto",
                             "flask", "werkzeug", "aws_sam_translator", "cfn_lint", "starlette", "uvicorn", "jinja2",
                             "anyio", "h11")
#: the modules of the extras that the sqsjobs wheel itself carries (what lib/sqsjobs/scaffold/bundle.py deletes)
NOT_RUNTIME_SUBPACKAGES = tuple(path for path in NOT_RUNTIME if path.startswith("sqsjobs/"))

def not_runtime_entries(bundle: Path) -> list[str]:
    """What in ``bundle`` belongs to an extra, not to the Lambda runtime (empty for a lean bundle).

    Example:
        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as scratch:
        ...     for name in ("sqsjobs/local", "rich-13.9.0.dist-info", "botocore"):
        ...         (Path(scratch) / name).mkdir(parents=True)
        ...     not_runtime_entries(Path(scratch))
        ['rich-13.9.0.dist-info', 'sqsjobs/local']
    """
    top = {path.name for path in bundle.iterdir()}
    found = [name for name in top if name in NOT_RUNTIME_PACKAGES]
    found += [name for name in top if name.endswith(".dist-info")
              and re.sub(r"-[^-]+\.dist-info$", "", name).lower().replace("-", "_") in NOT_RUNTIME_DISTRIBUTIONS]
    found += [sub for sub in NOT_RUNTIME_SUBPACKAGES if (bundle / sub).exists()]
    if "bin" in top:  # console scripts pip writes for the extras' commands
        found.append("bin")
    return sorted(found)


@dataclass(frozen=True)
class BundleSize:
    """One function's bundle: bytes as Lambda counts them (unzipped, 250 MB limit) and as uploaded."""

    function: str
    unzipped: int
    zipped: int
    files: int
    #: the largest top-level packages, (name, unzipped bytes)
    largest: tuple[tuple[str, int], ...]
    #: what belongs to an extra (must be empty)
    not_runtime: tuple[str, ...]


def bundle_sizes(build: Path = BUILD) -> list[BundleSize]:
    """Every function (and layer) directory under ``build``; a layer's packages are under its ``python/``."""
    sizes = []
    for function in sorted(p for p in build.iterdir() if p.is_dir()):
        site = function / "python" if (function / "python").is_dir() else function
        by_top: Counter[str] = Counter()
        files = 0
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as packed:
            for path in sorted(function.rglob("*")):
                if path.is_file():
                    by_top[path.relative_to(site).parts[0]] += path.stat().st_size
                    files += 1
                    packed.write(path, path.relative_to(function).as_posix())
        sizes.append(BundleSize(function=function.name, unzipped=sum(by_top.values()), zipped=len(archive.getvalue()),
                                files=files, largest=tuple(by_top.most_common(TOP)),
                                not_runtime=tuple(not_runtime_entries(site))))
    return sizes


# Imports the handler, then builds what its first batch builds before any AWS call (clients, store,
# processor, the reference app's SES client): the part of a cold start that is Python's own work.
_SET_UP = """
import sys, time
sys.path.insert(0, sys.argv[1])
started = time.perf_counter()
import worker
worker.app.runtime.consumer
worker.ses_client()
print((time.perf_counter() - started) * 1000)
"""


def bytecode_saving(reps: int, build: Path = BUILD) -> dict[str, Stat]:
    """ms to import the worker and build its first batch's set-up from its bundle, with and without ``.pyc``.

    python3.12 (Lambda's runtime) with ``-B`` (writes no bytecode, as on a
    read-only /var/task), ``-I -S`` (the bundle and the standard library only),
    fresh processes, alternating; no AWS call is made.
    """
    interpreter = python312()
    env = {"PATH": os.environ.get("PATH", ""), "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bench",
           "AWS_SECRET_ACCESS_KEY": "bench", "AWS_ENDPOINT_URL": "http://127.0.0.1:9",
           "AWS_EC2_METADATA_DISABLED": "true", "SQSJOBS_QUEUE_URL": "https://sqs.us-east-1.amazonaws.com/1/jobs",
           "SQSJOBS_TABLE": "idempotency"}
    values: dict[str, list[float]] = {"with .pyc": [], "source only": []}
    with tempfile.TemporaryDirectory() as scratch:
        source_only = Path(scratch) / "WorkerFunction"
        shutil.copytree(build / "WorkerFunction", source_only, ignore=shutil.ignore_patterns("__pycache__"))
        bundles = {"with .pyc": build / "WorkerFunction", "source only": source_only}
        for rep in range(reps + 1):
            for name, bundle in bundles.items():
                done = subprocess.run([interpreter, "-B", "-I", "-S", "-c", _SET_UP, str(bundle)], env=env,
                                      capture_output=True, text=True, check=True, timeout=300)
                if rep:  # the first round warms the page cache
                    values[name].append(float(done.stdout.strip().splitlines()[-1]))
    return {name: Stat(tuple(v)) for name, v in values.items()}


def scaffold_bundle_sizes() -> list[BundleSize]:
    """``sqsjobs init shop --with delays,groups,limits`` carrying a wheel of this checkout, built by ``sam build``
    (the SAM CLI of .venv-sam, python3.12): each function and the layer, as :func:`bundle_sizes` measures them."""
    from sqsjobs.scaffold import Extra, ProjectOptions, write
    from sqsjobs.scaffold.source import parse_spec

    with tempfile.TemporaryDirectory(prefix="bench-scaffold-") as scratch:
        work = Path(scratch)
        subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", str(work / "dist"),
                        str(ROOT)], check=True, capture_output=True, timeout=600)
        shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' scratch in the checkout
        (wheel,) = (work / "dist").glob("sqsjobs-*.whl")
        project = work / "shop"
        write(project, ProjectOptions(name="shop", extras=frozenset(Extra(e) for e in SCAFFOLD_OPTIONS),
                                      source=parse_spec(str(wheel))))
        built = sam("build", "--template", "template.yaml", cwd=project)
        if built.returncode != 0:
            raise RuntimeError(f"sam build of the scaffolded project failed:\n{built.stdout[-3000:]}"
                               f"{built.stderr[-3000:]}")
        return bundle_sizes(project / ".aws-sam" / "build")


def splice(report: str, rows: list[str], section: list[str]) -> str:
    r"""``report`` (BENCHMARKS.md) with its bundle rows and its "## Lambda bundle" section replaced.

    Example:
        >>> old = "| a | 1 |\n| Lambda bundle `W`: x | 2 |\n| b | 3 |\n\n## Lambda bundle\n\nold\n\n## Cost\n"
        >>> print(splice(old, ["| Lambda bundle `W`: y | 4 |"], ["## Lambda bundle", "", "new", ""]))
        | a | 1 |
        | Lambda bundle `W`: y | 4 |
        | b | 3 |
        <BLANKLINE>
        ## Lambda bundle
        <BLANKLINE>
        new
        <BLANKLINE>
        ## Cost
        <BLANKLINE>
    """
    lines = report.splitlines()
    mine = [i for i, line in enumerate(lines) if line.startswith(_ROW_STARTS)]
    if not mine or "## Lambda bundle" not in lines:
        raise ValueError("BENCHMARKS.md has no bundle rows or no '## Lambda bundle' section: run make bench")
    lines[mine[0]:mine[-1] + 1] = rows
    start = lines.index("## Lambda bundle")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    lines[start:end] = section
    return "\n".join(lines) + "\n"


#: the summary rows bench.sections.bundle_rows writes (each starts so)
_ROW_STARTS = ("| Lambda bundle `", "| worker bundle with python3.12", "| `sqsjobs init")


def main() -> int:
    """Measure the bundles' sizes (this repository's .aws-sam/build, a scaffolded project) and rewrite
    BENCHMARKS.md's. The bytecode figure is a timing, taken by a whole `make bench` on a quiet machine: its row
    and paragraph stay as that run wrote them."""
    from bench.sections import bundle_rows, bundle_section

    out = ROOT / "BENCHMARKS.md"
    report = out.read_text()
    bundles, scaffold = bundle_sizes(), scaffold_bundle_sizes()
    kept_row = [line for line in report.splitlines() if line.startswith(_ROW_STARTS[1])]
    section = bundle_section(bundles, {}, scaffold)
    paragraph = report.split("\nBytecode: ", 1)[1].split("\n\n", 1)[0] if "\nBytecode: " in report else ""
    if paragraph:
        at = section.index("### A project made by `sqsjobs init`")
        section[at:at] = [f"Bytecode: {paragraph}", ""]
    out.write_text(splice(report, bundle_rows(bundles, {}, scaffold) + kept_row, section))
    print(f"wrote the bundle rows and section of {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
