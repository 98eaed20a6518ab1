"""A rate limiter's schedule: start slots ``interval`` apart, reserved ahead, and the reservation a job carries.

A rate limit of ``rate`` per ``per`` seconds is a generic cell rate algorithm
(GCRA) with no burst: one number per limiter, its theoretical arrival time
(``tat``, one item: ``sqsjobs.store._rate_ops``), and slots ``interval`` apart.
A batch reserves a slot for each of its jobs in one conditional write; each
job starts at its slot, never before it and at most ``grace`` after it. So
a start happens in ``[slot, slot + grace]``, slots are ``interval`` apart, and
the starts in any window ``[a, a + per)`` belong to slots in
``[a - grace, a + per)``: at most ``(per + grace) / interval = rate`` of them,
since ``interval = (per + grace) / rate``. The limit holds exactly, whatever the
clocks of the batches that took the slots; the price is a schedule
``grace / per`` slower than the rate (5 % at most: ``GRACE_SECONDS``).

A job whose slot is too far off to wait for in its batch is *deferred once, to
its slot*: a fresh copy of its message goes back with ``DelaySeconds`` that
bring it back just before the slot, and the slot itself in the attribute
``sqsjobs.slots`` (``carried``), so its next delivery starts at the slot with no
limiter call at all. A copy that comes back later than its slot's grace (a
crash, a slow poller) has lost it and takes a new one (a second deferral: the
model test counts them only under faults).

Example:
    >>> from sqsjobs.flow._limits import RateLimit
    >>> sms = RateLimit(name="sms", rate=10)
    >>> round(interval(sms), 4), grace(sms)
    (0.105, 0.05)
    >>> encode({"sms": 12.5, "ses": 3.25}), carried({"sqsjobs.slots": {"stringValue": "ses=3.25;sms=12.5"}})
    ('ses=3.25;sms=12.5', {'ses': 3.25, 'sms': 12.5})
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from sqsjobs.enqueue._message import ATTR_SLOTS
from sqsjobs.flow._limits import RateLimit

#: how late after its slot a start may be (less for short windows: a twentieth of ``per``)
GRACE_SECONDS = 0.05
#: a batch waits in the invocation for slots this close at most; later ones are deferred to their slot
WAIT_AHEAD_SECONDS = 2.0
#: a deferred copy comes back at least this long before its slot (its poller's latency)
RETURN_MARGIN_SECONDS = 0.5
#: a copy that carries its slot waits for it this long at most (its delay is whole seconds)
MAX_SLOT_WAIT_SECONDS = WAIT_AHEAD_SECONDS + RETURN_MARGIN_SECONDS + 1.0
#: how far ahead a schedule may be reserved (SQS's longest ``DelaySeconds``: a copy can wait that long)
HORIZON_SECONDS = 900.0
#: a container that saw the schedule full writes again only once this much of the horizon is free (a crowd of
#: invocations at a saturated limiter then refuses itself, instead of a refused write per batch on one item)
FULL_RETRY_SECONDS = 10.0


def grace(limit: RateLimit) -> float:
    """How late after its slot a start may happen."""
    return min(GRACE_SECONDS, limit.per / 20)


def interval(limit: RateLimit) -> float:
    """Seconds between two slots: ``(per + grace) / rate``, so ``rate`` starts per window hold with lateness."""
    return (limit.per + grace(limit)) / limit.rate


def slots_before(tat: float, count: int, limit: RateLimit) -> list[float]:
    """The ``count`` slots a write that left the schedule at ``tat`` reserved (earliest first).

    Example:
        >>> [round(s, 3) for s in slots_before(10.0, 3, RateLimit(name="x", rate=1, per=1.0))]
        [6.85, 7.9, 8.95]
    """
    step = interval(limit)
    return [tat - (count - i) * step for i in range(count)]


def return_delay(slot: float, now: float) -> int:
    """Whole seconds a deferred copy waits so that it is back just before ``slot`` (``RETURN_MARGIN_SECONDS``).

    Example:
        >>> return_delay(104.2, 100.0), return_delay(100.9, 100.0)
        (3, 0)
    """
    return max(0, min(int(HORIZON_SECONDS), math.floor(slot - now - RETURN_MARGIN_SECONDS)))


def encode(slots: Mapping[str, float]) -> str:
    """The ``sqsjobs.slots`` value: ``name=slot`` pairs, by name."""
    return ";".join(f"{name}={slots[name]!r}" for name in sorted(slots))


def carried(attributes: Mapping[str, Any]) -> dict[str, float]:
    """The slots a delivery's ``sqsjobs.slots`` attribute carries (a malformed one carries none)."""
    attr = attributes.get(ATTR_SLOTS)
    text = attr.get("stringValue") if isinstance(attr, dict) else None
    if not isinstance(text, str) or len(text) > 2048:
        return {}
    slots: dict[str, float] = {}
    for pair in text.split(";"):
        name, _, value = pair.partition("=")
        try:
            slot = float(value)
        except ValueError:
            return {}
        if not math.isfinite(slot):
            return {}
        slots[name] = slot
    return slots
