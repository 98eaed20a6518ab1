"""IDs-and-scalars arguments, checked against the job function's signature.

Payloads carry identifiers and scalars only (docs/jobs.md): the job
re-fetches fresh state, and a deploy that changes a class can never break a
message already in flight. Allowed values: ``str``, ``int``, ``float``
(finite), ``bool``, ``None``, and flat lists of those.

This module must never import AWS libraries: producers and consumers both
use it, and it runs on every enqueue.
"""

from __future__ import annotations

import inspect
import math
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqsjobs._errors import ConfigurationError, InvalidArgumentsError

SCALAR_TYPES: tuple[type, ...] = (str, int, float, bool, type(None))
MAX_LIST_ITEMS = 1000


@dataclass(frozen=True, kw_only=True)
class Parameter:
    """One job parameter: its name, the types it accepts and whether it is required."""

    name: str
    accepted: tuple[type, ...] | None  # None: any scalar
    list_of: tuple[type, ...] | None  # set when the parameter is a list
    required: bool


@dataclass(frozen=True, kw_only=True)
class Signature:
    """The checked shape of a job function's parameters.

    Example:
        >>> def send(invoice_id: int, resend: bool = False) -> None: ...
        >>> Signature.of(send, job="invoice-email").bind({"invoice_id": 42})
        {'invoice_id': 42}
    """

    job: str
    parameters: tuple[Parameter, ...]

    @classmethod
    def of(cls, fn: Callable[..., Any], *, job: str, skip: tuple[str, ...] = ()) -> Signature:
        """Read ``fn``'s signature; reject parameters that cannot carry IDs/scalars."""
        try:
            hints = typing.get_type_hints(fn)
        except Exception as error:  # unresolvable forward references
            raise ConfigurationError(f"job {job!r}: cannot read type hints of {fn.__qualname__}: {error}") from None
        params = []
        for p in inspect.signature(fn).parameters.values():
            if p.name in skip:
                continue
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY):
                raise ConfigurationError(
                    f"job {job!r}: parameter {p.name!r} must be an ordinary named parameter "
                    "(no *args, **kwargs or positional-only): messages carry named arguments"
                )
            accepted, list_of = _accepted_types(job, p.name, hints.get(p.name, Any))
            if p.default is not p.empty and p.default is not None:
                _check_value(job, p.name, p.default, accepted, list_of, where="default")
            params.append(
                Parameter(name=p.name, accepted=accepted, list_of=list_of, required=p.default is p.empty)
            )
        return cls(job=job, parameters=tuple(params))

    @property
    def names(self) -> tuple[str, ...]:
        """The parameter names, in order."""
        return tuple(p.name for p in self.parameters)

    def bind(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Check ``args`` against the signature; return them as a plain dict.

        Raises ``InvalidArgumentsError`` (a ``TypeError``) naming every problem.
        """
        if not isinstance(args, Mapping):
            raise InvalidArgumentsError(f"job {self.job!r}: arguments must be an object, got {type(args).__name__}")
        known = set(self.names)
        problems = [f"unexpected argument {name!r}" for name in args if name not in known]
        problems += [f"missing argument {p.name!r}" for p in self.parameters if p.required and p.name not in args]
        if problems:
            raise InvalidArgumentsError(
                f"job {self.job!r}: {'; '.join(problems)} (parameters: {', '.join(self.names) or 'none'})"
            )
        for p in self.parameters:
            if p.name in args:
                _check_value(self.job, p.name, args[p.name], p.accepted, p.list_of, where="argument")
        return dict(args)


def _accepted_types(job: str, name: str, hint: Any) -> tuple[tuple[type, ...] | None, tuple[type, ...] | None]:
    """Turn a type hint into (accepted scalar types, list item types)."""
    if hint is Any:
        return None, None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        members = typing.get_args(hint)
        scalars = tuple(m for m in members if typing.get_origin(m) is not list)
        lists = [m for m in members if typing.get_origin(m) is list]
        accepted: list[type] = []
        list_of: tuple[type, ...] | None = None
        for m in scalars:
            accepted.extend(_scalar(job, name, m))
        for m in lists:
            (item,) = typing.get_args(m) or (Any,)
            list_of = None if item is Any else tuple(_scalar(job, name, item))
            accepted.append(list)
        return tuple(accepted), list_of
    if origin is list or hint is list:
        args = typing.get_args(hint)
        item = args[0] if args else Any
        return (list,), None if item is Any else tuple(_scalar(job, name, item))
    return tuple(_scalar(job, name, hint)), None


def _scalar(job: str, name: str, hint: Any) -> tuple[type, ...]:
    if hint is None or hint is type(None):
        return (type(None),)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(t for member in typing.get_args(hint) for t in _scalar(job, name, member))
    if hint in SCALAR_TYPES:
        return (hint,)
    raise ConfigurationError(
        f"job {job!r}: parameter {name!r} is annotated {hint!r}; job arguments must be IDs and scalars "
        "(str, int, float, bool, None, or a list of those). Pass the object's id and re-fetch it in the job."
    )


def _check_value(
    job: str,
    name: str,
    value: Any,
    accepted: tuple[type, ...] | None,
    list_of: tuple[type, ...] | None,
    *,
    where: str,
) -> None:
    label = f"job {job!r}: {where} {name!r}"
    if isinstance(value, list):
        if accepted is not None and list not in accepted:
            raise InvalidArgumentsError(f"{label} must be {_names(accepted)}, got a list")
        if len(value) > MAX_LIST_ITEMS:
            raise InvalidArgumentsError(f"{label} has {len(value)} items; at most {MAX_LIST_ITEMS} are allowed")
        for item in value:
            if isinstance(item, list | dict):
                raise InvalidArgumentsError(
                    f"{label} must be a flat list of scalars, found a nested {type(item).__name__}"
                )
            _check_scalar(label, item, list_of)
        return
    _check_scalar(label, value, None if accepted is None else tuple(t for t in accepted if t is not list))


def _check_scalar(label: str, value: Any, accepted: tuple[type, ...] | None) -> None:
    if not isinstance(value, SCALAR_TYPES):
        raise InvalidArgumentsError(
            f"{label} is a {type(value).__name__}; only IDs and scalars (str, int, float, bool, None) "
            "may be sent: pass the id and re-fetch the object in the job"
        )
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidArgumentsError(f"{label} is {value!r}; JSON carries only finite numbers")
    if accepted is None:
        return
    # bool is an int subclass; an int parameter given True is almost always a bug.
    if isinstance(value, bool):
        ok = bool in accepted
    elif isinstance(value, int):
        ok = int in accepted or float in accepted
    else:
        ok = isinstance(value, accepted)
    if not ok:
        raise InvalidArgumentsError(f"{label} must be {_names(accepted)}, got {type(value).__name__} {value!r}")


def _names(accepted: tuple[type, ...]) -> str:
    return " or ".join("None" if t is type(None) else t.__name__ for t in accepted)
