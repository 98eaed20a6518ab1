"""The idempotency guard: one record per logical operation, claimed before the job runs.

A claim is a conditional write: it succeeds when no record exists, or when
the previous holder's lease ran out (it crashed). Completion and release are
*fenced* on the owner token, so an invocation whose lease expired cannot
overwrite the record of the invocation that took over.

The abstract ``IdempotencyStore`` owns the batch-level flow (one round trip
for all claims of a batch, one for all completions/releases); a backend only
implements three single-record methods. ``InMemoryStore`` has the same
semantics for unit tests; the contract suite runs against both.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from sqsjobs.errors import StoreError

T = TypeVar("T")
U = TypeVar("U")

IN_PROGRESS = "IN_PROGRESS"
COMPLETED = "COMPLETED"


class ClaimState(StrEnum):
    """What a claim found."""

    CLAIMED = "claimed"  #: this invocation now holds the record: run the job
    COMPLETED = "completed"  #: done before: a duplicate, acknowledge without running
    BUSY = "busy"  #: another invocation holds a live lease: retry after it
    ERROR = "error"  #: the store failed: retry later


@dataclass(frozen=True, kw_only=True)
class ClaimRequest:
    """Ask for ``key`` as ``owner`` until ``lease_until`` (epoch seconds)."""

    key: str
    job: str
    owner: str
    now: float
    lease_until: float
    #: TTL for the claim itself, so a claim whose holder died and whose message left
    #: through the queue's own redrive is still collected by DynamoDB TTL one day
    expires_at: float | None = None


@dataclass(frozen=True, kw_only=True)
class ClaimResult:
    """The outcome of one claim; ``lease_until`` is the holder's lease when BUSY."""

    key: str
    state: ClaimState
    lease_until: float | None = None
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Finish:
    """Complete (keep until ``expires_at``) or release (delete) a claimed record."""

    key: str
    owner: str
    complete: bool
    expires_at: float = 0.0


@dataclass(frozen=True, kw_only=True)
class FinishResult:
    """``fenced`` is False when the record no longer belonged to ``owner``."""

    key: str
    complete: bool
    fenced: bool
    error: str | None = None


@dataclass(frozen=True, kw_only=True)
class Record:
    """A stored idempotency record."""

    key: str
    status: str
    owner: str | None
    lease_until: float | None
    expires_at: float | None
    job: str | None = None


class FenceLost(Exception):
    """Raised by a backend when the record's owner is not the caller (internal)."""


class AlreadyClaimed(Exception):
    """Raised by a backend when the claim's condition failed (internal); carries the record."""

    def __init__(self, record: Record | None) -> None:
        super().__init__(record.key if record else "")
        self.record = record


class IdempotencyStore(ABC):
    """The guard's state machine over a backend of single-record operations.

    Example:
        >>> store = InMemoryStore()
        >>> req = ClaimRequest(key="invoice-email:42", job="invoice-email", owner="a", now=0, lease_until=60)
        >>> [r.state.value for r in store.claim_many([req, req])]
        ['claimed', 'busy']
    """

    def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimResult]:
        """Claim every key at once (one round trip); results in request order."""
        return self._parallel(self._claim, requests)

    def finish_many(self, finishes: Sequence[Finish]) -> list[FinishResult]:
        """Complete or release every record at once (one round trip), fenced on the owner."""
        return self._parallel(self._finish, finishes)

    def _claim(self, request: ClaimRequest) -> ClaimResult:
        try:
            self._put_if_free(request)
        except AlreadyClaimed as taken:
            record = taken.record
            if record is not None and record.status == COMPLETED:
                return ClaimResult(key=request.key, state=ClaimState.COMPLETED)
            return ClaimResult(
                key=request.key, state=ClaimState.BUSY, lease_until=record.lease_until if record else None
            )
        except StoreError as error:
            return ClaimResult(key=request.key, state=ClaimState.ERROR, error=str(error))
        return ClaimResult(key=request.key, state=ClaimState.CLAIMED)

    def _finish(self, finish: Finish) -> FinishResult:
        try:
            if finish.complete:
                self._complete_if_owner(finish)
            else:
                self._delete_if_owner(finish)
        except FenceLost:
            return FinishResult(key=finish.key, complete=finish.complete, fenced=False)
        except StoreError as error:
            return FinishResult(key=finish.key, complete=finish.complete, fenced=True, error=str(error))
        return FinishResult(key=finish.key, complete=finish.complete, fenced=True)

    def _parallel(self, fn: Callable[[T], U], items: Sequence[T]) -> list[U]:
        """Run ``fn`` over ``items``; a networked backend overrides this to run them concurrently."""
        return [fn(item) for item in items]

    @abstractmethod
    def get(self, key: str) -> Record | None:
        """The stored record for ``key`` (tests, status, tooling)."""

    @abstractmethod
    def _put_if_free(self, request: ClaimRequest) -> None:
        """Write IN_PROGRESS if absent, lease-expired, or TTL-expired; else raise ``AlreadyClaimed``."""

    @abstractmethod
    def _complete_if_owner(self, finish: Finish) -> None:
        """Set COMPLETED and ``expires_at`` if ``owner`` still holds it; else raise ``FenceLost``."""

    @abstractmethod
    def _delete_if_owner(self, finish: Finish) -> None:
        """Delete the record if ``owner`` still holds it; else raise ``FenceLost``."""


class InMemoryStore(IdempotencyStore):
    """The guard's semantics in a dict, for unit tests and the in-process demo.

    Example:
        >>> store = InMemoryStore()
        >>> store.get("nothing") is None
        True
    """

    def __init__(self) -> None:
        self._records: dict[str, Record] = {}
        self._lock = threading.Lock()
        self.round_trips = 0

    def claim_many(self, requests: Sequence[ClaimRequest]) -> list[ClaimResult]:
        self.round_trips += 1 if requests else 0
        return super().claim_many(requests)

    def finish_many(self, finishes: Sequence[Finish]) -> list[FinishResult]:
        self.round_trips += 1 if finishes else 0
        return super().finish_many(finishes)

    def get(self, key: str) -> Record | None:
        return self._records.get(key)

    def _put_if_free(self, request: ClaimRequest) -> None:
        with self._lock:
            current = self._records.get(request.key)
            if current is not None and not _free(current, request.now):
                raise AlreadyClaimed(current)
            self._records[request.key] = Record(
                key=request.key,
                status=IN_PROGRESS,
                owner=request.owner,
                lease_until=request.lease_until,
                expires_at=request.expires_at,
                job=request.job,
            )

    def _complete_if_owner(self, finish: Finish) -> None:
        with self._lock:
            current = self._records.get(finish.key)
            if current is None or current.owner != finish.owner or current.status != IN_PROGRESS:
                raise FenceLost(finish.key)
            self._records[finish.key] = Record(
                key=finish.key, status=COMPLETED, owner=finish.owner, lease_until=current.lease_until,
                expires_at=finish.expires_at, job=current.job,
            )

    def _delete_if_owner(self, finish: Finish) -> None:
        with self._lock:
            current = self._records.get(finish.key)
            if current is None or current.owner != finish.owner:
                raise FenceLost(finish.key)
            del self._records[finish.key]


def _free(record: Record, now: float) -> bool:
    """May a new claim take this record? (The same rule the DynamoDB condition encodes.)"""
    if record.expires_at is not None and record.expires_at < now:
        return True  # past its TTL; DynamoDB deletes such items up to days late
    return record.status == IN_PROGRESS and record.lease_until is not None and record.lease_until < now
