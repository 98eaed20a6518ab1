"""What a redrive reports: counts, skip reasons, dry-run lines and one line per letter worth a look.

:class:`~sqsjobs.ops._redrive.Redrive` fills a :class:`RedriveSummary`; the CLI
prints it and the redrive Lambda returns it as JSON. Counts say how much
happened; a :class:`LetterNote` says which letter and why, for what the counts
alone cannot explain (an unreadable attribute, a target that is not a source
queue of the DLQ, a letter older than the idempotency records).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Literal

from sqsjobs._settings import DEFAULT_RECORD_TTL

if TYPE_CHECKING:
    from collections.abc import Mapping

StopReason = Literal["drained", "scanned", "max", "deadline", "error", "interrupted", "running"]


class SkipReason(StrEnum):
    """Why a dead letter stayed in the DLQ (the keys of ``RedriveSummary.skipped``).

    Example:
        >>> SkipReason.POISON_SUSPECT == "poison-suspect"
        True
    """

    #: did not match ``--job``/``--error``
    FILTERED = "filtered"
    #: redriven ``--max-redrives`` times already
    POISON = "poison"
    #: its redrive count is unreadable: treated as at the limit
    POISON_SUSPECT = "poison-suspect"
    #: a body no job can read, with ``--skip-malformed``
    MALFORMED = "malformed"
    #: no ``sqsjobs.source_queue`` and the DLQ serves several queues
    NO_SOURCE = "no-source"
    #: its ``sqsjobs.source_queue`` is not a source queue of this DLQ
    NOT_A_SOURCE = "not-a-source"
    #: its target refused an earlier send of this run
    TARGET_UNREACHABLE = "target-unreachable"
    #: one more attribute (the redrive count) would exceed SQS's 10
    TOO_MANY_ATTRIBUTES = "too-many-attributes"
    #: moved by this run, failed and dead-lettered again while the run went on
    FAILED_AGAIN = "failed-again"
    #: its key was cancelled (``app.cancel``) after it was dead-lettered: a replay would not run anyway
    CANCELLED = "cancelled"


class NoteKind(StrEnum):
    """What a :class:`LetterNote` is about.

    Example:
        >>> str(NoteKind.OLDER_THAN_RECORD_TTL)
        'older-than-record-ttl'
    """

    #: an ``sqsjobs.*`` counter or time that is not a bounded whole number
    MALFORMED_ATTRIBUTE = "malformed-attribute"
    #: ``sqsjobs.*`` reason attributes on a letter no evidence proves (ignored)
    UNTRUSTED_ATTRIBUTE = "untrusted-attribute"
    #: sent back, but its redrive count could not be written: it stays in the DLQ
    COUNT_UNRECORDED = "count-unrecorded"
    #: ``sqsjobs.source_queue`` names a queue that does not dead-letter into this DLQ
    NOT_A_SOURCE = "not-a-source"
    #: the target refused the send (missing queue, no permission, KMS...)
    TARGET_UNREACHABLE = "target-unreachable"
    #: first delivered longer ago than the record TTL: a completed job may run again
    OLDER_THAN_RECORD_TTL = "older-than-record-ttl"
    #: the key's job record could not be read (cancelled letters cannot be told apart)
    RECORD_UNREADABLE = "record-unreadable"


@dataclass(frozen=True, kw_only=True)
class PlannedMove:
    """A dry-run line: what would happen to one dead letter.

    ``action`` is ``move``, ``skip:<reason>``, or ``delete:duplicate`` for a
    second DLQ copy of a letter that moves. ``message_id`` is the original
    message id (the one the job's logs know). ``redrive_count`` is ``None``
    when the letter's count is unreadable; ``verified`` is False when reason
    and count are the letter's own claims (no idempotency table).

    Example:
        >>> PlannedMove(message_id="m1", job="a", reason="exhausted", error_type="TimeoutError",
        ...             age_seconds=5.0, redrive_count=0, action="move", target="q").action
        'move'
    """

    message_id: str
    job: str
    reason: str
    error_type: str
    age_seconds: float | None
    redrive_count: int | None
    action: str
    target: str | None
    verified: bool = True


@dataclass(frozen=True, kw_only=True)
class LetterNote:
    """One line about one dead letter (``message_id``: its original message id, as its job's logs show it).

    Example:
        >>> LetterNote(message_id="m1", job="a", kind=NoteKind.NOT_A_SOURCE, detail="x").line()
        'm1 (a) not-a-source: x'
    """

    message_id: str
    job: str
    kind: NoteKind
    detail: str

    def line(self) -> str:
        """The note as one line of text."""
        return f"{self.message_id} ({self.job}) {self.kind}: {self.detail}"


@dataclass(frozen=True, kw_only=True)
class RedriveSummary:
    """What a redrive did: moved, skipped by reason, failed, and what is left.

    ``left`` is the DLQ's approximate depth (visible + in flight) after the
    run, or None when it could not be read. ``stopped`` says why the run ended.
    ``duplicates`` counts extra DLQ copies of a letter (the same original
    message, as their evidence says) deleted once their twin was sent back (in
    a dry run: that would be). ``older_than_record_ttl`` counts letters moved (or
    that would move) whose first delivery is older than the idempotency
    records live; ``malformed_attributes`` counts letters with at least one
    unreadable ``sqsjobs.*`` attribute. ``counts_unrecorded`` counts letters
    sent back whose redrive count could not be written: they stay in the DLQ.
    ``unverified`` says why reasons and counts are the letters' own claims
    (no idempotency table, or it could not be read); None when they were
    checked. ``target_errors`` names each target that refused a send, with
    the error; the run goes on with the others.

    Example:
        >>> RedriveSummary(dlq_url="u", dry_run=False, moved=3).to_dict()["moved"]
        3
    """

    dlq_url: str
    dry_run: bool
    moved: int = 0
    matched: int = 0
    skipped: Mapping[str, int] = field(default_factory=dict)
    failed: int = 0
    delete_failed: int = 0
    duplicates: int = 0
    older_than_record_ttl: int = 0
    malformed_attributes: int = 0
    counts_unrecorded: int = 0
    unverified: str | None = None
    record_ttl: float = DEFAULT_RECORD_TTL
    target_errors: Mapping[str, str] = field(default_factory=dict)
    left: int | None = None
    stopped: StopReason = "running"
    error: str | None = None
    planned: tuple[PlannedMove, ...] = ()
    notes: tuple[LetterNote, ...] = ()

    @property
    def ok(self) -> bool:
        """True when nothing failed and the run was not cut short by an error."""
        return self.failed == 0 and self.delete_failed == 0 and self.counts_unrecorded == 0 and self.error is None

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (the Lambda's return value and ``--json`` output)."""
        data = asdict(self)
        data["skipped"] = {str(k): v for k, v in self.skipped.items()}
        data["target_errors"] = dict(self.target_errors)
        data["planned"] = [asdict(p) for p in self.planned]
        data["notes"] = [{**asdict(n), "kind": str(n.kind)} for n in self.notes]
        data["ok"] = self.ok
        return data


@dataclass(kw_only=True)
class RedriveCounts:
    """What a redrive run counts and notes as it goes; :meth:`summary` freezes it with the run's own facts.

    Example:
        >>> counts = RedriveCounts(moved=2)
        >>> counts.skipped["poison"] += 1
        >>> counts.summary(dlq_url="u", dry_run=False).to_dict()["skipped"]
        {'poison': 1}
    """

    moved: int = 0
    matched: int = 0
    failed: int = 0
    delete_failed: int = 0
    duplicates: int = 0
    older_than_record_ttl: int = 0
    malformed_attributes: int = 0
    counts_unrecorded: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    planned: list[PlannedMove] = field(default_factory=list)
    notes: list[LetterNote] = field(default_factory=list)

    def summary(self, *, dlq_url: str, dry_run: bool, **run: Any) -> RedriveSummary:
        """The :class:`RedriveSummary` of these counts; ``run`` holds the rest (``left``, ``stopped``, ``error``...)."""
        return RedriveSummary(dlq_url=dlq_url, dry_run=dry_run, moved=self.moved, matched=self.matched,
                              skipped=dict(self.skipped), failed=self.failed, delete_failed=self.delete_failed,
                              duplicates=self.duplicates, older_than_record_ttl=self.older_than_record_ttl,
                              malformed_attributes=self.malformed_attributes, counts_unrecorded=self.counts_unrecorded,
                              planned=tuple(self.planned), notes=tuple(self.notes), **run)
