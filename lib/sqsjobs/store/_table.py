"""The idempotency table's item, as one pynamodb model.

Every item of the table is a lease (``sqsjobs.store._lease``): a job's record (key =
the job key), a scheduled job's period lock (``lock#...``), a chunked run's
checkpoint (``run#...``), or a group's and a chain's records (``group#...``,
``chain#...``: settled items nobody acquires, see ``sqsjobs.workflows._groups`` and
``sqsjobs.workflows._chains``), or the DLQ's evidence (``dlq#...``, ``redrive#...``: see
``sqsjobs.worker._dead_letters``). They share the lease attributes and each kind adds its
own; the model lists them all, so it is the schema of the whole table (names,
types, the TTL attribute) in one place.

The model never talks to DynamoDB itself: the DynamoDB store builds its
requests through the model's attributes and sends them with the injected
boto3 client, so tests can count and stub every call. The batched statements
(store/_statements.py) serialize each value with ``wire``: the attribute's
own ``serialize``, with a number's JSON text made directly (``json.dumps``
is most of a number's cost), so no model instance is built per message.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from pynamodb.attributes import BooleanAttribute, NumberAttribute, NumberSetAttribute, UnicodeAttribute
from pynamodb.models import Model

from sqsjobs.store._item import LeaseItem
from sqsjobs.store._rules import LEASE_FIELDS

KEY_ATTRIBUTE = "pk"
TTL_ATTRIBUTE = "expires_at"


class TableItem(Model):
    """One item of the idempotency table.

    Example:
        >>> item = TableItem.from_raw_data({"pk": {"S": "invoice-email:42"}, "status": {"S": "DONE"},
        ...                                 "attempts": {"N": "1"}})
        >>> item.pk, item.status, item.attempts
        ('invoice-email:42', 'DONE', 1)
    """

    class Meta:
        # Requests carry the real table name per call; pynamodb wants one to build them.
        table_name = "sqsjobs"
        region = "us-east-1"

    # -- the lease (sqsjobs.store._lease): every item has these
    pk = UnicodeAttribute(hash_key=True, attr_name=KEY_ATTRIBUTE)
    status = UnicodeAttribute()
    owner = UnicodeAttribute(null=True)
    lease_until = NumberAttribute(null=True)
    #: epoch seconds; DynamoDB TTL deletes the item some time after
    expires_at = NumberAttribute(null=True, attr_name=TTL_ATTRIBUTE)
    #: what the lease was taken for (a job record: a hash of the job and its arguments)
    fingerprint = UnicodeAttribute(null=True)
    #: the job version the fingerprint was computed at (fingerprints of other versions are not compared)
    fp_version = NumberAttribute(null=True)
    #: how many times the lease was acquired to run (a job record: attempts that started)
    attempts = NumberAttribute(null=True)

    # -- a job's record (sqsjobs.worker._job_records)
    job = UnicodeAttribute(null=True)
    outcome = UnicodeAttribute(null=True)
    last_error = UnicodeAttribute(null=True)
    result = UnicodeAttribute(null=True)
    enqueued_at = NumberAttribute(null=True)
    started_at = NumberAttribute(null=True)
    finished_at = NumberAttribute(null=True)
    updated_at = NumberAttribute(null=True)
    #: the SQS message id this record's job was dead-lettered with (a redelivery of it is not run again)
    dead_letter_of = UnicodeAttribute(null=True)
    #: every message it was dead-lettered with, as numbers (store/_lease_ops.py LETTERS): no copy of one runs it
    letters = NumberSetAttribute(null=True)
    cancel_requested = BooleanAttribute(null=True)
    #: a scheduled job's record: the period its tick claimed (schedules/_period_locks.py)
    period = UnicodeAttribute(null=True)
    reason = UnicodeAttribute(null=True)
    #: ``attempts`` when the job was last dead-lettered: a redrive starts counting afresh from there
    spent_attempts = NumberAttribute(null=True)

    #: a group member's record: the terminal outcome its group counted (so nothing counts it twice)
    counted_as = UnicodeAttribute(null=True)

    # -- a group (sqsjobs.workflows._groups): its head (group#<id>), its counter shards and its member lists
    name = UnicodeAttribute(null=True)
    #: running, succeeded, completed_with_failures or cancelled
    group_state = UnicodeAttribute(null=True)
    #: members of the group (head) or steps of the chain
    total = NumberAttribute(null=True)
    shards = NumberAttribute(null=True)
    member_pages = NumberAttribute(null=True)
    created_at = NumberAttribute(null=True)
    cancelled_at = NumberAttribute(null=True)
    #: the callbacks' messages (JSON), and when each was sent
    on_success = UnicodeAttribute(null=True)
    on_complete = UnicodeAttribute(null=True)
    on_success_sent = NumberAttribute(null=True)
    on_complete_sent = NumberAttribute(null=True)
    #: a shard's counts: members not yet terminal, and members by terminal outcome
    members_pending = NumberAttribute(null=True)
    members_succeeded = NumberAttribute(null=True)
    members_dead_lettered = NumberAttribute(null=True)
    members_cancelled = NumberAttribute(null=True)
    members_expired = NumberAttribute(null=True)
    #: a shard's members (their index in the group) counted so far, and those counted as dead-lettered
    counted = NumberSetAttribute(null=True)
    failed = NumberSetAttribute(null=True)
    #: a member list page: the members' keys (JSON)
    members = UnicodeAttribute(null=True)

    # -- a chain (sqsjobs.workflows._chains): chain#<id>
    #: the steps' messages (JSON)
    steps = UnicodeAttribute(null=True)

    # -- a dead letter's evidence (sqsjobs.worker._dead_letters): dlq#<the DLQ copy's message id>
    #: the message id the worker dead-lettered (what its logs and its job's record know)
    original_message_id = UnicodeAttribute(null=True)
    #: the job key (``pk`` is the evidence's own key)
    job_key = UnicodeAttribute(null=True)
    error_type = UnicodeAttribute(null=True)
    error_message = UnicodeAttribute(null=True)
    #: the attempt that was dead-lettered (``attempts`` is the lease's own counter)
    attempts_made = NumberAttribute(null=True)
    source_queue = UnicodeAttribute(null=True)
    #: epoch milliseconds
    first_receive_time = NumberAttribute(null=True)

    # -- a redrive's count (sqsjobs.ops._redrive): redrive#<the message id the redrive's send got>
    redrive_count = NumberAttribute(null=True)
    #: the original message id of the letter that was sent back
    redriven_from = UnicodeAttribute(null=True)

    # -- a chunked run's checkpoint (sqsjobs.workflows._chunked)
    run_id = UnicodeAttribute(null=True)
    #: cursors are JSON text, so 0, "0" and null stay different values
    cursor = UnicodeAttribute(null=True)
    prev_cursor = UnicodeAttribute(null=True)
    pages_done = NumberAttribute(null=True)
    # -- a debounced key (sqsjobs.enqueue._debounce): the latest burst's token, when it is due, how many
    # requests it coalesced (a running total), the token the key's last claim was for, and what completed
    debounce_token = UnicodeAttribute(null=True)
    debounce_due = NumberAttribute(null=True)
    debounce_count = NumberAttribute(null=True)
    debounce_base = NumberAttribute(null=True)
    ran_token = UnicodeAttribute(null=True)
    #: the burst whose run last completed (its copies are duplicates; worker/_request.py)
    completed_token = UnicodeAttribute(null=True)
    #: the key's requests without a burst token that completed (a member, a step: worker/_request.py)
    ran_requests = NumberSetAttribute(null=True)
    # -- a workflow awaiting a request or a group (sqsjobs.workflows._callback_stage): the callbacks told (their
    # digests), what the last was told and when, a note when a workflow was told before (a redrive) or had closed
    callbacks_told = NumberSetAttribute(null=True)
    callback_told = UnicodeAttribute(null=True)
    callback_told_at = NumberAttribute(null=True)
    callback_note = UnicodeAttribute(null=True)
    #: a group's head: the callback awaiting the whole group (its envelope wire, JSON), and when it was told
    workflow_callback = UnicodeAttribute(null=True)
    workflow_callback_told = NumberAttribute(null=True)
    # -- a deduplicated key (sqsjobs.enqueue._debounce): the request that holds it, and until when at most
    queued_id = UnicodeAttribute(null=True)
    queued_until = NumberAttribute(null=True)
    queued_mode = UnicodeAttribute(null=True)
    # -- a rate limiter's schedule (sqsjobs.store._rate_ops): limit#<name>#gcra
    #: its theoretical arrival time: the earliest start the next reserved slot may have (epoch seconds)
    tat = NumberAttribute(null=True)


#: attribute name in the table -> the model's attribute, for serializing values by name
ATTRIBUTES: Mapping[str, Any] = {attr.attr_name: attr for attr in TableItem.get_attributes().values()}
#: the model's Python names (what lease data is keyed by) -> attribute
FIELDS: Mapping[str, Any] = dict(TableItem.get_attributes())


def field_names() -> frozenset[str]:
    """Every field an item may hold (Python names).

    Example:
        >>> {"pk", "status", "cursor"} <= field_names()
        True
    """
    return frozenset(FIELDS)


def table_item(new: LeaseItem) -> TableItem:
    """The table's model of a whole item (what ``PutItem`` writes, and what an ``INSERT``'s item means)."""
    item = TableItem(new.key)
    item.status = new.state.value
    for name in LEASE_FIELDS - {"status"}:
        value = stored(name, getattr(new, name))
        if value is not None:
            setattr(item, name, value)
    for name, value in new.data.items():
        setattr(item, name, stored(name, value))
    return item


def stored(name: str, value: Any) -> Any:
    """What the item holds for field ``name`` of a ``LeaseItem`` (None: nothing): no ``attempts`` of 0, sets as sets.

    Example:
        >>> stored("attempts", 0), stored("counted", frozenset({1}))
        (None, {1})
    """
    if name == "attempts" and value == 0:
        return None
    return set(value) if isinstance(value, frozenset) else value


def wire_kind(name: str) -> str:
    """The DynamoDB type of field ``name`` (``S``, ``N``, ``BOOL``, ``NS``).

    Example:
        >>> wire_kind("owner"), wire_kind("counted")
        ('S', 'NS')
    """
    return str(model_attribute(name).attr_type)


def wire(name: str) -> Callable[[Any], dict[str, Any]]:
    """A function giving a value of field ``name`` as DynamoDB's attribute value, as the model serializes it.

    Exactly ``{attr_type: attribute.serialize(value)}``; a number attribute's
    ``int`` or finite ``float`` is written as ``json.dumps`` writes it
    (``repr``) without the call. A value of another type goes to ``serialize``.

    Example:
        >>> wire("expires_at")(99.0), wire("attempts")(2), wire("owner")("a"), wire("cancel_requested")(True)
        ({'N': '99.0'}, {'N': '2'}, {'S': 'a'}, {'BOOL': True})
    """
    attribute = model_attribute(name)
    kind: str = attribute.attr_type
    serialize: Callable[[Any], Any] = attribute.serialize
    if kind != "N":
        return lambda value: {kind: serialize(value)}
    isfinite = math.isfinite

    def number(value: Any) -> dict[str, Any]:
        if type(value) is int:
            return {"N": int.__repr__(value)}
        if type(value) is float and isfinite(value):
            return {"N": float.__repr__(value)}
        return {"N": serialize(value)}

    return number


def whole_item(new: LeaseItem) -> dict[str, Any]:
    """``new`` as DynamoDB's attribute values, the key first, built through the model.

    What a batched ``INSERT`` binds column by column without a model (store/_statements.py), and the
    reference it is checked against (tests/unit/test_statement_binding.py).

    Example:
        >>> from sqsjobs.store._item import LeaseItem, LeaseState
        >>> whole_item(LeaseItem(key="k", state=LeaseState.HELD, owner="a"))
        {'pk': {'S': 'k'}, 'owner': {'S': 'a'}, 'status': {'S': 'HELD'}}
    """
    raw: dict[str, Any] = table_item(new).serialize()
    return {KEY_ATTRIBUTE: raw.pop(KEY_ATTRIBUTE), **raw}


def model_attribute(name: str) -> Any:
    """The model attribute of a field (``pk``, a lease field or a data field)."""
    if name == KEY_ATTRIBUTE:
        return TableItem.pk
    attribute = FIELDS.get(name)
    if attribute is None:
        raise ValueError(f"{name!r} is not a data field of the idempotency table (store/_table.py)")
    return attribute
