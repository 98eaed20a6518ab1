"""``expires_in``: a delivery older than its job's (or its enqueue's) expiry is acknowledged without running.

A stage (``worker/_stages.py``): before the claims, each decoded delivery is
measured from its enqueue (the envelope's ``enqueued_at``, else SQS's
``SentTimestamp``); one too old ends ``expired`` (``JobExpired``), and
its record is written in the claims' round trip as ``expired`` (RELEASED: a
later enqueue of the key may still run; a key already completed stays so).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sqsjobs.store._lease import expiry
from sqsjobs.worker import _job_records as records
from sqsjobs.worker._batch import Batch
from sqsjobs.worker._decision import Ending, Facts
from sqsjobs.worker._delivery import Delivery, State
from sqsjobs.worker._stages import Stage


class ExpiryStage(Stage):
    """Acknowledges, unrun, what is older than its ``expires_in``."""

    def __init__(self, *, record_ttl: float, clock: Callable[[], float]) -> None:
        self.record_ttl = record_ttl
        self.clock = clock

    def concerns(self, d: Delivery) -> bool:
        return d.job is not None and bool((d.envelope is not None and d.envelope.expires_in)
                                          or d.job.options.expires_in)

    def before_claim(self, batch: Batch) -> Iterator[tuple[Delivery, Facts]]:
        for d in batch.deliveries:
            if d.state is not State.DECODED or d.envelope is None or d.job is None:
                continue
            expires_in = d.envelope.expires_in or d.job.options.expires_in
            if expires_in is None:
                continue
            sent = d.envelope.enqueued_at if d.envelope.enqueued_at is not None else d.sent_ms / 1000.0
            if sent and batch.now - sent > expires_in:
                d.counts_as = "expired"
                yield d, Facts(ending=Ending.EXPIRED)
                batch.claim_wave.append((d, records.expired(
                    d.key, job=d.job.name, now=batch.now, expires_at=expiry(batch.now, self.record_ttl))))
