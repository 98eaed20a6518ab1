"""Frozen value classes that cost less: ``per_message`` to make per message, ``Value`` to declare at import.

``per_message``: a dataclass built once a message, frozen to the type checker and plain at run time.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
three times the cost of a plain one's: for the records the worker makes for
every message (a claim, its lease operation, a completion) that was a fifth
of building a batch's statements (bench/figures.py ``_statement_building``).
These classes are declared with ``per_message`` instead of
``dataclass(frozen=True, kw_only=True)``: mypy (strict over ``lib/``) still
refuses any assignment to their fields, as it does for a frozen dataclass
(``typing.dataclass_transform(frozen_default=True)``); at run time they are
plain keyword-only dataclasses. Nothing hashes them (each holds a mapping, so a
frozen one could not be hashed either), and nothing in ``lib/`` writes their
fields after ``__init__``.

Example:
    >>> @per_message
    ... class Reading:
    ...     key: str
    ...     value: float = 0.0
    >>> Reading(key="k")
    Reading(key='k', value=0.0)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import MISSING, Field, FrozenInstanceError, dataclass, field
from typing import Any, TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def per_message(cls: type[_T]) -> type[_T]:
    """``cls`` as a keyword-only dataclass, immutable to the type checker (see the module's docstring)."""
    return dataclass(kw_only=True)(cls)


@dataclass_transform(frozen_default=True, field_specifiers=(field,))
class Value:
    """A small immutable value compared and hashed by its type and fields, with no methods compiled per class.

    ``dataclass`` compiles each class's ``__init__``, ``__repr__``, ``__eq__``,
    ``__hash__``, ``__setattr__`` and ``__delattr__`` from source (an ``exec``
    each) when the class is made: about half a millisecond a class, paid by
    every cold start that imports it. A module of many tiny value classes (a
    rule's conditions and updates: ``sqsjobs.store._rules``) subclasses this
    instead: its methods are shared, and a class costs what a plain class
    costs. To mypy each subclass is a frozen dataclass (the same checks); at
    run time its fields are the class's annotations, in order, positional or
    by keyword (``kw_only=True`` in the class statement: by keyword only), a
    default being the class attribute of that name (``field(default_factory=...)``
    for a fresh one each), and ``__post_init__`` runs after ``__init__``. Built once per rule
    shape, or per rare call, never per message: the generic ``__init__`` is fast enough there.

    Example:
        >>> class Pair(Value):
        ...     left: str
        ...     right: int = 0
        >>> Pair("a"), Pair("a") == Pair(left="a", right=0), Pair("a") == Pair("b"), len({Pair("a"), Pair("a")})
        (Pair(left='a', right=0), True, False, 1)
        >>> Pair("a").left = "b"
        Traceback (most recent call last):
        ...
        dataclasses.FrozenInstanceError: cannot assign to field 'left'
    """

    __fields__: tuple[str, ...] = ()
    __defaults__: dict[str, Any] = {}
    __factories__: dict[str, Callable[[], Any]] = {}
    __kw_only__: bool = False

    def __init_subclass__(cls, kw_only: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        names = tuple(name for name in inspect.get_annotations(cls) if not name.startswith("_"))
        cls.__fields__ = names
        cls.__defaults__ = {name: cls.__dict__[name] for name in names if name in cls.__dict__}
        cls.__factories__ = {name: default.default_factory for name, default in cls.__defaults__.items()
                             if isinstance(default, Field) and default.default_factory is not MISSING}
        cls.__kw_only__ = kw_only

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        names = self.__fields__
        if args and self.__kw_only__:
            raise TypeError(f"{type(self).__name__}() takes keyword arguments only")
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__}() takes {len(names)} arguments, got {len(args)}")
        for name, value in zip(names, args, strict=False):
            object.__setattr__(self, name, value)
        for name in names[len(args):]:
            if name in kwargs:
                object.__setattr__(self, name, kwargs.pop(name))
            elif name in self.__factories__:
                object.__setattr__(self, name, self.__factories__[name]())
            elif name in self.__defaults__:
                object.__setattr__(self, name, self.__defaults__[name])
            else:
                raise TypeError(f"{type(self).__name__}() missing its argument {name!r}")
        if kwargs:
            raise TypeError(f"{type(self).__name__}() got unexpected arguments {sorted(kwargs)}")
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()

    def _values(self) -> tuple[Any, ...]:
        return tuple([getattr(self, name) for name in self.__fields__])

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        return type(other) is type(self) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash((type(self), self._values()))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{name}={getattr(self, name)!r}' for name in self.__fields__)})"

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")
