"""`app.use(...)` and `app.testing()` outside `with` are an error, not a silent no-op (issue 25, finding 14).

Written as a statement, `app.use(store=...)` used to build a context manager and drop it: the app went on
with its real store and clients, and the test talked to whatever the environment pointed at.
"""

from __future__ import annotations

from contextlib import ExitStack

import pytest

from sqsjobs import ConfigurationError, InMemoryStore, JobApp
from sqsjobs.testing import FakeSQS


def make_app() -> JobApp:
    app = JobApp(queue_url="https://sqs.us-east-1.amazonaws.com/123456789012/jobs", table_name="jobs")

    @app.job("greet", key="greet:{user_id}")
    def greet(user_id: int) -> None: ...

    return app


def test_use_without_with_is_an_error_at_the_apps_next_step_naming_the_with_block() -> None:
    app = make_app()
    app.use(store=InMemoryStore(), sqs_client=FakeSQS())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError) as caught:
        app.enqueue("greet", user_id=7)
    assert str(caught.value) == ("app.use(...) was called without `with`, so it swapped nothing: write "
                                 "`with app.use(...):` and use the app inside the block")


def test_testing_without_with_is_an_error_too() -> None:
    app = make_app()
    app.testing()
    with pytest.raises(ConfigurationError, match=r"`with app.testing\(\):`"):
        _ = app.runtime.store


def test_the_error_is_raised_once_where_the_mistake_shows() -> None:
    app = make_app()
    app.use(store=InMemoryStore())
    with pytest.raises(ConfigurationError):
        _ = app.runtime.store
    assert type(app.runtime.store).__name__ == "DynamoDBStore"  # the real one, as the statement left it


def test_with_use_swaps_and_restores_as_before_even_through_an_exit_stack() -> None:
    app = make_app()
    store, sqs = InMemoryStore(), FakeSQS()
    with ExitStack() as stack:
        inside = stack.enter_context(app.use(store=store, sqs_client=sqs,  # type: ignore[arg-type]
                                             settings={"max_attempts": 3}))
        assert inside is app and app.runtime.store is store and app.runtime.sqs is sqs
        assert app.settings.max_attempts == 3
        app.enqueue("greet", user_id=7)
        with app.use(store=InMemoryStore()) as nested:
            assert nested.runtime.store is not store
        assert app.runtime.store is store
    assert app.settings.max_attempts == 5
    assert [c.operation for c in sqs.calls] == ["SendMessage"]


def test_a_use_built_first_and_entered_later_works() -> None:
    app = make_app()
    block = app.use(store=InMemoryStore())
    with block:
        assert type(app.runtime.store).__name__ == "InMemoryStore"
