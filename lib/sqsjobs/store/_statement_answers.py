"""A ``BatchExecuteStatement``'s answers read as the single requests' (``store/_statements.py`` renders them).

Each statement's response becomes the ``Written`` its single request would
have given, or None when only that single request can decide: a refusal is
re-checked against the operation's rule, so a statement's extra guard never
answers for DynamoDB's condition (``store/_statements.py``, points 1-5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqsjobs.store import _rules as r
from sqsjobs.store._lease import Operation, Written
from sqsjobs.store._lease_ops import Acquire
from sqsjobs.store._statements import UPDATES

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseItem

#: per-statement codes that mean "the item is not what the statement expected" (the rest are failures)
REFUSALS = frozenset({"ConditionalCheckFailed", "DuplicateItem"})


def read(op: Operation, response: Mapping[str, Any], item: LeaseItem | None) -> Written | None:
    """``op``'s answer from its statement's ``response`` (``item``: its ``Error.Item``, read); None: send it alone.

    Example:
        >>> from sqsjobs.store._lease_ops import Complete
        >>> done = Complete(key="k", owner="a", expires_at=9.0)
        >>> read(done, {}, None).ok
        True
        >>> read(done, {"Error": {"Code": "ConditionalCheckFailed"}}, None).refused  # no item: nothing to fence
        True
        >>> read(done, {"Error": {"Code": "ThrottlingError", "Message": "slow down"}}, None).error
        'DynamoDB BatchExecuteStatement statement on k failed: ThrottlingError: slow down'
    """
    error = response.get("Error")
    if not error:
        return Written(key=op.key, ok=True)
    code = str(error.get("Code") or "")
    if code not in REFUSALS:
        return Written(key=op.key, ok=False,
                       error=f"DynamoDB BatchExecuteStatement statement on {op.key} failed: {code}: "
                             f"{error.get('Message', '')}")
    if not isinstance(op, UPDATES):  # an insert found an item: the single request decides (a takeover, past TTL)
        return None
    if op.rule().holds(item, op.values()):  # refused only by a statement's guard: the single request decides
        return None
    return Written(key=op.key, ok=False, item=item)


def refusal(op: Operation, item: LeaseItem | None) -> Written | None:
    """The refusal of a fresh ``Acquire`` whose ``INSERT`` met ``item`` (read after it), or None: send it alone.

    A refusal read from the item is safe to answer without a second write: a
    refused claim runs nothing, and an item that refuses it (DONE, held live,
    another job's) answers exactly what the conditional update would have.
    An item past its TTL, gone, or free is for the single request to take.

    Example:
        >>> from sqsjobs.store._lease import LeaseItem, LeaseState
        >>> take = Acquire(key="k", owner="b", now=10.0, lease_until=60.0, expires_at=99.0, fresh=True)
        >>> refusal(take, LeaseItem(key="k", state=LeaseState.DONE, expires_at=50.0)).refused
        True
        >>> refusal(take, LeaseItem(key="k", state=LeaseState.RELEASED, expires_at=50.0)) is None
        True
    """
    if item is None or not isinstance(op, Acquire):
        return None
    values = op.values()
    if item.past_ttl(values["now"]) or op.rule().holds(item, values):
        return None
    return Written(key=op.key, ok=False, item=item)


def guards_hold(op: Operation, item: LeaseItem | None) -> bool:
    """Whether a statement's own guards (an item, each added-to counter present) hold on ``item``.

    An ``attempts`` of 0 counts as missing: the table does not store it (``store/_dynamodb.py`` ``table_item``).

    Example:
        >>> from sqsjobs.store._lease import LeaseItem, LeaseState
        >>> from sqsjobs.store._lease_ops import Release
        >>> held = LeaseItem(key="k", state=LeaseState.HELD, owner="a")
        >>> give_back = Release(key="k", owner="a", expires_at=9.0, attempts_delta=-1)
        >>> guards_hold(give_back, held), guards_hold(Release(key="k", owner="a", expires_at=9.0), held)
        (False, True)
    """
    if item is None or isinstance(op, Acquire) or not isinstance(op, UPDATES):
        return item is not None
    return all(r.field_of(item, u.field) not in (None, 0) for u in op.rule().updates if isinstance(u, r.Add))
