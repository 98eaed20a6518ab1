"""docs/getting-started.md shows the files `sqsjobs init billing-jobs --with delays,groups` writes, as they are."""

from __future__ import annotations

from doc_snippets import PYTHON, ROOT, snippets

from sqsjobs.scaffold import Extra, ProjectOptions, render


def test_the_page_quotes_the_generated_code_and_tests_verbatim() -> None:
    files = render(ProjectOptions(name="billing-jobs", extras=frozenset({Extra.DELAYS, Extra.GROUPS})))
    quoted = [s for s in snippets(ROOT / "docs" / "getting-started.md") if s.language in PYTHON]
    assert len(quoted) == 4
    for block in quoted:
        assert any(block.code.strip() in text for text in files.values()), f"{block.where} is not in the project"
    assert quoted[0].code.strip() in files["handlers/app.py"]
    assert quoted[3].code.strip() in files["tests/test_delays.py"]
