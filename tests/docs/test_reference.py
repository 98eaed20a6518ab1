"""docs/reference/ is what tests/reference_pages.py renders from the docstrings, and covers every public name."""

from __future__ import annotations

import pytest
from reference_pages import OUT, PAGES, public_names, render

RENDERED = render()


@pytest.mark.parametrize("page", sorted(RENDERED))
def test_the_reference_page_is_up_to_date(page: str) -> None:
    path = OUT / page
    assert path.exists(), f"{path} is missing: run .venv/bin/python tests/reference_pages.py"
    assert path.read_text(encoding="utf-8") == RENDERED[page], (
        f"{path} is stale: run .venv/bin/python tests/reference_pages.py")


def test_no_page_is_left_over() -> None:
    assert {path.name for path in OUT.glob("*.md")} == set(RENDERED)


def test_every_public_name_is_on_exactly_one_page() -> None:
    placed = [name for _, names in PAGES.values() for name in names]
    assert sorted(placed) == sorted(public_names())
    assert "ops.redrive_handler" in placed and "client" in placed


def test_a_docstring_example_is_fenced_and_never_run_as_a_snippet() -> None:
    app_page = RENDERED["app.md"]
    assert "```pycon\n>>> " in app_page
    assert "```python" not in "".join(RENDERED.values())  # a python fence would be run by test_doc_snippets
