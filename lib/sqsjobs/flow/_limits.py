"""Limiters: how many jobs may start per window (a rate) or run at once (a concurrency), across invocations.

Lambda's ``MaximumConcurrency`` caps a whole queue; a limiter caps one
dependency, whichever queue and job reach it::

    ses = app.rate_limit("ses", rate=14)              # SES: 14 sends a second
    pdf = app.concurrency_limit("pdf", 2)             # a renderer that takes 2 at a time

    @app.job("invoice-email", limits=["ses"])
    def send_invoice_email(invoice_id: int) -> None: ...

A limiter's state is one item, or a handful of leases (``sqsjobs.store._lease``), in the
idempotency table, under the reserved prefix ``limit#``:

- a rate limit of ``rate`` per ``per`` seconds is one *schedule* item
  (``limit#<name>#gcra``): start slots ``(per + grace) / rate`` apart, reserved
  ahead by one conditional write per batch (``sqsjobs.flow._schedule``), so no
  window of ``per`` seconds ever sees more than ``rate`` starts;
- a concurrency limit of ``limit`` is ``limit`` *slots*
  (``limit#<name>#slot#<i>``), a slot holding one running job. An
  invocation takes a free slot for each of its limited jobs that may run at
  once (one for plain jobs, which run one at a time) and releases each,
  fenced on its owner, when no remaining job needs it. The slot's lease is the invocation's
  (remaining time + ``lease_margin``), so a crashed invocation's slot is free
  again once that lease runs out: nothing leaks.

``sqsjobs.flow._permits`` takes a batch's slots (one round trip) and defers what
must wait; docs/flow-control.md has the whole design.
This module only declares and validates.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, ClassVar, cast

from sqsjobs._errors import ConfigurationError
from sqsjobs._job_options import Declaring, JobOption

#: the reserved prefix of every limiter item (``sqsjobs.store._lease.RESERVED_PREFIXES`` has it)
LIMIT_PREFIX = "limit#"
#: a limiter name: it becomes part of item keys and of the ``Limiter`` metric dimension
LIMITER_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
#: the longest window a rate limit may count over (a day)
MAX_PER_SECONDS = 86_400.0
#: the most starts a window or slots a limiter may have (each slot is an item; a batch probes only what it needs)
MAX_CAPACITY = 100_000


class LimitKind(StrEnum):
    """What a limiter counts."""

    RATE = "rate"  #: starts per window
    CONCURRENCY = "concurrency"  #: jobs running at once


@dataclass(frozen=True, kw_only=True)
class RateLimit:
    """At most ``rate`` starts in any window of ``per`` seconds.

    Example:
        >>> ses = RateLimit(name="ses", rate=14)
        >>> ses.capacity, ses.schedule_key()
        (14, 'limit#ses#gcra')
    """

    name: str
    rate: int
    per: float = 1.0

    kind: ClassVar[LimitKind] = LimitKind.RATE

    @property
    def capacity(self) -> int:
        """How many starts a window admits."""
        return self.rate

    def schedule_key(self) -> str:
        """The one item holding the limiter's schedule (``sqsjobs.store._rate_ops``)."""
        return f"{LIMIT_PREFIX}{self.name}#gcra"


@dataclass(frozen=True, kw_only=True)
class ConcurrencyLimit:
    """At most ``limit`` jobs holding the limiter at once.

    Example:
        >>> pdf = ConcurrencyLimit(name="pdf", limit=2)
        >>> pdf.capacity, pdf.key(0)
        (2, 'limit#pdf#slot#0')
    """

    name: str
    limit: int

    kind: ClassVar[LimitKind] = LimitKind.CONCURRENCY

    @property
    def capacity(self) -> int:
        """How many slots the limiter has."""
        return self.limit

    def key(self, index: int) -> str:
        """The item of slot ``index``."""
        return f"{LIMIT_PREFIX}{self.name}#slot#{index}"


Limiter = RateLimit | ConcurrencyLimit


def rate_limit(name: Any, rate: Any, per: Any = 1.0) -> RateLimit:
    """A validated rate limit: ``rate`` a whole number >= 1, ``per`` seconds in (0, 86400].

    Example:
        >>> rate_limit("ses", 14).per
        1.0
        >>> rate_limit("ses", 0)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: rate_limit('ses'): rate must be a whole number of starts >= 1, got 0
    """
    label = f"rate_limit({name!r})"
    _check_name(label, name)
    _check_count(label, "rate", rate, "a whole number of starts")
    if isinstance(per, bool) or not isinstance(per, int | float) or not math.isfinite(per) \
            or not 0 < per <= MAX_PER_SECONDS:
        raise ConfigurationError(f"{label}: per must be a number of seconds in (0, {MAX_PER_SECONDS:g}], got {per!r}")
    return RateLimit(name=name, rate=rate, per=float(per))


def concurrency_limit(name: Any, limit: Any) -> ConcurrencyLimit:
    """A validated concurrency limit: ``limit`` a whole number >= 1.

    Example:
        >>> concurrency_limit("pdf", 2).limit
        2
        >>> concurrency_limit("pdf", -1)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: concurrency_limit('pdf'): limit must be a whole number of jobs >= 1, got -1
    """
    label = f"concurrency_limit({name!r})"
    _check_name(label, name)
    _check_count(label, "limit", limit, "a whole number of jobs")
    return ConcurrencyLimit(name=name, limit=limit)


def _check_name(label: str, name: Any) -> None:
    if not isinstance(name, str) or not LIMITER_NAME.fullmatch(name):
        raise ConfigurationError(f"{label}: a limiter name is 1..64 letters, digits, '_', '.', ':' or '-', "
                                 f"got {name!r}")


def _check_count(label: str, what: str, value: Any, unit: str) -> None:
    if type(value) is not int or value < 1:
        raise ConfigurationError(f"{label}: {what} must be {unit} >= 1, got {value!r}")
    if value > MAX_CAPACITY:
        raise ConfigurationError(f"{label}: {what} must be at most {MAX_CAPACITY} (each unit is an item of the "
                                 f"idempotency table), got {value}")


def job_limits(job: str, limits: Any, known: Mapping[str, Limiter]) -> tuple[str, ...]:
    """The limiter names a job declares, each one declared on the app before the job.

    Example:
        >>> job_limits("send", ["ses"], {"ses": rate_limit("ses", 14)})
        ('ses',)
        >>> job_limits("send", ["sms"], {"ses": rate_limit("ses", 14)})
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: job 'send': unknown limiter 'sms' (declared: ses); declare it first ...
    """
    if isinstance(limits, str):
        raise ConfigurationError(f"job {job!r}: limits takes a list of limiter names, got the string {limits!r} "
                                 f"(write limits=[{limits!r}])")
    try:
        names = tuple(limits)
    except TypeError:
        raise ConfigurationError(f"job {job!r}: limits takes a list of limiter names, got {limits!r}") from None
    for name in names:
        if name not in known:
            declared = ", ".join(sorted(known)) or "none"
            raise ConfigurationError(
                f"job {job!r}: unknown limiter {name!r} (declared: {declared}); declare it first with "
                f"app.rate_limit({name!r}, rate, per) or app.concurrency_limit({name!r}, limit)")
    if len(set(names)) < len(names):
        raise ConfigurationError(f"job {job!r}: limits names a limiter twice: {list(names)}")
    return names


def _declared_limits(declaring: Declaring, limits: Any) -> tuple[str, ...]:
    known = cast("Mapping[str, Limiter]", declaring.named.get("limiters", {}))
    return job_limits(declaring.job, limits, known)


#: limiters (``app.rate_limit``/``app.concurrency_limit`` names) every run must hold (docs/flow-control.md)
LIMITS: JobOption[tuple[str, ...]] = JobOption("limits", (), _declared_limits)
