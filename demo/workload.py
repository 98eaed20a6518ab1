"""The demo's mixed workload: what is sent, and what the report must show for it.

Everything goes through the reference app's own producer (``app.message``),
exactly as application code would enqueue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

JOB = "invoice-email"
# The billing run (demo/patterns.py): one group of invoice e-mails, one of them missing (dead-lettered).
BILLING_INVOICES = (*range(201, 220), -220)


@dataclass(frozen=True, kw_only=True)
class Workload:
    """Invoice ids per kind of traffic, and the outcome counts they must produce.

    Example:
        >>> w = Workload.default()
        >>> w.expected_done == len(set(w.invoices) | set(w.outage_invoices)) + 19  # the billing run's
        True
    """

    invoices: tuple[int, ...]
    duplicates: tuple[int, ...]
    outage_invoices: tuple[int, ...]
    poison: tuple[int, ...]
    malformed: tuple[str, ...]
    #: invoices e-mailed as the members of one job group (negative: missing, dead-lettered)
    billing_run: tuple[int, ...] = ()
    notes: dict[str, str] = field(default_factory=dict)

    @classmethod
    def default(cls) -> Workload:
        """40 invoices, 10 duplicates, 12 sent during an SES outage, 4 poison, 2 malformed."""
        return cls(
            invoices=tuple(range(1, 41)),
            duplicates=tuple(range(1, 41, 4)),
            outage_invoices=tuple(range(101, 113)),
            # Negative ids do not exist: the job raises PermanentError.
            poison=(-1, -2, -3, -4),
            malformed=("{not json", '{"v": 99, "job": "invoice-email"}'),
            billing_run=BILLING_INVOICES,
        )

    @property
    def expected_done(self) -> int:
        """Distinct invoices that must be e-mailed exactly once."""
        return len(set(self.invoices) | set(self.outage_invoices) | {i for i in self.billing_run if i > 0})

    @property
    def expected_dead(self) -> int:
        """Messages that must end on the DLQ."""
        return len(self.poison) + len(self.malformed) + sum(1 for i in self.billing_run if i < 0)

    @property
    def total_messages(self) -> int:
        """Every message the demo sends."""
        return (len(self.invoices) + len(self.duplicates) + len(self.outage_invoices)
                + len(self.poison) + len(self.malformed))


def messages(app: Any, invoice_ids: tuple[int, ...]) -> list[Any]:
    """``JobMessage``s for ``invoice-email`` with these ids, built by the app's producer."""
    return [app.message(JOB, invoice_id=i) for i in invoice_ids]
