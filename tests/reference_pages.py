"""docs/reference/*.md, generated from the docstrings of the public API (``sqsjobs.__all__``, ``sqsjobs.ops.__all__``).

The hand-written pages say how to do a thing; these say what each public name takes and promises, in the
words of its own docstring, so the two cannot drift: tests/docs/test_reference.py fails when a page is not
what this module renders, or when a public name (:func:`public_names`) is on no page. Regenerate with

    make reference        (or .venv/bin/python tests/reference_pages.py)

A docstring's ``>>>`` examples are fenced as ``pycon`` (``make doctest`` runs them where they live; the
snippet runner, tests/doc_snippets.py, leaves that language alone), and a ``::`` block as ``text``.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "reference"

#: page -> (its title and one line on what it holds, the public names on it, in order)
PAGES: dict[str, tuple[str, list[str]]] = {
    "app.md": ("The app and its jobs: `JobApp`, `Job`, the messages they build, the settings.",
               ["JobApp", "Job", "JobMessage", "Settings", "BackoffPolicy"]),
    "workflows.md": ("Work made of many jobs: groups, chains, chunked runs, the outbox.",
                     ["Group", "GroupStatus", "DurableCallback", "TaskToken", "chain", "Chain", "ChainStatus",
                      "ChunkedJob", "RunStatus", "Transaction", "OutboxRelay"]),
    "results.md": ("What calls give back, and what a running job may ask.",
                   ["EnqueueReport", "ScheduledJob", "BatchResult", "Outcome", "JobStatus", "time_left",
                    "cancel_requested", "current_trace_id"]),
    "handlers.md": ("What a Lambda handler file uses besides its app: AWS clients for jobs, SnapStart, the redrive "
                    "function.", ["client", "prepare_snapstart", "ops.redrive_handler"]),
    "stores.md": ("The lease store protocol and the in-memory store.", ["LeaseStore", "InMemoryStore"]),
    "errors.md": ("The one exception tree (`lib/sqsjobs/_errors.py`).",
                  ["SqsJobsError", "ConfigurationError", "UnknownJobError", "InvalidArgumentsError",
                   "InvalidDelayError", "InvalidEventError", "EnqueueError", "ReservedAttributeError",
                   "ScheduleError", "StoreError", "PeriodBusyError", "TransactionError", "GroupError",
                   "ChainError", "QueueNotFoundError", "RedriveError", "MoveTaskError", "StatusError",
                   "ConsoleError", "CheckUnavailable", "LocalCloudError", "MessageTooLargeError", "JobError",
                   "RetryableError", "TimeLimitExceeded", "PermanentError", "MalformedMessageError",
                   "BatchItemsFailed"]),
}
#: the public subpackages besides ``sqsjobs`` itself: their ``__all__`` names are listed as ``ops.name``
PUBLIC_MODULES = ("ops",)
_ADDRESS = re.compile(r" at 0x[0-9a-f]+")
_QUOTED = re.compile(r"(: |-> |\[|, )'([^']*)'")


def markdown(doc: str) -> str:
    r"""A docstring as Markdown: ````x```` as ```x```, ``>>>`` examples fenced as pycon, ``::`` blocks as text.

    Example:
        >>> print(markdown("Say ``hi``::\n\n    a -> b\n\nDone."), end="")
        Say `hi`:
        <BLANKLINE>
        ```text
        a -> b
        ```
        <BLANKLINE>
        Done.
    """
    lines = inspect.cleandoc(doc).replace("``", "`").splitlines()
    out: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if line.strip().startswith(">>>"):
            block, index = _block(lines, index, until_blank=True)
            out += ["", "```pycon", *block, "```"]
            continue
        if line.rstrip().endswith("::"):
            out.append(line.rstrip()[:-1] if line.strip() != "::" else "")
            start = index + 1
            while start < len(lines) and not lines[start].strip():
                start += 1
            block, index = _block(lines, start, until_blank=False)
            out += ["", "```text", *block, "```"]
            continue
        out.append(line)
        index += 1
    return "\n".join(out).strip() + "\n"


def _block(lines: list[str], start: int, *, until_blank: bool) -> tuple[list[str], int]:
    """The lines of one code block from ``start``, dedented, and where the text goes on."""
    if start >= len(lines):
        return [], start
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = start
    while end < len(lines):
        line = lines[end]
        if not line.strip():
            if until_blank:
                break
            following = next((text for text in lines[end:] if text.strip()), "")
            if len(following) - len(following.lstrip()) < indent:
                break
        elif len(line) - len(line.lstrip()) < indent:
            break
        end += 1
    return [text[indent:] for text in lines[start:end]], end


def signature(obj: Any) -> str:
    """``(a, b=1)``, without object addresses, or ``""`` when Python cannot tell."""
    try:
        text = str(inspect.signature(obj))
    except (TypeError, ValueError):
        return ""
    text = _QUOTED.sub(r"\1\2", _ADDRESS.sub("", text))  # annotations are strings under `from __future__`
    return text.replace("(self, ", "(").replace("(self)", "()").replace("(cls, ", "(")


def members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties a class defines itself, in source order."""
    for name, value in vars(cls).items():
        if name.startswith("_"):
            continue
        if isinstance(value, property | staticmethod | classmethod) or inspect.isfunction(value):
            yield name, value


def section(name: str, obj: Any) -> list[str]:
    """One public name: its heading, signature and docstring, then its own methods'."""
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        bases = ", ".join(base.__name__ for base in obj.__bases__)
        return [f"## {name}({bases})", "", markdown(obj.__doc__ or "(no docstring)")]
    if inspect.isclass(obj):
        init = signature(obj)
        lines = [f"## {name}", "", f"`{name}{init}`" if init else "", "", markdown(obj.__doc__ or "")]
        for member, value in members(obj):
            target = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            doc = inspect.getdoc(target) or ""
            if not doc:
                continue
            call = "" if isinstance(value, property) else f"`{member}{signature(target)}`"
            lines += [f"### {name}.{member}", "", call, "", markdown(doc)]
        return lines
    return [f"## {name}", "", f"`{name}{signature(obj)}`", "", markdown(obj.__doc__ or "")]


def public_names() -> list[str]:
    """``sqsjobs.__all__``, then each public subpackage's names as ``module.name`` (``ops.redrive_handler``)."""
    import sqsjobs

    found = list(sqsjobs.__all__)
    for module in PUBLIC_MODULES:
        found += [f"{module}.{name}" for name in importlib.import_module(f"sqsjobs.{module}").__all__]
    return found


def public_object(name: str) -> Any:
    """The object a public name (``JobApp``, ``ops.redrive_handler``) stands for."""
    module, _, attribute = name.rpartition(".")
    return getattr(importlib.import_module(f"sqsjobs.{module}" if module else "sqsjobs"), attribute)


def render() -> dict[str, str]:
    """Every reference page's text, by file name (and the index, README.md)."""
    pages: dict[str, str] = {}
    index = ["# Reference", "",
             "Generated from the docstrings of `sqsjobs.__all__` by `tests/reference_pages.py`; "
             "do not edit by hand (tests/docs/test_reference.py checks they are up to date).", ""]
    for page, (title, names) in PAGES.items():
        lines = [f"# {page.removesuffix('.md').capitalize()}", "", title, "",
                 "<!-- generated by tests/reference_pages.py from the docstrings: do not edit -->", ""]
        for name in names:
            lines += section(f"sqsjobs.{name}" if "." in name else name, public_object(name))
        pages[page] = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).rstrip() + "\n"
        index.append(f"- [{page}]({page}): {title} " + ", ".join(f"`{name}`" for name in names))
    pages["README.md"] = "\n".join(index) + "\n"
    return pages


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    for name, text in render().items():
        (OUT / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(PAGES) + 1} pages to {OUT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "lib"))
    sys.exit(main())
