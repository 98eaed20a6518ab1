"""``sqsjobs init``: a new project with one example job, ready for ``check``, ``pytest``, ``local up``, ``sam build``.

The project's files are templates shipped in ``sqsjobs/scaffold/project``
(``*.tmpl``). A template line ``#@ if NAME`` / ``#@ if not NAME`` ...
``#@ end`` keeps its lines only for the chosen options (``fifo`` and each
``Extra``); ``{{name}}``, ``{{sqsjobs_requirement}}`` and friends are filled in.
Each extra brings its template pieces (following this repository's own
template.yaml), its code in ``handlers/app.py``, a unit test of its own
(``tests/test_<extra>.py``) and its part of the end-to-end test.

Every function runs sqsjobs from one layer, ``SqsjobsLayer``, that ``sam build``
builds with ``layer/Makefile`` and ``layer/bundle.py`` (a copy of
:mod:`sqsjobs.scaffold.bundle`, the script that builds this repository's own
bundle): the runtime only, botocore trimmed, bytecode compiled; the functions
hold only ``handlers/``. The project installs sqsjobs from where the running
sqsjobs came from, never by a path of this machine (:mod:`sqsjobs.scaffold.source`:
a wheel is copied into ``layer/wheels``); the name rules are
:mod:`sqsjobs.scaffold.names`.

Example:
    >>> files = render(ProjectOptions(name="billing", extras=frozenset({Extra.SCHEDULED})))
    >>> sorted(files)[:4]
    ['.gitignore', 'README.md', 'handlers/app.py', 'handlers/requirements.txt']
    >>> sorted(name for name in files if name.startswith("layer/"))
    ['layer/Makefile', 'layer/botocore-services.txt', 'layer/bundle.py', 'layer/requirements.txt']
    >>> "handlers/scheduler.py" in files, "handlers/outbox_relay.py" in files
    (True, False)
    >>> "daily-summary" in files["template.yaml"], "FifoQueue" in files["template.yaml"]
    (True, False)
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass, field, replace
from enum import StrEnum
from importlib import resources
from pathlib import Path

from sqsjobs import ConfigurationError, __version__
from sqsjobs.scaffold.names import check_name, suggest_name
from sqsjobs.scaffold.source import VENDORED, SqsjobsSource, running_source

_DIRECTIVE = re.compile(r"^\s*#@ (if|if not|end)\b\s*(\w*)\s*$")
_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class Extra(StrEnum):
    """What ``--with`` adds to the minimal app."""

    OUTBOX = "outbox"  #: a transactional outbox table and its relay function
    CHUNKED = "chunked"  #: a page-by-page job with a run record
    SCHEDULED = "scheduled"  #: a scheduled job, its scheduler function and an EventBridge schedule
    DELAYS = "delays"  #: a job delayed by two days: a schedule group and Scheduler's delivery role
    GROUPS = "groups"  #: a job group of 50 members with a callback that runs once
    LIMITS = "limits"  #: a job limited to 5 starts a second (a rate limiter)
    CRITICAL = "critical"  #: a critical queue with its own event source mapping and alarm, and a job on it
    DURABLE = "durable"  #: a Lambda durable function that awaits a job and a group (docs/durable.md)


#: the script that builds the layer, copied as it is (its own tests run it here)
BUNDLER = "layer/bundle.py"
#: files only some options need: the extra's handler and its unit test
OPTIONAL_FILES = {"handlers/outbox_relay.py": Extra.OUTBOX, "handlers/scheduler.py": Extra.SCHEDULED,
                  "handlers/flow.py": Extra.DURABLE, "durable-layer/requirements.txt": Extra.DURABLE,
                  **{f"tests/test_{extra.value}.py": extra for extra in Extra}}
#: what each extra adds to the app, for the project's README
NOTES = {
    Extra.OUTBOX: "`sign_up` enqueues through the outbox (`handlers/outbox_relay.py` relays it)",
    Extra.CHUNKED: "`reindex` is a chunked job",
    Extra.SCHEDULED: "`daily-summary` runs daily (`handlers/scheduler.py`)",
    Extra.DELAYS: "`send_digest_later` delays `digest` by two days (EventBridge Scheduler)",
    Extra.GROUPS: "`index_all` runs a group of `index-doc` jobs, then `index-done` once",
    Extra.LIMITS: "`resize` starts at most 5 times a second",
    Extra.CRITICAL: "`password-reset` runs from the critical queue",
    Extra.DURABLE: "`handlers/flow.py`, a durable function, awaits a `render-page` job, then a group of them",
}


@dataclass(frozen=True, kw_only=True)
class ProjectOptions:
    """What ``sqsjobs init`` was asked for."""

    name: str
    fifo: bool = False
    extras: frozenset[Extra] = field(default_factory=frozenset)
    #: where the project installs sqsjobs from (default: where the running sqsjobs came from)
    source: SqsjobsSource | None = None

    def __post_init__(self) -> None:
        check_name(self.name)

    @property
    def flags(self) -> dict[str, bool]:
        """The names ``#@ if`` tests."""
        return {"fifo": self.fifo, **{extra.value: extra in self.extras for extra in Extra}}


def parse_extras(text: str | None) -> frozenset[Extra]:
    """``"outbox,scheduled"`` as extras; an unknown one is a ``ConfigurationError`` naming the known.

    Example:
        >>> sorted(parse_extras("scheduled, outbox"))
        [<Extra.OUTBOX: 'outbox'>, <Extra.SCHEDULED: 'scheduled'>]
    """
    names = [part.strip() for part in (text or "").split(",") if part.strip()]
    known = {extra.value: extra for extra in Extra}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ConfigurationError(f"--with {', '.join(unknown)}: not an option; choose from {', '.join(known)}")
    return frozenset(known[name] for name in names)


def default_name(directory: Path) -> str:
    """A project name from a directory name: ``My_Jobs`` -> ``my-jobs`` (always one ``check_name`` accepts).

    Example:
        >>> default_name(Path("/tmp/My_Jobs v2")), default_name(Path("/tmp/jobs-"))
        ('my-jobs-v2', 'jobs')
    """
    return suggest_name(directory.resolve().name)


def source_of(options: ProjectOptions) -> SqsjobsSource:
    """Where the project installs sqsjobs from: the options' source, else where the running sqsjobs came from."""
    return options.source or running_source(__version__)


def render(options: ProjectOptions) -> dict[str, str]:
    """Every text file of the project, by path relative to its directory (a vendored wheel is ``write``'s)."""
    source = source_of(options)
    values = {
        "name": options.name,
        "version": __version__,
        "init_options": _init_options(options),
        "extras_summary": _extras_summary(options),
        "extra_tests": "".join(f", `tests/test_{extra.value}.py`" for extra in Extra if extra in options.extras),
        "sqsjobs_requirement": source.requirement(),
        "sqsjobs_dev_requirement": source.requirement(("check", "local", "console")),
        "sqsjobs_origin": source.what,
        "find_links": f"--find-links {VENDORED} " if source.wheel is not None else "",
    }
    flags = {**options.flags, "vendored": source.wheel is not None}
    files: dict[str, str] = {}
    root = resources.files("sqsjobs").joinpath("scaffold/project")
    for relative, text in _templates(root, ""):
        target = relative.removesuffix(".tmpl")
        target = ".gitignore" if target == "gitignore" else target
        needed = OPTIONAL_FILES.get(target)
        if needed is not None and needed not in options.extras:
            continue
        files[target] = fill(text, flags, values)
    files[BUNDLER] = resources.files("sqsjobs").joinpath("scaffold/bundle.py").read_text(encoding="utf-8")
    return files


def write(directory: Path, options: ProjectOptions) -> list[Path]:
    """Write the project into ``directory`` (made if needed; it must be empty); return the files written."""
    if directory.exists() and (not directory.is_dir() or any(directory.iterdir())):
        raise ConfigurationError(f"{directory} exists and is not an empty directory; pick a new one "
                                 "(nothing was written)")
    source = source_of(options)
    files = render(replace(options, source=source))  # the same source for the files and the wheel
    written = []
    for relative, text in sorted(files.items()):
        path = directory / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    if source.wheel is not None and source.vendored_path is not None:
        vendored = directory / source.vendored_path
        vendored.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source.wheel, vendored)
        written.append(vendored)
    return written


def fill(text: str, flags: dict[str, bool], values: dict[str, str]) -> str:
    """Apply ``#@ if`` blocks (nestable) and ``{{placeholders}}``.

    Example:
        >>> fill("a\\n#@ if fifo\\nb {{name}}\\n#@ end\\n#@ if not fifo\\nc\\n#@ end\\n", {"fifo": True}, {"name": "x"})
        'a\\nb x\\n'
    """
    kept: list[str] = []
    stack: list[bool] = []
    for number, line in enumerate(text.splitlines(keepends=True), start=1):
        directive = _DIRECTIVE.match(line)
        if directive is None:
            if all(stack):
                kept.append(_fill_line(line, values, number))
            continue
        kind, flag = directive.groups()
        if kind == "end":
            if not stack:
                raise ValueError(f"line {number}: '#@ end' without '#@ if'")
            stack.pop()
            continue
        if flag not in flags:
            raise ValueError(f"line {number}: unknown flag {flag!r}; known: {', '.join(flags)}")
        stack.append(flags[flag] if kind == "if" else not flags[flag])
    if stack:
        raise ValueError("an '#@ if' has no '#@ end'")
    return "".join(kept)


def _fill_line(line: str, values: dict[str, str], number: int) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise ValueError(f"line {number}: unknown placeholder {{{{{name}}}}}")
        return values[name]

    return _PLACEHOLDER.sub(value, line)


def _templates(folder: resources.abc.Traversable, prefix: str) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for entry in folder.iterdir():
        if entry.is_dir():
            found += _templates(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(".tmpl"):
            found.append((f"{prefix}{entry.name}", entry.read_text(encoding="utf-8")))
    return found


def _init_options(options: ProjectOptions) -> str:
    parts = [f" --name {options.name}"]
    if options.fifo:
        parts.append(" --fifo")
    if options.extras:
        parts.append(" --with " + ",".join(sorted(options.extras)))
    return "".join(parts)


def _extras_summary(options: ProjectOptions) -> str:
    shown = [NOTES[extra] for extra in Extra if extra in options.extras]
    fifo = ["a FIFO queue: a user's jobs run in order"] if options.fifo else []
    return "; " + "; ".join(fifo + shown) if fifo or shown else ""
