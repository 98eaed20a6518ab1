"""Reading DLQ letters against the idempotency table: which the worker wrote, and how often each was redriven.

Every reader of the DLQ (``sqsjobs status``, ``sqsjobs redrive``, the console,
the redrive Lambda, ``app.testing()``) goes through :func:`read_letters`, so a
letter means the same thing everywhere. It makes two batched reads
(``BatchGetItem``, 100 keys a call, through the store's ``get_many``):

1. the evidence of every letter, ``dlq#<its DLQ message id>``: the worker
   wrote it, after SQS gave the DLQ copy that id, so nothing a sender sets can
   name it. It says which message the letter is a copy of;
2. the redrive count of each letter's honest original id,
   ``redrive#<original message id>`` (the evidence's original, else the
   letter's own id: SQS's own move keeps the message id).

Without a store, or when the table cannot be read, every letter is
*unchecked*: shown with its attributes' claims, marked unverified, and
:attr:`LetterReading.note` says so once.

Example:
    >>> from sqsjobs.store._memory import InMemoryStore
    >>> msg = {"MessageId": "d1", "Body": '{"job": "a"}', "MessageAttributes": {
    ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "permanent"}}}
    >>> reading = read_letters([msg], records=InMemoryStore(), now=0.0)
    >>> [(letter.reason, letter.provenance.value) for letter in reading.letters], reading.note
    ([('none', 'unproven')], None)
    >>> read_letters([msg], records=None, now=0.0).letters[0].reason
    'permanent'
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqsjobs._errors import StoreError
from sqsjobs.ops._dlq_letters import DlqMessage, TableFacts
from sqsjobs.worker._dead_letters import Evidence, evidence_key, redrive_count_of, redrive_key

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from sqsjobs.store._lease import LeaseStore

#: the one line a reading without the table carries
UNCHECKED_NOTE: Final = ("no idempotency table (--table or SQSJOBS_TABLE): the DLQ's reasons, errors and redrive "
                         "counts are each letter's own attributes, which any sender can forge; they are shown "
                         "marked unverified")


@dataclass(frozen=True, kw_only=True)
class LetterReading:
    """The letters read, in the order given, and the one note when they could not be checked."""

    letters: tuple[DlqMessage, ...]
    #: None when every letter was checked against the table
    note: str | None = None

    @property
    def checked(self) -> bool:
        """True when the table was read: every letter is proven by evidence or reads ``none``."""
        return self.note is None


def read_letters(messages: Sequence[MessageTypeDef], *, records: LeaseStore | None, now: float) -> LetterReading:
    """Each message as a :class:`DlqMessage`, with what ``records`` (the idempotency table) says of it."""
    if records is None:
        return LetterReading(letters=_unchecked(messages, now), note=UNCHECKED_NOTE)
    ids = [m.get("MessageId", "") for m in messages]
    try:
        found = records.get_many([evidence_key(i) for i in ids])
        evidence = {i: Evidence.from_item(item) if (item := found.get(evidence_key(i))) else None for i in ids}
        originals = {i: e.original_message_id if (e := evidence[i]) else i for i in ids}
        counts = records.get_many([redrive_key(o) for o in dict.fromkeys(originals.values())])
    except StoreError as error:
        note = f"could not read the DLQ's evidence from the idempotency table ({error}): " + UNCHECKED_NOTE[
            UNCHECKED_NOTE.index("the DLQ's"):]
        return LetterReading(letters=_unchecked(messages, now), note=note)
    return LetterReading(letters=tuple(
        DlqMessage.from_message(m, now=now, facts=TableFacts(
            evidence=evidence[i], redrive_count=redrive_count_of(counts.get(redrive_key(originals[i])))))
        for m, i in zip(messages, ids, strict=True)))


def _unchecked(messages: Sequence[MessageTypeDef], now: float) -> tuple[DlqMessage, ...]:
    return tuple(DlqMessage.from_message(m, now=now) for m in messages)
