"""Where a dead letter may be redriven: the DLQ's own source queues, nowhere a message chooses.

The queues whose redrive policy names the DLQ (``ListDeadLetterSourceQueues``)
are the targets a redrive may pick by itself; the redrive Lambda's
``SQSJOBS_QUEUE_URL`` stands in only when the DLQ has no source at all (its
redrive policy was removed). A letter's ``sqsjobs.source_queue`` chooses among
those targets and nothing else: a value naming any other queue (forged, or a
queue the DLQ no longer serves) leaves the letter in the DLQ with a note. Only
the operator's ``--to`` sends anywhere else.

A target that refuses a send (deleted, no permission, a KMS key it cannot
use) is marked unreachable for the rest of the run: its letters stay in the
DLQ, each with a note, and the other targets' letters still move.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqsjobs.enqueue._addresses import queue_identity, queue_name
from sqsjobs.ops._queues import dead_letter_sources
from sqsjobs.ops._redrive_report import SkipReason

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient

    from sqsjobs.ops._dlq_letters import DlqMessage


class RedriveTargets:
    """Picks each letter's target and remembers which targets failed (one instance per redrive run)."""

    def __init__(self, sqs_client: SQSClient, dlq_url: str, *, to: str | None, default_to: str | None) -> None:
        self._sqs = sqs_client
        self._dlq_url = dlq_url
        self._to = to
        self._default_to = default_to
        self._allowed: list[str] | None = None
        #: target URL -> the error that made it unreachable
        self.unreachable: dict[str, str] = {}

    def allowed(self) -> list[str]:
        """The targets a letter may name: the DLQ's source queues, else the configured default."""
        if self._allowed is None:
            sources = list(dead_letter_sources(self._sqs, self._dlq_url))
            self._allowed = sources or ([self._default_to] if self._default_to else [])
        return self._allowed

    def choose(self, letter: DlqMessage) -> tuple[str | None, SkipReason | None]:
        """``(target, None)``, or ``(None, why)``; :meth:`skip_detail` gives the note a skip deserves."""
        target, reason = self._choose(letter)
        if target is not None and target in self.unreachable:
            return None, SkipReason.TARGET_UNREACHABLE
        return target, reason

    def skip_detail(self, letter: DlqMessage, reason: SkipReason) -> str | None:
        """The note a skip deserves (None for the ones the counts explain)."""
        if reason == SkipReason.NOT_A_SOURCE:
            names = ", ".join(queue_name(t) for t in self.allowed()) or "none"
            return (f"sqsjobs.source_queue {letter.source_queue!r} is not a source queue of this DLQ "
                    f"(sources: {names}); left in the DLQ: pass --to QUEUE to send it there on purpose")
        if reason == SkipReason.TARGET_UNREACHABLE:
            return self.refusal(self._choose(letter)[0] or "?")
        return None

    def refusal(self, target: str) -> str:
        """The note for a letter not sent because ``target`` refused an earlier send."""
        return f"not sent: {queue_name(target)} refused a send earlier in this run ({self.unreachable.get(target)})"

    def mark_unreachable(self, target: str, error: str) -> None:
        """Send nothing more to ``target`` in this run."""
        self.unreachable.setdefault(target, error)

    def _choose(self, letter: DlqMessage) -> tuple[str | None, SkipReason | None]:
        if self._to:
            return self._to, None
        allowed = self.allowed()
        if letter.source_queue:
            match = _find(letter.source_queue, allowed)
            return (match, None) if match else (None, SkipReason.NOT_A_SOURCE)
        if len(allowed) == 1:
            return allowed[0], None
        match = _find(self._default_to, allowed) if self._default_to else None
        return (match, None) if match else (None, SkipReason.NO_SOURCE)


def _find(ref: str, urls: list[str]) -> str | None:
    """The URL in ``urls`` naming the same queue as ``ref`` (a URL or an ARN), else None.

    Example:
        >>> _find("arn:aws:sqs:us-east-1:1:jobs", ["http://127.0.0.1:5000/1/other", "http://127.0.0.1:5000/1/jobs"])
        'http://127.0.0.1:5000/1/jobs'
        >>> _find("https://evil.example/1/jobs-elsewhere", ["http://127.0.0.1:5000/1/jobs"]) is None
        True
    """
    wanted = queue_identity(ref)
    if wanted is None:
        return None
    return next((url for url in urls if queue_identity(url) == wanted), None)
