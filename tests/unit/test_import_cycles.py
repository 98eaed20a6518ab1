"""No import cycle among the modules of lib/sqsjobs, counting the imports inside functions.

The graph and what counts as an edge: tests/import_support.py.
"""

from __future__ import annotations

from pathlib import Path

from import_support import a_cycle, cycles, import_graph


def test_the_checker_sees_function_level_relative_and_submodule_imports(tmp_path: Path) -> None:
    package = tmp_path / "sqsjobs"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from .sub import b\n")
    (package / "sub" / "b.py").write_text("from sqsjobs import c\n")
    (package / "c.py").write_text("import sqsjobs.a\n")
    (package / "d.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sqsjobs import a\n")
    graph = import_graph(tmp_path)
    assert graph["sqsjobs.a"] == {"sqsjobs.sub.b"}
    assert graph["sqsjobs.sub.b"] == {"sqsjobs.c"}
    assert graph["sqsjobs.d"] == set()
    assert cycles(graph) == [["sqsjobs.a", "sqsjobs.c", "sqsjobs.sub.b"]]
    assert a_cycle(graph, cycles(graph)[0]) == ["sqsjobs.a", "sqsjobs.sub.b", "sqsjobs.c", "sqsjobs.a"]


def test_the_runtime_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 100, "the checker found too few modules: is ROOT right?"
    found = cycles(graph)
    assert found == [], "import cycles: " + "; ".join(" -> ".join(a_cycle(graph, c)) for c in found)
