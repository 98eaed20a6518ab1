"""docs/getting-started.md shows the files `sqsjobs init billing-jobs --with scheduled` writes, as they are."""

from __future__ import annotations

from doc_snippets import PYTHON, ROOT, snippets

from sqsjobs.scaffold import Extra, ProjectOptions, render


def test_the_page_quotes_the_generated_job_and_test_verbatim() -> None:
    files = render(ProjectOptions(name="billing-jobs", extras=frozenset({Extra.SCHEDULED})))
    quoted = [s for s in snippets(ROOT / "docs" / "getting-started.md") if s.language in PYTHON]
    assert len(quoted) == 2
    app, test = quoted
    assert app.code.strip() in files["handlers/app.py"]
    assert test.code.strip() in files["tests/test_jobs.py"]
