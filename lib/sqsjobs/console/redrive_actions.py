"""Redrive from the page: a dry run first, then the same filters for real, through ``Redrive`` (``ops/_redrive.py``).

The confirm step moves at most as many letters as the dry run said would
move, so letters that arrive between the two clicks wait for the next
preview. Results are kept in a small journal and shown after a redirect
(a reload never redrives twice). Runs hold ``Sources.dlq_lock``, so this
console never peeks at the DLQ while it redrives it.

Example:
    >>> journal = RedriveJournal()
    >>> ticket = journal.add(RedriveSummary(dlq_url="u", dry_run=False, moved=2))
    >>> journal.get(ticket).moved, journal.get("unknown")
    (2, None)
"""

from __future__ import annotations

import secrets
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqsjobs.ops._errors import RedriveError
from sqsjobs.ops._redrive import Redrive
from sqsjobs.ops._redrive_options import RedriveOptions
from sqsjobs.ops._redrive_report import RedriveSummary

if TYPE_CHECKING:
    from sqsjobs.console.sources import Sources

#: a dry run from the page stops after this many letters that would move (the CLI has no such bound)
PREVIEW_LIMIT: Final = 1000
_KEPT_RESULTS: Final = 20


@dataclass(frozen=True, kw_only=True)
class RedriveRequest:
    """The page's redrive form: the DLQ filters and how many letters at most.

    Example:
        >>> RedriveRequest.from_form({"job": "invoice-email", "error": "", "max": "3"})
        RedriveRequest(job='invoice-email', error=None, limit=3)
    """

    job: str | None
    error: str | None
    limit: int | None

    @classmethod
    def from_form(cls, form: dict[str, str]) -> RedriveRequest:
        """Read the form; a bad number is a :class:`RedriveError` with one line to show."""
        raw = form.get("max", "").strip()
        try:
            limit = int(raw) if raw else None
        except ValueError:
            raise RedriveError(f"max must be a whole number of letters, got {raw!r}") from None
        if limit is not None and not 1 <= limit <= PREVIEW_LIMIT:
            raise RedriveError(f"max must be 1..{PREVIEW_LIMIT} from the console; use `sqsjobs redrive` for more")
        return cls(job=form.get("job", "").strip() or None, error=form.get("error", "").strip() or None, limit=limit)


def preview(sources: Sources, dlq_url: str, request: RedriveRequest) -> RedriveSummary:
    """The dry run: what would move and what would be skipped, changing nothing."""
    return _run(sources, dlq_url, request, dry_run=True, limit=request.limit or PREVIEW_LIMIT)


def redrive_now(sources: Sources, dlq_url: str, request: RedriveRequest) -> RedriveSummary:
    """Move the letters the preview showed (at most ``request.limit``) back to their queue."""
    if request.limit is None:
        raise RedriveError("a redrive from the console needs the count its dry run showed; preview first")
    return _run(sources, dlq_url, request, dry_run=False, limit=request.limit)


def _run(sources: Sources, dlq_url: str, request: RedriveRequest, *, dry_run: bool, limit: int) -> RedriveSummary:
    options = RedriveOptions(dlq=dlq_url, default_to=sources.queue_url, job=request.job, error_type=request.error,
                             max_messages=limit, dry_run=dry_run)
    with sources.dlq_lock:
        return Redrive(options, sqs_client=sources.sqs, clock=sources.clock, records=sources.records).run()


class RedriveJournal:
    """The latest redrive results, by an unguessable ticket (for the page after the redirect)."""

    def __init__(self) -> None:
        self._results: OrderedDict[str, RedriveSummary] = OrderedDict()
        self._lock = threading.Lock()

    def add(self, summary: RedriveSummary) -> str:
        """Keep ``summary``; return its ticket."""
        ticket = secrets.token_urlsafe(12)
        with self._lock:
            self._results[ticket] = summary
            while len(self._results) > _KEPT_RESULTS:
                self._results.popitem(last=False)
        return ticket

    def get(self, ticket: str | None) -> RedriveSummary | None:
        """The summary kept under ``ticket``, if any."""
        with self._lock:
            return self._results.get(ticket or "")
