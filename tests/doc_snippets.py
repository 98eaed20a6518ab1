"""The fenced snippets of README.md and docs/**/*.md, and the markers that say how (or why not) to run them.

Every ```python and every shell block (```sh, ```bash, ```shell, ```zsh, ```console) runs in
`make test` (tests/docs/test_doc_snippets.py), page by page, in the page's order. A page added later
is picked up by the glob; a block that should not run says why in a marker, an HTML comment on the
line just above its fence (invisible on GitHub):

    <!-- snippet: skip: needs a deployed stack in an AWS account -->
    <!-- snippet: background -->                  a shell block another terminal would run: it must start
                                                  `sqsjobs local up`; the page goes on once the cloud is up,
                                                  and `sqsjobs local down` ends it after the page
    <!-- snippet: stand-ins: db, mailer -->       names the reader's own code provides (recording mocks)
    <!-- snippet: env: SQSJOBS_MAX_ATTEMPTS=6 --> environment for this and the page's later Python blocks
    <!-- snippet: tables: orders -->              extra DynamoDB tables (key `pk`) the Python blocks use

Directives combine with ``;`` (a skip's reason is the rest of its marker). Python blocks share one namespace
per page and run under moto with a jobs queue, its DLQ, an idempotency table and an outbox table named in the
environment
(SQSJOBS_QUEUE_URL...), as the template gives the worker. Shell blocks share one bash session per page
(`cd`, `export` and `eval` carry over), in a scratch copy of the repository's template, handlers and
docs, with this checkout's `sqsjobs` first on PATH. A ```console block runs its `$ ` lines.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = frozenset({"python", "py"})
SHELL = frozenset({"sh", "bash", "shell", "zsh", "console"})
DIRECTIVES = frozenset({"skip", "background", "stand-ins", "env", "tables"})
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")
_MARKER = re.compile(r"^\s*<!--\s*snippet:\s*(?P<body>.*?)\s*-->\s*$")


class MarkerError(ValueError):
    """A marker that cannot be read (unknown directive, a skip without its reason)."""


@dataclass(frozen=True, kw_only=True)
class Snippet:
    """One fenced block: where it is, its language, its code and its marker's directives."""

    page: Path
    line: int
    language: str
    code: str
    directives: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        """``docs/jobs.md:180``."""
        return f"{self.page.relative_to(ROOT)}:{self.line}"

    @property
    def runnable(self) -> bool:
        """A Python or shell block without a skip marker."""
        return self.language in PYTHON | SHELL and "skip" not in self.directives

    def names(self, directive: str) -> list[str]:
        """A comma-separated directive's entries."""
        return [name.strip() for name in self.directives.get(directive, "").split(",") if name.strip()]

    def environment(self) -> dict[str, str]:
        """The ``env:`` directive's ``NAME=VALUE`` pairs."""
        pairs = (entry.partition("=") for entry in self.names("env"))
        return {name: value for name, _, value in pairs}

    def shell_commands(self) -> str:
        """The code bash runs: the block itself, or a console block's ``$ `` lines (with their continuations)."""
        if self.language != "console":
            return self.code
        commands: list[str] = []
        continuing = False
        for line in self.code.splitlines():
            if line.startswith("$ ") or continuing:
                command = line[2:] if line.startswith("$ ") and not continuing else line
                commands.append(command)
                continuing = command.rstrip().endswith("\\")
        return "\n".join(commands) + "\n"


def pages() -> list[Path]:
    """README.md and every Markdown page under docs/ (sorted): a new page is covered without a change here."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def parse_marker(body: str) -> dict[str, str]:
    """``skip: why; stand-ins: a, b`` as ``{"skip": "why", "stand-ins": "a, b"}``.

    Example:
        >>> parse_marker("background")
        {'background': ''}
        >>> parse_marker("stand-ins: db, mailer; env: A=1")
        {'stand-ins': 'db, mailer', 'env': 'A=1'}
    """
    directives: dict[str, str] = {}
    if body.startswith("skip"):  # the reason is the rest of the marker, semicolons and all
        reason = body.removeprefix("skip").lstrip().removeprefix(":").strip()
        if not reason:
            raise MarkerError("a skip marker must say why: <!-- snippet: skip: REASON -->")
        return {"skip": reason}
    for part in body.split(";"):
        name, _, value = part.strip().partition(":")
        name, value = name.strip(), value.strip()
        if name not in DIRECTIVES:
            raise MarkerError(f"unknown snippet directive {name!r} (known: {', '.join(sorted(DIRECTIVES))})")
        if name == "skip" and not value:
            raise MarkerError("a skip marker must say why: <!-- snippet: skip: REASON -->")
        directives[name] = value
    return directives


def snippets(page: Path) -> list[Snippet]:
    """Every fenced block of ``page``, with the directives of the marker just above it."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Snippet] = []
    index = 0
    while index < len(lines):
        opening = _FENCE.match(lines[index])
        if opening is None:
            index += 1
            continue
        fence, indent = opening.group("fence"), len(opening.group("indent"))
        language = (opening.group("info").strip().split() or [""])[0].lower()
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            body.append(lines[end][indent:] if lines[end][:indent].strip() == "" else lines[end])
            end += 1
        above = _marker_above(lines, index)
        try:
            directives = parse_marker(above) if above is not None else {}
        except MarkerError as error:
            raise MarkerError(f"{page.relative_to(ROOT)}:{index + 1}: {error}") from None
        found.append(Snippet(page=page, line=index + 1, language=language, code="\n".join(body) + "\n",
                             directives=directives))
        index = end + 1
    return found


def _marker_above(lines: list[str], fence_index: int) -> str | None:
    previous = fence_index - 1
    while previous >= 0 and not lines[previous].strip():
        previous -= 1
    if previous < 0:
        return None
    match = _MARKER.match(lines[previous])
    return match.group("body") if match else None


def shell_environment(tmp_path: Path) -> dict[str, str]:
    """A clean environment: this checkout's venv first on PATH, fake credentials, a private local-cloud state."""
    keep = {k: v for k, v in os.environ.items()
            if not k.startswith(("SQSJOBS_", "AWS_", "PYTEST_", "VIRTUAL_ENV", "POWERTOOLS_"))}
    return {**keep, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
            "SQSJOBS_LOCAL_STATE": str(tmp_path / "local-cloud.json"), "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1", "AWS_REGION": "us-east-1",
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": str(tmp_path / "no-aws-config"),
            "AWS_SHARED_CREDENTIALS_FILE": str(tmp_path / "no-aws-credentials")}


def page_script(blocks: list[Snippet], logs: Path) -> str:
    """One bash script for a page's shell blocks: each announced (with the time), background ones waited for, the
    cloud stopped."""
    lines = [
        "set -eo pipefail",
        "__background=()",
        "__stop() { if [ ${#__background[@]} -gt 0 ]; then sqsjobs local down --timeout 60 >/dev/null 2>&1 "
        "|| kill ${__background[@]} 2>/dev/null || true; wait ${__background[@]} 2>/dev/null || true; fi; }",
        "trap __stop EXIT",
        "__wait_for_cloud() {  # $1: the background block's log",
        "  for _ in $(seq 1 600); do",
        "    if sqsjobs local env >/dev/null 2>&1; then return 0; fi",
        "    if ! kill -0 \"${__background[-1]}\" 2>/dev/null; then echo 'the background block ended:'; cat \"$1\";"
        " return 1; fi",
        "    sleep 0.3",
        "  done",
        "  echo 'no local cloud after 180 s:'; cat \"$1\"; return 1",
        "}",
    ]
    for number, block in enumerate(blocks):
        lines.append(f"echo \"### snippet {block.where} at $(date +%s.%N)\"")
        code = block.shell_commands()
        if "background" in block.directives:
            log = logs / f"background-{number}.log"
            lines += [f"( {code.strip()}\n) > '{log}' 2>&1 &", "__background+=($!)", f"__wait_for_cloud '{log}'"]
        else:
            lines.append(code)
    lines.append("echo \"### snippet (page done) at $(date +%s.%N)\"")
    return "\n".join(lines) + "\n"
