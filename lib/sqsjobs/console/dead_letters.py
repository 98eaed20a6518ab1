"""The DLQ page's data: dead letters grouped by job, reason and error, a few samples of each.

Read exactly as ``sqsjobs status`` reads them (a peek that makes every
message visible again, :func:`sqsjobs.ops._status.peek_dead_letters`), filtered
exactly as ``sqsjobs redrive --job/--error`` filters them
(:func:`sqsjobs.ops._redrive.letter_matches`), so what the page lists is what a
redrive with the same filters moves.

Example:
    >>> msg = {"MessageId": "m1", "Body": '{"job": "a", "args": {"id": 1}}', "MessageAttributes": {
    ...     "sqsjobs.reason": {"DataType": "String", "StringValue": "permanent"}}}
    >>> groups = group_with_samples([msg, {**msg, "MessageId": "m2"}], now=0.0, job=None, error=None)
    >>> [(g.group.job, g.group.reason, g.group.count, len(g.samples)) for g in groups]
    [('a', 'permanent', 2, 2)]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqsjobs.ops._dlq_letters import DlqMessage
from sqsjobs.ops._redrive import letter_matches
from sqsjobs.ops._status import DeadLetterGroup, QueueStatus, group_dead_letters, peek_dead_letters, read_queue_status

if TYPE_CHECKING:
    from mypy_boto3_sqs.type_defs import MessageTypeDef

    from sqsjobs.console.sources import Sources

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

    @property
    def partial(self) -> bool:
        """True when the page shows a sample, not every letter."""
        return self.sampled < self.dlq.visible


def read_dead_letters(sources: Sources, dlq_url: str, *, sample: int, job: str | None,
                      error: str | None) -> DeadLetters:
    """Peek at most ``sample`` letters of ``dlq_url`` and group those that pass the filters."""
    with sources.dlq_lock:
        messages = peek_dead_letters(sources.sqs, dlq_url, sample=sample)
    now = sources.clock()
    letters = [DlqMessage.from_message(m, now=now) for m in messages]
    status = read_queue_status(sources.sqs, dlq_url, cloudwatch_client=sources.cloudwatch, letters=letters,
                               clock=sources.clock)
    groups = group_with_samples(messages, now=now, job=job, error=error)
    return DeadLetters(
        dlq=status,
        groups=groups,
        sampled=len(letters),
        matched=sum(g.group.count for g in groups),
        jobs=tuple(sorted({letter.job for letter in letters})),
        errors=tuple(sorted({letter.reason for letter in letters} | {e.error_type for e in letters if e.error_type})),
    )


def group_with_samples(messages: Sequence[MessageTypeDef], *, now: float, job: str | None,
                       error: str | None) -> tuple[LetterGroup, ...]:
    """The letters among ``messages`` that pass the filters, grouped, newest samples first."""
    letters = [(DlqMessage.from_message(m, now=now), m.get("Body", "")) for m in messages]
    kept = [(letter, body) for letter, body in letters if letter_matches(letter, job=job, error_type=error)]
    out = []
    for group in group_dead_letters(letter for letter, _ in kept):
        members = [(letter, body) for letter, body in kept
                   if (letter.job, letter.reason, letter.error_type) == (group.job, group.reason, group.error_type)]
        members.sort(key=lambda pair: -(pair[0].sent_at or 0.0))
        samples = tuple(Sample(letter=letter, body=body[:BODY_CHARS], truncated=len(body) > BODY_CHARS)
                        for letter, body in members[:SAMPLES_PER_GROUP])
        out.append(LetterGroup(group=group, samples=samples))
    return tuple(out)
