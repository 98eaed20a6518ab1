"""The DLQ page's data: dead letters grouped by job, reason and error, a few samples of each.

Read exactly as ``sqsjobs status`` reads them (a peek that makes every
message visible again, :func:`sqsjobs.ops._peek.peek`), filtered
exactly as ``sqsjobs redrive --job/--error`` filters them
(:func:`sqsjobs.ops._redrive.letter_matches`), so what the page lists is what a
redrive with the same filters moves. Letters are checked against the
idempotency table's evidence as everywhere else (:mod:`sqsjobs.ops._dlq_evidence`);
each shows its original message id, the one its job's logs know.

Example:
    >>> from sqsjobs.ops._dlq_evidence import read_letters
    >>> msg = {"MessageId": "m1", "Body": '{"job": "a", "args": {"id": 1}}', "MessageAttributes": {
    ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "permanent"}}}
    >>> messages = [msg, {**msg, "MessageId": "m2"}]
    >>> letters = read_letters(messages, records=None, now=0.0).letters
    >>> groups = group_with_samples(letters, messages, job=None, error=None)
    >>> [(g.group.job, g.group.reason, g.group.verified, g.group.count, len(g.samples)) for g in groups]
    [('a', 'permanent', False, 2, 2)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqsjobs.ops._dlq_evidence import read_letters
from sqsjobs.ops._peek import peek
from sqsjobs.ops._redrive_options import letter_matches
from sqsjobs.ops._status import read_queue_status
from sqsjobs.ops._status_report import DeadLetterGroup, QueueStatus, group_dead_letters

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from sqsjobs.console.sources import Sources
    from sqsjobs.ops._dlq_letters import DlqMessage

SAMPLES_PER_GROUP: Final = 3
BODY_CHARS: Final = 2000


@dataclass(frozen=True, kw_only=True)
class Sample:
    """One dead letter as the page shows it: the reason attributes and the start of its body."""

    letter: DlqMessage
    body: str
    truncated: bool


@dataclass(frozen=True, kw_only=True)
class LetterGroup:
    """A group of dead letters and a few of its members."""

    group: DeadLetterGroup
    samples: tuple[Sample, ...]


@dataclass(frozen=True, kw_only=True)
class DeadLetters:
    """The DLQ's depth, its letters by group (filtered), and what the filters can choose from."""

    dlq: QueueStatus
    groups: tuple[LetterGroup, ...]
    sampled: int
    matched: int
    jobs: tuple[str, ...]
    errors: tuple[str, ...]
    #: why the letters' reasons are their own claims, unverified (None: checked against the table)
    note: str | None = None

    @property
    def partial(self) -> bool:
        """True when the page shows a sample, not every letter."""
        return self.sampled < self.dlq.visible


def read_dead_letters(sources: Sources, dlq_url: str, *, sample: int, job: str | None,
                      error: str | None) -> DeadLetters:
    """Peek at most ``sample`` letters of ``dlq_url`` and group those that pass the filters."""
    with sources.dlq_lock:
        messages = peek(sources.sqs, dlq_url, max_messages=sample)
    reading = read_letters(messages, records=sources.records, now=sources.clock())
    letters = reading.letters
    status = read_queue_status(sources.sqs, dlq_url, cloudwatch_client=sources.cloudwatch, letters=letters,
                               clock=sources.clock)
    groups = group_with_samples(letters, messages, job=job, error=error)
    return DeadLetters(
        dlq=status,
        groups=groups,
        sampled=len(letters),
        matched=sum(g.group.count for g in groups),
        jobs=tuple(sorted({letter.job for letter in letters})),
        errors=tuple(sorted({letter.reason for letter in letters} | {e.error_type for e in letters if e.error_type})),
        note=reading.note if letters else None,
    )


def group_with_samples(letters: Sequence[DlqMessage], messages: Sequence[MessageTypeDef], *, job: str | None,
                       error: str | None) -> tuple[LetterGroup, ...]:
    """The ``letters`` (read from ``messages``, in order) that pass the filters, grouped, newest samples first."""
    pairs = [(letter, m.get("Body", "")) for letter, m in zip(letters, messages, strict=True)]
    kept = [(letter, body) for letter, body in pairs if letter_matches(letter, job=job, error_type=error)]
    out = []
    for group in group_dead_letters(letter for letter, _ in kept):
        members = [(letter, body) for letter, body in kept
                   if (letter.job, letter.reason, letter.error_type, letter.verified)
                   == (group.job, group.reason, group.error_type, group.verified)]
        members.sort(key=lambda pair: -(pair[0].sent_at or 0.0))
        samples = tuple(Sample(letter=letter, body=body[:BODY_CHARS], truncated=len(body) > BODY_CHARS)
                        for letter, body in members[:SAMPLES_PER_GROUP])
        out.append(LetterGroup(group=group, samples=samples))
    return tuple(out)
