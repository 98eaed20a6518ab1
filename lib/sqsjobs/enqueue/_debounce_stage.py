"""The worker's side of debounce and dedupe (enqueue/_debounce.py has the design): a stage (worker/_stages.py).

- ``before_claim``: the records of the batch's debounced deliveries are read
  in one round trip; a delivery whose token is not its key's latest is
  acknowledged as ``superseded`` (``JobSuperseded``) without a write; the
  latest token of a key whose previous burst completed re-arms it (``Rearm``),
  and so does a request without a token (a group's member, a chain's step)
  that its completed key did not complete (worker/_request.py: a delivery is
  a duplicate only of the same request).
- ``claim_data``: the claim writes the token it claims for (``ran_token``),
  and frees an ``until_started`` key's reservation, in its own write.
- ``before_run``: the record as the claim found it says whether the token was
  still the latest at the claim (a later enqueue between the read and the
  claim): if not, the attempt is given back and it is acknowledged superseded.

A store failure here is never raised: the deliveries it leaves undecided go
back (``store_failed``, no attempt used) rather than claim, since a claim of a
key whose last burst completed would take a later burst for a duplicate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import RetryableError, StoreError
from sqsjobs.enqueue._debounce import DEBOUNCE, DEDUPE, Dedupe
from sqsjobs.store._enqueue_ops import FreshAttempts, Rearm
from sqsjobs.store._lease import LeaseState
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._delivery import State
from sqsjobs.worker._request import Request
from sqsjobs.worker._stages import Stage

if TYPE_CHECKING:
    from sqsjobs.store._lease import LeaseStore
    from sqsjobs.worker._batch import Batch
    from sqsjobs.worker._delivery import Delivery

SUPERSEDED_NOTE = "superseded: a later enqueue of its key replaced this burst (debounce)"
#: what the claim writes to free an ``until_started`` key
UNRESERVED = {"queued_until": None, "queued_id": None, "queued_mode": None}


def token_of(d: Delivery) -> str | None:
    """The burst token a delivery carries (None: not a debounced enqueue)."""
    return d.envelope.debounce if d.envelope is not None and coalesces(d) else None


def coalesces(d: Delivery) -> bool:
    """``d`` is of a debounced job: a burst, or a request without a token (a member, a step, a callback)."""
    return d.job is not None and DEBOUNCE.of(d.job.options) is not None


class DebounceStage(Stage):
    """Superseded bursts acknowledged, completed ones re-armed for the next, reservations freed at the claim."""

    def __init__(self, *, store: LeaseStore, clock: Callable[[], float]) -> None:
        self.store = store
        self.clock = clock
        #: the coalesced count each debounced delivery's read saw: the claim starts the next burst's count there
        self._counts: dict[str, int] = {}

    def concerns(self, d: Delivery) -> bool:
        return coalesces(d) or (d.job is not None and DEDUPE.of(d.job.options) is not None)

    def before_claim(self, batch: Batch) -> Iterator[tuple[Delivery, Facts]]:
        waiting = [d for d in batch.deliveries if d.state is State.DECODED and coalesces(d)]
        if not waiting:
            return
        try:
            records = self.store.get_many(list(dict.fromkeys(d.key for d in waiting)))
        except StoreError as error:
            for d in waiting:
                yield d, Facts(ending=Ending.STORE_FAILED,
                               error=RetryableError(f"idempotency store unavailable: {error}"))
            return
        rearmed: set[str] = set()
        unarmed: set[str] = set()  # keys whose re-arm failed: none of their copies may claim
        self._counts = {}
        for d in waiting:
            item, token = records.get(d.key), token_of(d)
            if item is None:
                continue
            latest = item.get("debounce_token")
            if token is not None:
                if latest is None:
                    continue
                self._counts[d.message_id] = int(item.get("debounce_count") or 0)
                if latest != token:
                    d.notes.append(SUPERSEDED_NOTE)
                    yield d, Facts(ending=Ending.SUPERSEDED)
                    continue
            if d.key in unarmed:
                yield d, Facts(ending=Ending.STORE_FAILED, error=RetryableError("its key's re-arm failed"))
                continue
            request = Request.of(d)
            assert request is not None
            if (item.state is LeaseState.DONE and item.get("outcome") == "succeeded"
                    and not request.completed_in(item) and d.key not in rearmed):
                # The key completed another request: this one may run (a member, a later burst), once re-armed.
                rearmed.add(d.key)
                written = self.store.write(Rearm(key=d.key, now=self.clock(), token=token,
                                                 request=None if token is not None else request.number,
                                                 job=None if token is not None else request.job,
                                                 spent=item.attempts))
                if written.error is not None:  # refused is fine: another copy re-armed it, or it ran
                    unarmed.add(d.key)
                    yield d, Facts(ending=Ending.STORE_FAILED,
                                   error=RetryableError(f"idempotency store unavailable: {written.error}"))
                continue
            superseded = item.get("ran_token")
            if (token is not None and item.state is LeaseState.RELEASED and superseded not in (None, token)
                    and item.attempts > int(item.get("spent_attempts") or 0) and d.key not in rearmed):
                # The latest burst takes over from a superseded one: that one's attempts are spent, not this one's
                # (refused is fine: the record moved on since the read, and the claim reads it again).
                rearmed.add(d.key)
                self.store.write(FreshAttempts(key=d.key, token=token, superseded=str(superseded),
                                               attempts=item.attempts, now=self.clock()))

    def claim_data(self, d: Delivery) -> Mapping[str, Any]:
        token = token_of(d)
        data: dict[str, Any] = {"ran_token": token} if token is not None else {}
        if d.message_id in self._counts:
            data["debounce_base"] = self._counts[d.message_id]
        if d.job is not None and DEDUPE.of(d.job.options) is Dedupe.UNTIL_STARTED:
            data.update(UNRESERVED)
        return data

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        token = token_of(d)
        if token is None or d.previous is None:
            return None
        latest = d.previous.get("debounce_token")
        if latest is not None and latest != token:
            d.notes.append(SUPERSEDED_NOTE)
            return Facts(ending=Ending.SUPERSEDED)
        return None
