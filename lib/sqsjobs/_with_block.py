"""Context managers that only work in a ``with`` block: ``app.use(...)`` and ``app.testing()``.

``app.use(store=...)`` written as a statement builds a context manager and
drops it: nothing is swapped, and the app goes on with its real clients. The
call itself cannot know it is not in a ``with``, so it leaves a mark on the app
that entering the block clears; the app's next use of a collaborator (its
store, its SQS, DynamoDB or Scheduler client) finds the mark and raises a
``ConfigurationError`` naming ``with app.use(...)``, once.

Example:
    >>> from sqsjobs import InMemoryStore, JobApp
    >>> app = JobApp(queue_url="https://sqs.example/q")
    >>> _ = app.use(store=InMemoryStore())  # no `with`
    >>> app.runtime.store
    Traceback (most recent call last):
    ...
    sqsjobs.ConfigurationError: app.use(...) was called without `with`, so it swapped nothing: write `with \
app.use(...):` and use the app inside the block
    >>> with app.use(store=InMemoryStore()):
    ...     type(app.runtime.store).__name__
    'InMemoryStore'
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from types import TracebackType
from typing import Any, Concatenate, ParamSpec, TypeVar

from sqsjobs._errors import ConfigurationError

P = ParamSpec("P")
T = TypeVar("T")
#: the attribute the mark lives in (on the app: the block's own snapshot and restore keep it consistent)
MARK = "_unentered_block"


class Block(AbstractContextManager[T]):
    """A context manager that marks ``owner`` until it is entered."""

    def __init__(self, owner: Any, inner: AbstractContextManager[T], call: str) -> None:
        self._owner = owner
        self._inner = inner
        self.call = call
        vars(owner)[MARK] = self

    def __enter__(self) -> T:
        if vars(self._owner).get(MARK) is self:
            del vars(self._owner)[MARK]
        return self._inner.__enter__()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> bool | None:
        return self._inner.__exit__(kind, error, traceback)


def with_block(call: str) -> Callable[[Callable[Concatenate[Any, P], AbstractContextManager[T]]],
                                      Callable[Concatenate[Any, P], AbstractContextManager[T]]]:
    """Decorate a method returning a context manager so that calling it outside ``with`` is an error."""

    def decorate(method: Callable[Concatenate[Any, P], AbstractContextManager[T]]
                 ) -> Callable[Concatenate[Any, P], AbstractContextManager[T]]:
        @functools.wraps(method)
        def wrapper(owner: Any, /, *args: P.args, **kwargs: P.kwargs) -> AbstractContextManager[T]:
            return Block(owner, method(owner, *args, **kwargs), call)

        return wrapper

    return decorate


def check_entered(owner: Any) -> None:
    """Raise (once) if a ``with``-only call on ``owner`` was never entered."""
    block = vars(owner).pop(MARK, None)
    if block is not None:
        raise ConfigurationError(f"{block.call} was called without `with`, so it swapped nothing: write "
                                 f"`with {block.call}:` and use the app inside the block")
