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

import re
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
