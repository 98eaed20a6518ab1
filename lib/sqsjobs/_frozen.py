"""``per_message``: a dataclass built once a message, frozen to the type checker and plain at run time.

A frozen dataclass's ``__init__`` sets each field through ``object.__setattr__``,
three times the cost of a plain one's: for the records the worker makes for
every message (a claim, its lease operation, a completion) that was a sixth
of building a batch's statements (bench/figures.py ``_statement_building``).
These classes are declared with ``per_message`` instead of
``dataclass(frozen=True, kw_only=True)``: mypy (strict over ``lib/``) still
refuses any assignment to their fields, as it does for a frozen dataclass
(``typing.dataclass_transform(frozen_default=True)``); at run time they are
plain keyword-only dataclasses. Nothing hashes them (each holds a mapping, so a
frozen one could not be hashed either), and nothing in ``lib/`` writes their
fields after ``__init__`` (a rule worked out once is kept with
``object.__setattr__``, as on a frozen dataclass).

Example:
    >>> @per_message
    ... class Reading:
    ...     key: str
    ...     value: float = 0.0
    >>> Reading(key="k")
    Reading(key='k', value=0.0)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeVar, dataclass_transform

_T = TypeVar("_T")


@dataclass_transform(frozen_default=True, kw_only_default=True, field_specifiers=(field,))
def per_message(cls: type[_T]) -> type[_T]:
    """``cls`` as a keyword-only dataclass, immutable to the type checker (see the module's docstring)."""
    return dataclass(kw_only=True)(cls)
