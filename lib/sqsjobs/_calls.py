"""How sqsjobs calls the functions users give it: ``async def`` ones awaited, and nothing ever left unrun.

A job, a batch handler, a callback, a chain's step and a scheduled job are
all functions sqsjobs calls; any of them may be ``async def``. The worker
awaits them on the invocation's event loop (``worker/_run_step.py``), the
scheduler on one of its own (``run_to_end``). What cannot be run is refused
where it is declared, with what to write instead (``check_function``,
``check_sync``): a generator function (its body would never run: calling it
only makes a generator), and an async function where sqsjobs needs the value
at once (an upcaster). A call that was declared synchronous but hands back an
awaitable anyway (a decorator that hid an ``async def``) fails with
``PermanentError`` (``refuse_awaitable``): it is never counted a success.

This module is on the worker's import path: it imports only ``inspect``
(which the job declarations import already) and ``asyncio`` lazily.

Example:
    >>> async def send_receipt(order_id: int) -> None: ...
    >>> is_async(send_receipt), is_async(print)
    (True, False)
"""

from __future__ import annotations

import contextvars
import functools
import inspect
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from sqsjobs._errors import ConfigurationError, PermanentError


def is_async(fn: Any) -> bool:
    """True when calling ``fn`` makes a coroutine to await: ``async def`` (through ``functools.partial``, an
    object whose ``__call__`` is ``async def``, or ``inspect.markcoroutinefunction``).

    Example:
        >>> import functools
        >>> class Sender:
        ...     async def __call__(self, to: str) -> None: ...
        >>> async def send(to: str, body: str) -> None: ...
        >>> is_async(Sender()), is_async(functools.partial(send, body="hi")), is_async(lambda: None)
        (True, True, False)
    """
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    if inspect.isclass(fn) or inspect.isfunction(fn) or inspect.ismethod(fn):
        return False  # calling a class makes an instance
    return inspect.iscoroutinefunction(getattr(fn, "__call__", None))  # noqa: B004 - an instance's async __call__


def check_function(what: str, fn: Any) -> None:
    """Refuse ``fn`` as ``what`` (e.g. ``"job 'receipt'"``) when calling it would not run its body.

    Example:
        >>> def pages(cursor: int):
        ...     yield cursor
        >>> check_function("job 'export'", pages)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'export': pages is a generator function: calling it only makes a \
generator, its body never runs; return a value instead of yielding (a chunked job returns its next cursor)
    """
    name = getattr(fn, "__name__", repr(fn))
    if inspect.isasyncgenfunction(fn):
        raise ConfigurationError(f"{what}: {name} is an async generator function: calling it only makes an "
                                 "async generator, its body never runs; make it `async def` without `yield`")
    if inspect.isgeneratorfunction(fn):
        raise ConfigurationError(f"{what}: {name} is a generator function: calling it only makes a generator, its "
                                 "body never runs; return a value instead of yielding (a chunked job returns its "
                                 "next cursor)")


def check_sync(what: str, fn: Any, why: str) -> None:
    """Refuse an ``async def`` ``fn`` where sqsjobs needs its value at once (``why`` says where).

    Example:
        >>> async def add_loud(args: dict) -> dict: ...
        >>> check_sync("job 'greet': upcaster from version 1", add_loud, "it runs while the message is decoded")
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'greet': upcaster from version 1: add_loud is async, and it runs while \
the message is decoded: make it a plain def
    """
    check_function(what, fn)
    if is_async(fn):
        raise ConfigurationError(f"{what}: {getattr(fn, '__name__', repr(fn))} is async, and {why}: make it a "
                                 "plain def")


def refuse_awaitable(result: Any, what: str) -> Any:
    """``result`` of a synchronous call; a ``PermanentError`` if it is an awaitable nobody would await.

    The awaitable is closed (no "never awaited" warning): the body it holds never runs, so the call failed.

    Example:
        >>> async def hidden() -> None: ...
        >>> refuse_awaitable(hidden(), "job 'receipt'")
        Traceback (most recent call last):
        ...
        sqsjobs.PermanentError: job 'receipt' returned a coroutine: it was declared as a plain function (a \
decorator hid its `async def`?), so nothing would await it; declare the function itself, or keep \
inspect.markcoroutinefunction on the wrapper
    """
    if not inspect.isawaitable(result):
        return result
    close = getattr(result, "close", None)
    if callable(close):
        close()
    raise PermanentError(f"{what} returned a {type(result).__name__}: it was declared as a plain function (a "
                         "decorator hid its `async def`?), so nothing would await it; declare the function itself, "
                         "or keep inspect.markcoroutinefunction on the wrapper")


def run_to_end(fn: Callable[..., Any], kwargs: Mapping[str, Any], what: str) -> Any:
    """Call ``fn(**kwargs)`` and return its value; an async ``fn`` runs on an event loop of its own.

    The scheduler's direct fire uses it: one function, no batch. Inside a running loop (an async test calling
    ``fire``) the coroutine runs on a fresh loop in a thread of its own, since a loop cannot be nested.

    Example:
        >>> async def nightly_report(period: str) -> str:
        ...     return f"report {period}"
        >>> run_to_end(nightly_report, {"period": "2026-01-02"}, "scheduled job 'nightly-report'")
        'report 2026-01-02'
    """
    if not is_async(fn):
        return refuse_awaitable(fn(**kwargs), what)
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(fn(**kwargs))
    here = contextvars.copy_context()  # the caller's trace id and budget go with it
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqsjobs-run") as pool:
        return pool.submit(here.run, asyncio.run, fn(**kwargs)).result()
