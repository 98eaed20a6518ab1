"""enqueue_many's progress bar: on a terminal only, counting what SQS accepted (issue 14)."""

from __future__ import annotations

import pytest

from sqsjobs import JobApp


def make() -> JobApp:
    app = JobApp()

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None: ...

    return app


def test_no_bar_when_standard_error_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    app = make()
    with app.testing():
        report = app.enqueue_many(app.message("greet", user_id=i) for i in range(30))
    assert report.sent == 30 and capsys.readouterr().err == ""


def test_the_bar_counts_the_accepted_messages(capsys: pytest.CaptureFixture[str]) -> None:
    app = make()
    with app.testing():
        report = app.enqueue_many([app.message("greet", user_id=i) for i in range(30)], progress=True)
    assert report.sent == 30
    drawn = capsys.readouterr().err
    assert "enqueueing" in drawn and "30/30" in drawn
