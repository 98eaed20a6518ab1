"""docs/getting-started.md, run as a new user would: an empty directory, the wheel this checkout builds, the page's
shell blocks in order (issue 25, finding 5 and its "Done when").

The wheel (and the sdist it is built from) comes from ``python -m build``, as ``make dist`` makes them. Then one
bash session runs the page: step 1's install block (marked skip for tests/docs/test_doc_snippets.py, which runs
the other blocks in this checkout's venv; its marker names this file), then every runnable shell block, read from
the page so that this test follows it. Nothing of this checkout is on PATH or importable in that session: the
sqsjobs that runs is the wheel's, in the page's fresh ``.venv``. pip reaches the package index for the
dependencies; everything else talks to the local cloud on 127.0.0.1.

The wall time is measured and printed, step by step, never asserted (the machine is shared): the figures in the
page's "How long it takes" come from this test's output.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from doc_snippets import ROOT, SHELL, Snippet, page_script, shell_environment, snippets

PAGE = ROOT / "docs" / "getting-started.md"
#: the whole page, on a loaded machine: pip, three pytest sessions of the project's and two local clouds
PAGE_TIMEOUT = 1500
BUILD_TIMEOUT = 600
_STAMP = re.compile(r"^### snippet (?P<where>\(page done\)|\S+) at (?P<at>[0-9.]+)$", re.M)
_STEP = re.compile(r"^## (?P<number>\d+)\. ")
_PYTEST_SUMMARY = re.compile(r"^=+ (?P<counts>[^=]*\bin [0-9.]+s(?: \([^)]*\))?) =+$", re.M)


@dataclass(frozen=True)
class Step:
    """A numbered section of the page (``## 3. Check and test it``) and the shell blocks under it."""

    number: int
    title: str
    blocks: tuple[Snippet, ...]


def page_steps() -> list[Step]:
    """The page's numbered sections with the shell blocks this test runs: step 1's install, then the runnable ones."""
    lines = PAGE.read_text(encoding="utf-8").splitlines()
    headings = [(index + 1, _STEP.match(line), line) for index, line in enumerate(lines)]
    numbered = [(line, int(match.group("number")), text.removeprefix("## ")) for line, match, text in headings
                if match is not None]
    chosen = [s for s in snippets(PAGE) if s.language in SHELL and (s.runnable or _is_install(s))]
    steps = []
    for position, (line, number, title) in enumerate(numbered):
        end = numbered[position + 1][0] if position + 1 < len(numbered) else len(lines) + 1
        blocks = tuple(s for s in chosen if line < s.line < end)
        if blocks:
            steps.append(Step(number, title, blocks))
    return steps


def _is_install(block: Snippet) -> bool:
    return "tests/dist/test_from_the_wheel.py" in block.directives.get("skip", "")


def session_environment(tmp_path: Path) -> dict[str, str]:
    """tests/doc_snippets.py's clean environment, without this checkout's venv: only the page's own ``.venv``."""
    env = shell_environment(tmp_path)
    ours = {str(Path(sys.executable).parent), str(Path(sys.prefix) / "bin")}
    env["PATH"] = os.pathsep.join(p for p in env["PATH"].split(os.pathsep) if p and p not in ours)
    for name in ("PYTHONPATH", "PYTHONHOME", "PIP_REQUIRE_VIRTUALENV"):
        env.pop(name, None)
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PIP_NO_INPUT"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_session(script: Path, cwd: Path, env: dict[str, str], timeout: float) -> tuple[int, str]:
    """bash on ``script`` in its own process group, so a timeout also ends the local cloud it started."""
    with subprocess.Popen(["bash", str(script)], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          text=True, start_new_session=True) as process:
        try:
            output, _ = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGTERM)
            output, _ = process.communicate(timeout=60)
            return -1, output + f"\n(timed out after {timeout} s)"
    return process.returncode, output


def _duration(seconds: float) -> str:
    minutes, rest = divmod(round(seconds), 60)
    return f"{minutes} min {rest} s" if minutes else f"{seconds:.1f} s"


def test_page_steps_are_read_from_the_page() -> None:
    """The blocks this test runs: the install first, the deploy step (it needs an AWS account) left out."""
    steps = page_steps()
    assert [s.number for s in steps] == [1, 2, 3, 4, 5]
    (install,) = steps[0].blocks
    assert _is_install(install) and "pip install './dist/sqsjobs-" in install.code
    assert any("sqsjobs init billing-jobs --with delays,groups" in b.code for b in steps[1].blocks)
    assert any("background" in b.directives for b in steps[3].blocks)
    assert all(b.runnable for s in steps[1:] for b in s.blocks)


@pytest.mark.slow
@pytest.mark.moto
@pytest.mark.local_cloud
@pytest.mark.timeout(BUILD_TIMEOUT + PAGE_TIMEOUT + 120)
def test_the_getting_started_page_runs_from_the_built_wheel(tmp_path: Path) -> None:
    work = tmp_path / "empty"
    (work / "dist").mkdir(parents=True)
    started = time.monotonic()
    built = subprocess.run([sys.executable, "-m", "build", "--outdir", str(work / "dist"), str(ROOT)],
                           capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    build_seconds = time.monotonic() - started
    (wheel,) = (work / "dist").glob("sqsjobs-*-py3-none-any.whl")
    assert list((work / "dist").glob("sqsjobs-*.tar.gz")), "python -m build wrote no sdist"

    steps = page_steps()
    (install,) = steps[0].blocks
    assert f"'./dist/{wheel.name}[" in install.code, f"the page installs another wheel than {wheel.name}"
    blocks = [block for step in steps for block in step.blocks]
    logs = tmp_path / "logs"
    logs.mkdir()
    script = tmp_path / "page.sh"
    # The same session the page's other blocks get (tests/doc_snippets.py), then proof of which sqsjobs ran.
    script.write_text(page_script(blocks, logs) + 'echo "### sqsjobs from $(python -c '
                      '\'import sqsjobs; print(sqsjobs.__file__)\')"\n')

    started = time.monotonic()
    returncode, output = run_session(script, work, session_environment(tmp_path), PAGE_TIMEOUT)
    page_seconds = time.monotonic() - started
    if returncode != 0:
        failed = output.rsplit("### snippet ", 1)[-1]
        pytest.fail(f"exit {returncode} in snippet {failed[-8000:]}")

    stamps = {m.group("where"): float(m.group("at")) for m in _STAMP.finditer(output)}
    starts = [stamps[step.blocks[0].where] for step in steps] + [stamps["(page done)"]]
    report = [f"wheel and sdist (python -m build): {_duration(build_seconds)}"]
    for step, begin, end in zip(steps, starts, starts[1:], strict=False):
        report.append(f"{step.title}: {_duration(end - begin)}")
    to_e2e = starts[3] - starts[0]
    report += [f"from an empty directory to a passing e2e test (steps 1-3): {_duration(to_e2e)}",
               f"the whole page (steps 1-5): {_duration(starts[-1] - starts[0])} (session {_duration(page_seconds)})"]
    print("\n".join(["", "docs/getting-started.md from the wheel, measured:", *report]))

    sqsjobs_file = output.rsplit("### sqsjobs from ", 1)[-1].strip()
    assert Path(sqsjobs_file).is_relative_to(work / ".venv"), f"the session imported sqsjobs from {sqsjobs_file}"
    assert not Path(sqsjobs_file).is_relative_to(ROOT)
    step_3 = output.split(f"### snippet {steps[2].blocks[0].where} ", 1)[1].split("### snippet ", 1)[0]
    (summary,) = _PYTEST_SUMMARY.findall(step_3)
    print(f"the project's pytest (step 3): {summary}")
    assert re.search(r"\b\d+ passed\b", summary) and not re.search(r"failed|skipped|error|deselected", summary), (
        f"the project's pytest: {summary}")
    assert re.search(r"^tests/test_e2e\.py \.+", step_3, re.M), f"no e2e test passed in step 3:\n{step_3[-3000:]}"
