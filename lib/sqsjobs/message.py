"""A job message ready to send: body, key and the SQS parameters around it."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

ATTR_JOB = "sqsjobs.job"
ATTR_TRACE_ID = "sqsjobs.trace_id"
#: set by the worker on a message it re-sent instead of letting SQS's redrive move it
ATTR_RESENDS = "sqsjobs.resends"
#: SQS's largest DelaySeconds; longer delays need a scheduler, not a queue.
MAX_DELAY_SECONDS = 900


@dataclass(frozen=True, kw_only=True)
class JobMessage:
    """One message for the jobs queue, built by ``Job.message(...)``.

    Example:
        >>> m = JobMessage(job="invoice-email", key="invoice-email:42", body="{}")
        >>> m.dedup_id == JobMessage(job="x", key="invoice-email:42", body="[]").dedup_id
        True
    """

    job: str
    key: str
    body: str
    delay: int = 0
    group: str | None = None
    trace_id: str | None = None
    extra_attributes: dict[str, str] = field(default_factory=dict)

    @property
    def dedup_id(self) -> str:
        """FIFO deduplication id: a hash of the idempotency key (SQS allows 128 chars)."""
        return hashlib.sha256(self.key.encode("utf-8")).hexdigest()

    def attributes(self) -> dict[str, dict[str, str]]:
        """SQS ``MessageAttributes``: the job name, the trace id, and any extras."""
        attrs = {ATTR_JOB: {"DataType": "String", "StringValue": self.job}}
        if self.trace_id:
            attrs[ATTR_TRACE_ID] = {"DataType": "String", "StringValue": self.trace_id}
        for name, value in self.extra_attributes.items():
            attrs[name] = {"DataType": "String", "StringValue": value}
        return attrs

    def size(self) -> int:
        """Bytes SQS counts against its limits: body plus attribute names, types and values."""
        total = len(self.body.encode("utf-8"))
        for name, attr in self.attributes().items():
            total += len(name) + len(attr["DataType"]) + len(attr["StringValue"].encode("utf-8"))
        return total
