"""The import graph of lib/sqsjobs, read from the source with ``ast`` (nothing is imported).

One node per module, one edge per ``import`` or ``from ... import`` anywhere in
it, function bodies included. Relative imports are resolved against the
module's package, and ``from pkg import name`` is an edge to ``pkg.name`` when
that is a submodule (otherwise to ``pkg``). Imports under ``if TYPE_CHECKING:``
never run, so they are not edges, unless ``type_checking=True`` asks for what a
module names at all (tests/unit/test_tool_imports.py). Importing a submodule runs its parent
packages' ``__init__`` too; those implicit edges are left out, as every checker
does, since a package's ``__init__`` importing its own children is no cycle.
tests/unit/test_import_cycles.py and tests/unit/test_handler_imports.py read it.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent / "lib"


def write_tree(root: Path, files: dict[str, str]) -> Path:
    """Write ``files`` (path under ``root`` → text) for a checker's own test, every package's ``__init__`` too."""
    for name, text in files.items():
        path = root / name
        for parent in path.relative_to(root).parents:
            if parent != Path("."):
                (root / parent).mkdir(parents=True, exist_ok=True)
                (root / parent / "__init__.py").touch()
        path.write_text(text)
    return root


def modules(root: Path = ROOT) -> dict[str, tuple[Path, bool]]:
    """Every module under ``root/sqsjobs``: dotted name → (file, whether it is a package's ``__init__``)."""
    found = {}
    for path in (root / "sqsjobs").rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if package else parts)] = (path, package)
    return found


def _type_checking_only(tree: ast.AST) -> set[int]:
    """The ids of the nodes inside ``if TYPE_CHECKING:`` bodies (their ``else`` runs, so it counts)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and (
                (isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING")
                or (isinstance(node.test, ast.Attribute) and node.test.attr == "TYPE_CHECKING")):
            skipped.update(id(inner) for statement in node.body for inner in ast.walk(statement))
    return skipped


def imports_of(name: str, path: Path, package: bool, known: set[str] | dict[str, object], *,
               type_checking: bool = False) -> set[str]:
    """The modules of ``known`` that module ``name`` (at ``path``) imports when it runs, anywhere in its body
    (and, with ``type_checking``, for the type checker)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    skipped = set() if type_checking else _type_checking_only(tree)
    here = name if package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names if alias.name in known)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")[: len(here.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                if submodule in known:
                    found.add(submodule)
                elif target in known:
                    found.add(target)
    found.discard(name)
    return found


def import_graph(root: Path = ROOT, *, type_checking: bool = False) -> dict[str, set[str]]:
    """Module → the modules it imports at run time (and, with ``type_checking``, under ``TYPE_CHECKING``)."""
    found = modules(root)
    return {name: imports_of(name, path, package, set(found), type_checking=type_checking)
            for name, (path, package) in found.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def a_cycle(graph: dict[str, set[str]], component: list[str]) -> list[str]:
    """One closed path through ``component``, for the failure message: ``a -> b -> ... -> a``."""
    members = set(component)
    path = [component[0]]
    seen = {component[0]: 0}
    while True:
        nxt = sorted(graph[path[-1]] & members)[0]
        if nxt in seen:
            return [*path[seen[nxt]:], nxt]
        seen[nxt] = len(path)
        path.append(nxt)


def reachable(graph: dict[str, set[str]], start: set[str]) -> set[str]:
    """Every module ``start`` imports, directly or not (``start`` included)."""
    seen, todo = set(start), list(start)
    while todo:
        for nxt in graph.get(todo.pop(), set()) - seen:
            seen.add(nxt)
            todo.append(nxt)
    return seen
