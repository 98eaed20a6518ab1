"""Which dead letters a redrive moves: the per-letter rules, and the notes a letter earns.

A letter stays in the DLQ when it failed again during this run, does not
match the filters, is malformed (and ``malformed="skip"``), belongs to a
cancelled key (its job record says so), or looks like poison (its redrive
count, from the idempotency table, at the limit or unreadable) unless forced.
:class:`sqsjobs.ops._redrive.Redrive` asks these and keeps the counts. Only
:func:`cancelled` reads the table; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from sqsjobs._errors import StoreError
from sqsjobs.ops._dlq_letters import ignored_line
from sqsjobs.ops._redrive_options import RedriveOptions, letter_matches
from sqsjobs.ops._redrive_report import NoteKind, SkipReason
from sqsjobs.store._lease import LeaseState, is_reserved
from sqsjobs.worker._job_records import JobState

if TYPE_CHECKING:
    from sqsjobs.ops._dlq_letters import DlqMessage
    from sqsjobs.store._lease import LeaseStore

__all__ = ["age_note", "attribute_notes", "cancelled", "skip_reason"]

DAY: Final = 86400.0


def skip_reason(letter: DlqMessage, options: RedriveOptions, *, sent_ids: set[str],
                cancelled: Callable[[DlqMessage], bool]) -> SkipReason | None:
    """Why ``letter`` stays in the DLQ, or None when it moves (``cancelled`` is asked only when it would move).

    Example:
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> letter = DlqMessage.from_message({"MessageId": "m", "Body": '{"job": "a"}'}, now=0.0)
        >>> never = lambda _letter: False
        >>> skip_reason(letter, RedriveOptions(dlq="d", job="b"), sent_ids=set(), cancelled=never).value
        'filtered'
        >>> skip_reason(letter, RedriveOptions(dlq="d", force=True), sent_ids=set(), cancelled=never) is None
        True
    """
    opts = options
    named = {letter.message_id, letter.copy_of, letter.original_message_id, letter.named_original_id}
    if sent_ids and named & sent_ids:
        # A live worker can fail and dead-letter a replay within seconds;
        # moving it again in the same run would spin it through the queue
        # until the poison guard stops it.
        return SkipReason.FAILED_AGAIN
    if not letter_matches(letter, job=opts.job, error_type=opts.error_type):
        return SkipReason.FILTERED
    if letter.malformed and opts.malformed == "skip":
        return SkipReason.MALFORMED
    if cancelled(letter):
        return SkipReason.CANCELLED
    if opts.force:
        return None
    if letter.redrive_count is None:
        return SkipReason.POISON_SUSPECT
    if letter.redrive_count >= opts.max_redrives:
        return SkipReason.POISON
    return None


def cancelled(records: LeaseStore | None, letter: DlqMessage) -> tuple[bool, str | None]:
    """Whether the letter's key was cancelled (its job record says so), and why that could not be read, if so.

    One read per letter with a key; without ``records`` nothing is cancelled.

    Example:
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> cancelled(None, DlqMessage.from_message({"MessageId": "m", "Body": '{"key": "k"}'}, now=0.0))
        (False, None)
    """
    if records is None or letter.key is None:
        return False, None
    if is_reserved(letter.key):
        return False, None
    try:
        record = records.get(letter.key)
    except StoreError as error:
        return False, f"its key's record could not be read: {error}"
    return (record is not None and record.state is LeaseState.DONE
            and record.get("outcome") == JobState.CANCELLED.value), None


def attribute_notes(letter: DlqMessage) -> list[tuple[NoteKind, str]]:
    """The notes a letter's malformed or untrusted ``sqsjobs.*`` attributes earn (empty for a clean letter).

    Example:
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> attribute_notes(DlqMessage.from_message({"MessageId": "m", "Body": "{}"}, now=0.0))
        []
    """
    notes = []
    for problem in letter.bad_attributes:
        detail = problem.line()
        if letter.poison_suspect and problem.name.endswith("redrive_count"):
            detail += " (poison-suspect: stays unless --force)"
        notes.append((NoteKind.MALFORMED_ATTRIBUTE, detail))
    if letter.ignored_attributes:
        notes.append((NoteKind.UNTRUSTED_ATTRIBUTE, ignored_line(letter)))
    return notes


def age_note(letter: DlqMessage, record_ttl: float) -> str | None:
    """The note for a letter first delivered longer ago than records live (a replay may run it again); else None.

    Example:
        >>> from sqsjobs.ops._dlq_letters import DlqMessage
        >>> age_note(DlqMessage.from_message({"MessageId": "m", "Body": "{}"}, now=0.0), DAY) is None
        True
    """
    age = letter.delivery_age_seconds
    if age is None or age <= record_ttl:
        return None
    return (f"first delivered {age / DAY:.1f} days ago, longer than idempotency records live "
            f"({record_ttl / DAY:g} days): if the job completed meanwhile, this replay runs it again")
