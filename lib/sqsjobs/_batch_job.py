"""Batch handlers: ``@app.job(..., batch=N)``, one call for up to ``N`` items of one SQS batch.

A batch handler takes one parameter, a list of items; the list's item type is
a ``TypedDict`` whose fields are what one enqueue carries (IDs and scalars,
checked as any job's arguments). Each item is its own message with its own
key, claim, attempts, retries and dead letter: only the call is shared. The
worker runs the claimed items of one job N to a call
(``worker/_batch_handler.py``) and then decides each item's ending as if it had
run alone (``worker/_decision.py``).

How a call reports its items (``item_errors``): returning ``None`` (or an
empty mapping) means every item succeeded; returning ``{index: exception}`` or
raising ``BatchItemsFailed({index: exception})`` fails exactly those items;
any other exception fails every item of the call with it.

Declaring never calls AWS, and this module imports nothing heavy.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ParamSpec, TypeVar, cast, is_typeddict

from sqsjobs._errors import BatchItemsFailed, ConfigurationError, PermanentError
from sqsjobs._job import Job
from sqsjobs.enqueue._arguments import Parameter, Signature, _accepted_types

P = ParamSpec("P")
R = TypeVar("R")


def item_signature(fn: Callable[..., Any], job: str) -> Signature:
    """The arguments one item carries: the fields of the ``TypedDict`` the handler's one list parameter holds.

    Example:
        >>> from typing import TypedDict
        >>> class Doc(TypedDict):
        ...     doc_id: int
        >>> def index_docs(items: list[Doc]) -> None: ...
        >>> item_signature(index_docs, "index-docs").bind({"doc_id": "7"})
        Traceback (most recent call last):
        ...
        sqsjobs.InvalidArgumentsError: job 'index-docs': argument 'doc_id' must be int, got str '7'
    """
    params = list(inspect.signature(fn).parameters.values())
    try:
        hint = typing.get_type_hints(fn).get(params[0].name) if len(params) == 1 else None
        (item,) = typing.get_args(hint) if typing.get_origin(hint) is list else (None,)
        fields = typing.get_type_hints(item) if item is not None and is_typeddict(item) else None
    except Exception as error:  # unresolvable forward references
        raise ConfigurationError(f"job {job!r}: cannot read type hints of {fn.__qualname__}: {error}") from None
    if item is None or fields is None:
        raise ConfigurationError(
            f"job {job!r}: a batch handler takes one parameter, a list of items annotated with a TypedDict of "
            "one item's arguments, e.g. `def index_docs(items: list[Doc]) -> None` with "
            "`class Doc(TypedDict): doc_id: int`"
        )
    required = item.__required_keys__
    parameters = []
    for field, field_hint in fields.items():
        accepted, list_of = _accepted_types(job, field, field_hint)
        parameters.append(Parameter(name=field, accepted=accepted, list_of=list_of, required=field in required))
    return Signature(job=job, parameters=tuple(parameters))


def item_errors(size: int, *, returned: Any = None, raised: BaseException | None = None) -> list[BaseException | None]:
    """Each of ``size`` items' error (None: it succeeded), from what the call returned or raised.

    Example:
        >>> item_errors(3, returned={1: KeyError("doc 1")})
        [None, KeyError('doc 1'), None]
        >>> item_errors(2, raised=BatchItemsFailed({0: TimeoutError()}))
        [TimeoutError(), None]
        >>> item_errors(2, raised=ConnectionError("search is down"))
        [ConnectionError('search is down'), ConnectionError('search is down')]
    """
    if raised is not None and not isinstance(raised, BatchItemsFailed):
        return [raised] * size
    named = raised.failures if isinstance(raised, BatchItemsFailed) else returned
    if named is None:
        return [None] * size
    problem = _problem(named, size)
    if problem is not None:
        # The call's report cannot be read: no item may count as done, and retrying cannot fix the code.
        return [PermanentError(f"the batch handler's report is unusable: {problem}")] * size
    return [named.get(i) for i in range(size)]


def _problem(named: Any, size: int) -> str | None:
    if not isinstance(named, Mapping):
        return f"it returned a {type(named).__name__}; return None or a mapping {{item index: exception}}"
    for index, error in named.items():
        if type(index) is not int or not 0 <= index < size:
            return f"it named item {index!r}, not an index of its {size} items"
        if not isinstance(error, BaseException):
            return f"item {index} is named with {type(error).__name__}, not an exception"
    return None


class BatchJob(Job[P, R]):
    """A job whose function takes a list of items (``@app.job(..., batch=N)``); each enqueue is one item.

    Example:
        >>> from typing import TypedDict
        >>> from sqsjobs import JobApp
        >>> app = JobApp(queue_url="https://sqs.example/q")
        >>> class Doc(TypedDict):
        ...     doc_id: int
        >>> @app.job("index-docs", key="index-docs:{doc_id}", batch=25)
        ... def index_docs(items: list[Doc]) -> None: ...
        >>> index_docs.message(doc_id=7).key, index_docs.options.batch
        ('index-docs:7', 25)
    """

    def _arguments(self, fn: Callable[..., Any], name: str) -> tuple[Signature, dict[str, Any]]:
        return item_signature(fn, name), {}

    def call(self, items: Sequence[Mapping[str, Any]]) -> Any:
        """Call the handler with these items' arguments (a list of dicts, in order)."""
        handler = cast(Callable[[list[dict[str, Any]]], Any], self.fn)
        return handler([dict(item) for item in items])
