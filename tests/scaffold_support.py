"""The option combinations of `sqsjobs init`, a covering subset of them, and running a written project's pytest."""

from __future__ import annotations

import itertools
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sqsjobs.scaffold import Extra, ProjectOptions, write

ROOT = Path(__file__).resolve().parents[1]
#: the extras the matrix combines (``durable`` adds a function of its own with its own layer, and touches no other
#: extra's pieces: tests/scaffold/test_init_durable.py checks it on its own, and with every other extra)
MATRIX_EXTRAS = tuple(extra for extra in Extra if extra is not Extra.DURABLE)
#: the options, as bits of a combination's number: --fifo, then each --with extra
FACTORS = ("fifo", *(extra.value for extra in MATRIX_EXTRAS))


def options_of(number: int) -> ProjectOptions:
    """Combination ``number`` (bit i set: option FACTORS[i] chosen), named after its number."""
    chosen = {factor for i, factor in enumerate(FACTORS) if number >> i & 1}
    return ProjectOptions(name=f"jobs-{number:03d}", fifo="fifo" in chosen,
                          extras=frozenset(Extra(e) for e in chosen - {"fifo"}))


#: every combination: standard or FIFO, times every subset of the extras
COMBINATIONS = [options_of(number) for number in range(2 ** len(FACTORS))]


def bits(options: ProjectOptions) -> tuple[bool, ...]:
    """The combination as one flag per factor."""
    return (options.fifo, *(extra in options.extras for extra in MATRIX_EXTRAS))


def covering(strength: int) -> list[ProjectOptions]:
    """Combinations in which every ``strength`` options take every value together (a covering array).

    Greedy and deterministic: the combination covering the most uncovered tuples first (the lowest number on a
    tie). Template pieces that interact (FIFO with delays and the critical queue, the critical queue with every
    function that sends) meet in every way in these; the rest of the combinations get the cheap checks.
    """
    columns = list(itertools.combinations(range(len(FACTORS)), strength))
    uncovered = {(c, v) for c in columns for v in itertools.product((False, True), repeat=strength)}
    chosen: list[ProjectOptions] = []

    def gain(options: ProjectOptions) -> int:
        flags = bits(options)
        return sum((c, tuple(flags[i] for i in c)) in uncovered for c in columns)

    while uncovered:
        best = max(COMBINATIONS, key=lambda o: (gain(o), -COMBINATIONS.index(o)))
        flags = bits(best)
        uncovered -= {(c, tuple(flags[i] for i in c)) for c in columns}
        chosen.append(best)
    return chosen


def option_id(options: ProjectOptions) -> str:
    """A test id: ``fifo+outbox+chunked``, ``standard``."""
    parts = (["fifo"] if options.fifo else []) + [e.value for e in Extra if e in options.extras]
    return "+".join(parts) or "standard"


def generate(root: Path, options: ProjectOptions) -> Path:
    """Write the project for ``options`` under ``root``; its directory."""
    directory = root / options.name
    write(directory, options)
    return directory


@dataclass(frozen=True)
class Dist:
    """What ``python -m build`` of this checkout wrote, and how long it took."""

    directory: Path
    wheel: Path
    seconds: float


def build_dist(directory: Path) -> Dist:
    """``python -m build`` of this checkout into ``directory``, as `make dist` runs it (conftest.py's ``dist``)."""
    started = time.monotonic()
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(directory), str(ROOT)],
                           capture_output=True, text=True, timeout=600, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = directory.glob("sqsjobs-*-py3-none-any.whl")
    assert list(directory.glob("sqsjobs-*.tar.gz")), "python -m build wrote no sdist"
    return Dist(directory, wheel, time.monotonic() - started)


#: the cases of every project's tests/test_moto.py (marked ``moto``): its one test on mock_aws and on a moto server
MOTO_TESTS = 2


def unit_tests_of(project: Path) -> int:
    """How many unit tests the project holds (its tests/ but the e2e one and the moto one)."""
    return sum(len(re.findall(r"^def test_", path.read_text(), re.M))
               for path in (project / "tests").glob("test_*.py") if path.name not in ("test_e2e.py", "test_moto.py"))


def run_pytest(project: Path, *args: str, timeout: float = 600,
               python: str = sys.executable) -> subprocess.CompletedProcess[str]:
    """The project's own pytest, as its user runs it (its directory, its pyproject), with ``python``'s sqsjobs."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SQSJOBS_", "PYTEST_"))}
    env["SQSJOBS_LOCAL_STATE"] = str(project / ".local-cloud.json")
    return subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args], cwd=project,
                          env=env, capture_output=True, text=True, timeout=timeout, check=False)


# ---------------------------------------------------------------- no path of this machine, and lean builds
#: a ``file:`` URL, or a Windows drive path: never portable
_LOCAL_URL = re.compile(r"\bfile:/\S*|\b[A-Za-z]:\\\S+")
#: an absolute POSIX path: ``/`` then a name, not inside a word, a URL (``https://...``) or an ARN (``arn:...:/x``)
_ABSOLUTE = re.compile(r"(?<![\w.:/~$}-])/(?P<top>[A-Za-z0-9_.-]+)(?:/[^\s'\"`),;\]]*)?")
#: Lambda's own directories, which a project may name: /var/task (the function), /opt (layers)
LAMBDA_PATHS = ("/var/task", "/opt")


def machine_paths(text: str, roots: tuple[str, ...] = ()) -> list[str]:
    """The paths of this machine named in ``text``: ``file:`` URLs, drive paths, any of ``roots``, and absolute
    paths whose first directory exists here (a checkout's or a home directory's; not ``/aws/lambda/...``)."""
    found = _LOCAL_URL.findall(text)
    found += [root for root in roots if root and root in text]
    for match in _ABSOLUTE.finditer(text):
        path = match.group(0)
        lambdas = any(path == own or path.startswith(f"{own}/") for own in LAMBDA_PATHS)
        if Path("/", match.group("top")).is_dir() and not lambdas:
            found.append(path)
    return found


#: what a project's own tools write into it, not init: skipped by project_machine_paths
NOT_WRITTEN = frozenset({".aws-sam", ".venv", "__pycache__", ".pytest_cache"})


def project_machine_paths(project: Path, roots: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Every file of ``project`` (a vendored wheel's members too) that names a path of this machine, with them."""
    import zipfile

    found: dict[str, list[str]] = {}
    for path in sorted(p for p in project.rglob("*") if p.is_file()):
        relative = path.relative_to(project).as_posix()
        if set(path.relative_to(project).parts) & NOT_WRITTEN:
            continue
        if path.suffix == ".whl":  # sqsjobs' own code: its examples name paths, but none of these roots
            with zipfile.ZipFile(path) as wheel:
                for name in wheel.namelist():
                    text = wheel.read(name).decode("utf-8", "replace")
                    if named := [root for root in roots if root and root in text]:
                        found[f"{relative}!{name}"] = named
        elif named := machine_paths(path.read_bytes().decode("utf-8", "replace"), roots):
            found[relative] = named
    return found


def this_machine() -> tuple[str, ...]:
    """Paths that would betray where a project was made or built: this checkout, its venv, the python3.12 that
    builds the layer (the home directory itself is too short a string: "/root" is in minified JavaScript)."""
    from tool_support import python312_bin

    return (str(ROOT), sys.prefix, str(Path(python312_bin()).parent))


#: the most a function and its layer may take zipped (issue 30's done-when)
MAX_ZIPPED = 8 * 1024 * 1024
LAYER = "SqsjobsLayer"


def lean_build(build: Path, roots: tuple[str, ...], *,
               own_layers: tuple[str, ...] = ()) -> dict[str, tuple[int, int]]:
    """Check ``sam build``'s output of a project (``.aws-sam/build``); each artifact's (unzipped, zipped) bytes.

    Each function holds only its handlers (no tool, no package: those are the layer's); the layer holds the
    runtime only; a function with its layer is at most :data:`MAX_ZIPPED` zipped; no file names any of
    ``roots`` or the scratch directories sam and pip build in. ``own_layers`` are layers of the project's own
    (the durable function's SDK): measured and scanned for paths, not held to sqsjobs' budget.
    """
    from bench.bundle import bundle_sizes, not_runtime_entries

    sizes = {b.function: b for b in bundle_sizes(build)}
    assert LAYER in sizes, f"no {LAYER} in {sorted(sizes)}"
    layer = sizes.pop(LAYER)
    others = {name: sizes.pop(name) for name in own_layers}
    assert not_runtime_entries(build / LAYER / "python") == []
    assert {"sqsjobs", "botocore", "boto3", "aws_lambda_powertools", "pynamodb"} <= {
        p.name for p in (build / LAYER / "python").iterdir()}
    for function, size in sizes.items():
        files = {p.relative_to(build / function).as_posix() for p in (build / function).rglob("*") if p.is_file()}
        assert all(name.endswith((".py", "requirements.txt")) and "/" not in name for name in files), (function, files)
        assert size.zipped + layer.zipped <= MAX_ZIPPED, (function, size.zipped, layer.zipped)
    # sam's scratch copies (tempfile's /tmp/tmpXXXXXXXX), pip's build directories, bundle.py's own scratch
    scratch = re.compile(rb"/tmp/tmp[a-z0-9_]{8}/|/tmp/pip-|sqsjobs-bundle-")
    for path in (p for p in build.rglob("*") if p.is_file()):
        content = path.read_bytes()
        named = [root for root in roots if root.encode() in content] + scratch.findall(content)
        assert not named, f"{path} names {named}"
    return {name: (b.unzipped, b.zipped) for name, b in {**sizes, **others, LAYER: layer}.items()}
