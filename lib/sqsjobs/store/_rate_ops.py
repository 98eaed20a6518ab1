"""``TakeSlots``: a rate limiter's schedule advanced by one conditional write (a generic cell rate algorithm).

A rate limiter is one item (``limit#<name>#gcra``) holding one number, its
*theoretical arrival time* ``tat``: the earliest moment the next start may
happen. Start slots are ``interval`` apart (``sqsjobs.flow._schedule``);
reserving ``n`` of them moves ``tat`` by ``n x interval``, and the slots are
the ``n`` moments just before the new ``tat``. Two forms, each one
``UpdateItem`` whose condition decides, so concurrent writers never take a
slot twice and nobody reads first:

- *busy*: ``tat >= :now AND NOT tat > :latest``, then ``ADD tat :span``. ADD
  is applied on the stored value by DynamoDB itself, so any number of
  invocations may append to the schedule at once without reading it; the
  answer (``ReturnValues=ALL_NEW``) says where this write's slots ended;
- *idle*: the item is absent, or ``tat < :now`` (the schedule fell behind the
  clock: nobody is waiting), then ``SET tat = :now + :span``.

A refusal returns the item as it was (``ReturnValuesOnConditionCheckFailure``),
so the caller knows which form holds, or how much room the horizon leaves,
and tries once more. DynamoDB documents both forms (a condition expression
compares a number attribute with ``>=``/``<``; ``ADD`` on a number attribute
adds to it, treating a missing one as 0): the in-memory store evaluates the
same rule (``sqsjobs.store._rules``), stock moto answers it as DynamoDB does
(tests/integration/test_rate_schedule.py runs the contract on both). This
module must not import boto3 or pynamodb.
"""

from __future__ import annotations

import functools
from typing import Any

from sqsjobs._frozen import Value
from sqsjobs.store._lease_ops import RELEASED
from sqsjobs.store._rules import Add, Ge, Gt, ItemMissing, Lt, Missing, Not, Or, Param, Rule, Set, all_of

#: the item field holding the theoretical arrival time (seconds since the epoch)
TAT = "tat"


class TakeSlots(Value, kw_only=True):
    """Reserve start slots worth ``span`` seconds of a rate limiter's schedule, ``idle`` or ``busy`` form.

    ``latest`` is the furthest ``tat`` the busy form may leave (the horizon
    less ``span``): a schedule already that far ahead refuses it. The answer's
    item is the item after the write (its ``tat`` is where the slots end), or
    the one that refused it.

    Example:
        >>> from sqsjobs import InMemoryStore
        >>> store = InMemoryStore()
        >>> idle = TakeSlots(key="limit#ses#gcra", now=100.0, span=0.5, latest=200.0, expires_at=1e6, idle=True)
        >>> store.write(idle).item.get("tat")
        100.5
        >>> busy = TakeSlots(key="limit#ses#gcra", now=100.1, span=0.2, latest=200.0, expires_at=1e6, idle=False)
        >>> store.write(busy).item.get("tat")
        100.7
        >>> store.write(idle).ok  # the schedule is ahead of the clock: only the busy form holds
        False
    """

    key: str
    now: float
    span: float
    latest: float
    expires_at: float
    idle: bool

    def rule(self) -> Rule:
        return _idle_rule() if self.idle else _busy_rule()

    def values(self) -> dict[str, Any]:
        return {"now": self.now, "span": self.span, "latest": self.latest, "until": self.now + self.span,
                "expires_at": self.expires_at}


@functools.cache
def _busy_rule() -> Rule:
    return Rule(condition=all_of(Ge(TAT, Param("now")), Not(Gt(TAT, Param("latest")))),
                updates=(Add(TAT, Param("span")), Set("expires_at", Param("expires_at"))), returns="new")


@functools.cache
def _idle_rule() -> Rule:
    return Rule(condition=Or(ItemMissing(), Missing(TAT), Lt(TAT, Param("now"))),
                updates=(Set(TAT, Param("until")), Set("status", RELEASED), Set("expires_at", Param("expires_at"))),
                replaces_expired=True, returns="new")
