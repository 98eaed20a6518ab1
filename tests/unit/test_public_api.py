"""The public API is exactly ``sqsjobs.__all__`` (and ``sqsjobs.ops.__all__``), every error of the tree is in it,
and what users copy (the handlers, the scaffold's templates, the docs) imports nothing private."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest
from reference_pages import public_names, public_object

import sqsjobs
from sqsjobs import _errors as errors

ROOT = Path(__file__).resolve().parents[2]
#: ``from sqsjobs.x._y import z``, ``import sqsjobs._y``, ``from sqsjobs import _y`` (also after ``>>>``/``...``)
_IMPORT = re.compile(r"^[ \t]*(?:(?:>>>|\.\.\.)[ \t]+)?(?:from[ \t]+(?P<source>sqsjobs(?:\.\w+)*)[ \t]+import[ \t]+"
                     r"(?P<names>\(?[\w ,\t]+)|import[ \t]+(?P<module>sqsjobs(?:\.\w+)*))", re.MULTILINE)
#: what users copy: the reference handlers, the templates ``sqsjobs init`` writes, every doc and doc example
#: (docs/reference/*.md among them: the docstrings of public names, rendered). No file is exempt: a page that needs
#: a private name needs it made public (sqsjobs.__all__, sqsjobs.ops) or its example rewritten.
COPIED = ("handlers/*.py", "lib/sqsjobs/scaffold/project/**/*.tmpl", "README.md", "docs/**/*.md", "docs/**/*.py")


def private_imports(text: str) -> list[str]:
    """The private modules (or private names of a module) ``text`` imports, in order.

    Example:
        >>> private_imports("from sqsjobs import JobApp\\nimport sqsjobs.worker._snapstart\\n"
        ...                 "    >>> from sqsjobs import _clients, client\\nfrom sqsjobs.testing import use\\n")
        ['sqsjobs.worker._snapstart', 'sqsjobs._clients']
    """
    found: list[str] = []
    for match in _IMPORT.finditer(text):
        module = match.group("source") or match.group("module")
        if any(part.startswith("_") for part in module.split(".")):
            found.append(module)
        elif match.group("names"):
            names = match.group("names").strip("( \t").split(",")
            found += [f"{module}.{name.split()[0]}" for name in names if name.strip().startswith("_")]
    return found


#: an attribute path through an app's runtime (``app.runtime.unschedule(...)``): internals reached without an import
_THROUGH_RUNTIME = re.compile(r"\b\w+\.runtime\.\w+")


def through_the_runtime(text: str) -> list[str]:
    """What ``text`` reaches through a ``runtime`` attribute (``JobApp.runtime`` is the app's internals' holder).

    Example:
        >>> through_the_runtime("app.runtime.unschedule(key)\\nsqsjobs._runtime.Runtime\\napp.unschedule(key)\\n")
        ['app.runtime.unschedule']
    """
    return _THROUGH_RUNTIME.findall(text)


def copied_files() -> list[Path]:
    return sorted({path for pattern in COPIED for path in ROOT.glob(pattern)})


def test_all_names_exist_and_are_documented_with_an_example() -> None:
    for name in public_names():
        obj = public_object(name)
        doc = inspect.getdoc(obj) or ""
        assert doc, f"{name} has no docstring"
        if not issubclass(obj, BaseException) if isinstance(obj, type) else True:
            assert "Example" in doc or ">>>" in doc, f"{name}'s docstring has no example"


def tree() -> dict[str, str]:
    """Every error of the one tree, by name: where it is defined. The tree is what lib/sqsjobs/_errors.py defines,
    read from its source, and the errors it names in ``HOMES`` (the tools' and the operator's, defined there)."""
    source = Path(errors.__file__).read_text(encoding="utf-8")
    return {**{name: errors.__name__ for name in re.findall(r"^class (\w+)\(", source, re.MULTILINE)},
            **errors.HOMES}


def test_every_error_descends_from_the_root_and_is_drawn_in_the_tree() -> None:
    drawing = (errors.__doc__ or "").splitlines()
    classes = {name: getattr(importlib.import_module(home), name) for name, home in tree().items()}
    assert len(classes) >= 10
    for name, cls in classes.items():
        assert issubclass(cls, errors.SqsJobsError), cls
        lines = [line for line in drawing if re.search(rf"^ *(?:[│├└─ ]+ )?{name}\b", line)]
        assert len(lines) == 1, f"{name} missing from the tree drawing"
        home = tree()[name]
        assert home == errors.__name__ or home in lines[0], f"{name}'s line should name its module, {home}"
        assert (cls.__doc__ or "").startswith("Raised "), f"{name} docstring should say when it is raised"


def test_no_error_outside_the_tree_descends_from_the_root_directly() -> None:
    # A tool's new error under SqsJobsError joins HOMES (and the drawing); its own subclasses stay with it.
    direct = {(node.name, path.relative_to(ROOT).as_posix()) for path in (ROOT / "lib" / "sqsjobs").rglob("*.py")
              for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)
              and any(isinstance(base, ast.Name) and base.id == "SqsJobsError" for base in node.bases)}
    assert {name for name, _ in direct} <= set(tree()), sorted(direct)
    assert ("LocalCloudError", "lib/sqsjobs/local/errors.py") in direct


def test_every_error_of_the_tree_is_public_and_raised_under_its_public_name() -> None:
    defined = tree()
    assert {"SqsJobsError", "MessageTooLargeError", "MoveTaskError", "ConsoleError", "CheckUnavailable"} <= set(defined)
    assert sorted(set(defined) - set(sqsjobs.__all__)) == []
    for name, home in defined.items():
        assert getattr(sqsjobs, name) is getattr(importlib.import_module(home), name)
        assert getattr(sqsjobs, name).__module__ == "sqsjobs"  # a traceback names it as users import it


def test_the_scanner_finds_every_form_of_a_private_import() -> None:
    text = ("from sqsjobs._clients import client\n"
            "    >>> from sqsjobs.store._lease_ops import Acquire\n"
            "... import sqsjobs.worker._snapstart as snap\n"
            "from sqsjobs import (OutboxRelay, _runtime)\n"
            "from sqsjobs import JobApp, client\n"
            "from sqsjobs.ops import redrive_handler\n"
            "import sqsjobs\n"
            "the module sqsjobs._clients makes them\n")
    assert private_imports(text) == ["sqsjobs._clients", "sqsjobs.store._lease_ops", "sqsjobs.worker._snapstart",
                                     "sqsjobs._runtime"]


def test_no_handler_scaffold_template_or_doc_imports_a_private_module() -> None:
    files = copied_files()
    names = {path.relative_to(ROOT).as_posix() for path in files}
    assert {"handlers/worker.py", "handlers/redrive.py", "lib/sqsjobs/scaffold/project/handlers/worker.py.tmpl",
            "docs/deploy.md", "docs/reference/handlers.md", "docs/reference/stores.md",
            "docs/examples/verify_producers.py", "README.md"} <= names
    found = {(path.relative_to(ROOT).as_posix(), module) for path in files
             for module in private_imports(path.read_text(encoding="utf-8"))}
    assert sorted(found) == [], "import the public name instead (sqsjobs.__all__, sqsjobs.ops)"


@pytest.mark.parametrize("handler", ["worker", "redrive", "outbox_relay", "scheduler"])
def test_each_reference_handler_is_short(handler: str) -> None:
    # STYLE: read settings, build once per cold start, hand the event to lib/: no logic in a handler's code.
    code = [line for line in (ROOT / "handlers" / f"{handler}.py").read_text().split('"""', 2)[2].splitlines()
            if line.strip() and not line.lstrip().startswith("#")]
    assert len(code) <= 14, code


#: run with a copy of the package first on sys.path: a star import, and what it brought
_STAR = """
import json, sys
sys.path.insert(0, sys.argv[1])
import sqsjobs
assert sqsjobs.__file__.startswith(sys.argv[1]), sqsjobs.__file__
names = {}
exec("from sqsjobs import *", names)
print(json.dumps({"imported": sorted(n for n in names if not n.startswith("__")), "dir": dir(sqsjobs)}))
"""


@pytest.mark.parametrize("function", ["worker", "redrive"])
def test_a_star_import_works_in_the_lambda_bundle_s_file_set(tmp_path: Path, function: str) -> None:
    # The bundle's file set of sqsjobs: the package as the wheel installs it, minus what the bundle script deletes
    # (its own prune(), the one every bundle runs), minus sqsjobs/ops but in the redrive function
    # (infra/bundle/Makefile). tests/infra/test_bundle.py does the same in the built bundles under python3.12.
    import shutil
    import subprocess
    import sys

    from sqsjobs.scaffold.bundle import prune

    shutil.copytree(Path(sqsjobs.__file__).parent, tmp_path / "sqsjobs",
                    ignore=shutil.ignore_patterns("__pycache__"))
    prune(tmp_path)
    if function == "worker":
        shutil.rmtree(tmp_path / "sqsjobs" / "ops")
    done = subprocess.run([sys.executable, "-c", _STAR, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    absent = {"CheckUnavailable", "ConsoleError", "LocalCloudError"} | (
        {"MoveTaskError", "RedriveError", "StatusError"} if function == "worker" else set())
    assert report["imported"] == sorted(set(sqsjobs.__all__) - absent)
    assert absent.isdisjoint(report["dir"]) and "JobApp" in report["dir"]


def test_every_tool_error_is_listed_where_its_home_is_installed() -> None:
    # This checkout has every home: star import and dir() list every error, each resolved lazily.
    names: dict[str, object] = {}
    exec("from sqsjobs import *", names)
    assert set(errors.HOMES) <= set(names) and set(errors.HOMES) <= set(dir(sqsjobs))
    assert sorted(sqsjobs.__all__) == sorted(set(sqsjobs.__all__))


def test_no_handler_scaffold_template_or_doc_reaches_into_an_app_s_runtime() -> None:
    # app.runtime holds the collaborators features share (lib/sqsjobs/_runtime.py): public as an attribute so
    # features reach it, never a user's API. What a doc or a handler needs has a public spelling
    # (app.unschedule(key), app.use(...)); the generated reference pages (docstrings of public names) count too.
    found = {(path.relative_to(ROOT).as_posix(), reached) for path in copied_files()
             for reached in through_the_runtime(path.read_text(encoding="utf-8"))}
    assert sorted(found) == [], "use the public spelling (sqsjobs.__all__, JobApp's methods)"
