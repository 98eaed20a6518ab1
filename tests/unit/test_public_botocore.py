"""The runtime uses botocore's public API only: that is what lets it admit every botocore from 1.36 on.

The runtime is everything under lib/sqsjobs except the tools ``local/`` and
``testing/``, and the reference handlers users copy. Private here means what
botocore itself names with a leading underscore (a module, a class, a function,
an attribute it sets: ``client._ruleset_resolver``, ``botocore.config._RetryDict``)
or documents as its own machinery (``botocore.handlers`` and its
``BUILTIN_HANDLERS``, the handlers every new session registers). The names are
read from the botocore installed here, so a new private attribute of a new
botocore is covered without a list to keep. A name sqsjobs defines itself
(``self._lock``) is its own, whoever else uses it.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import botocore

import sqsjobs

PACKAGE = Path(sqsjobs.__file__).parent
ROOT = PACKAGE.parents[1]
#: the tools (extras that never run in Lambda): they may reach into botocore
TOOLS = ("local", "testing")
#: botocore modules that are its own machinery, whatever their names
INTERNAL_MODULES = ("botocore.handlers",)
INTERNAL_NAMES = frozenset({"BUILTIN_HANDLERS"})


def runtime_files() -> list[Path]:
    files = [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in TOOLS]
    return files + sorted((ROOT / "handlers").glob("*.py"))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def defined_names(files: list[Path]) -> frozenset[str]:
    """The private names ``files`` define: functions, classes, module names, attributes assigned on anything."""
    names: set[str] = set()
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
        names.update(part for part in path.with_suffix("").parts)
    return frozenset(name for name in names if _private(name))


@functools.cache
def botocore_private() -> frozenset[str]:
    return defined_names(sorted(Path(botocore.__file__).parent.rglob("*.py")))


def violations(source: str, where: str, own: frozenset[str]) -> list[str]:
    """Each use of a private botocore name in ``source``, as ``where:line: what``."""
    found: list[str] = []
    private = botocore_private() - own
    for node in ast.walk(ast.parse(source, where)):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("botocore"):
            module = node.module or ""
            names = [alias.name for alias in node.names]
            if any(_private(part) for part in module.split(".")) or module in INTERNAL_MODULES:
                found.append(f"{where}:{line}: from {module} import ...")
            found += [f"{where}:{line}: {module}.{name}" for name in names
                      if _private(name) or name in INTERNAL_NAMES or f"{module}.{name}" in INTERNAL_MODULES]
        elif isinstance(node, ast.Import):
            found += [f"{where}:{line}: import {alias.name}" for alias in node.names
                      if alias.name.startswith("botocore") and (any(_private(p) for p in alias.name.split("."))
                                                                or alias.name in INTERNAL_MODULES)]
        elif isinstance(node, ast.Attribute) and (node.attr in private or node.attr in INTERNAL_NAMES):
            found.append(f"{where}:{line}: .{node.attr}")
        elif isinstance(node, ast.Name) and node.id in INTERNAL_NAMES:
            found.append(f"{where}:{line}: {node.id}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                node.value in private or node.value in INTERNAL_NAMES):
            found.append(f"{where}:{line}: {node.value!r} (a name looked up by string)")
    return sorted(found, key=lambda text: int(text.split(":")[1]))


def test_the_runtime_and_the_handlers_touch_no_private_botocore_name() -> None:
    files = runtime_files()
    assert len(files) > 100, "the walk found too few runtime modules"
    assert len(botocore_private()) > 1000, "the walk found too few of botocore's private names"
    own = defined_names([p for p in PACKAGE.rglob("*.py")] + files)
    found = [v for path in files for v in violations(path.read_text(), str(path.relative_to(ROOT)), own)]
    assert found == []


def test_the_check_finds_the_private_hooks_the_runtime_used_to_wrap() -> None:
    # What sqsjobs 0.1 did (the endpoint memo and the handler replay): each is found, by attribute or by string.
    old = '''
from botocore import handlers
from botocore.config import _RetryDict
resolver = client._ruleset_resolver
resolver = getattr(client, "_ruleset_resolver")
for spec in handlers.BUILTIN_HANDLERS: ...
'''
    found = violations(old, "old.py", own=frozenset())
    assert found == ["old.py:2: botocore.handlers", "old.py:3: botocore.config._RetryDict",
                     "old.py:4: ._ruleset_resolver", "old.py:5: '_ruleset_resolver' (a name looked up by string)",
                     "old.py:6: .BUILTIN_HANDLERS"]
