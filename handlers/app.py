"""The reference app: jobs that use every capability of sqsjobs.

``invoice-email`` sends an invoice through SES. The invoice is *re-fetched* by
id inside the job (IDs-only payloads); here the "database" is a tiny
deterministic function so the demo needs no other table.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

from sqsjobs import JobApp, PermanentError

app = JobApp()


@lru_cache(maxsize=1)
def _ses() -> Any:
    import boto3

    return boto3.client("ses")


def fetch_invoice(invoice_id: int) -> dict[str, Any]:
    """Stand-in for the app's database read (fresh state on every run)."""
    if invoice_id < 0:
        raise PermanentError(f"invoice {invoice_id} does not exist")
    return {"id": invoice_id, "email": f"customer-{invoice_id}@example.com", "total_cents": invoice_id * 1000}


@app.job("invoice-email", key="invoice-email:{invoice_id}")
def send_invoice_email(invoice_id: int) -> None:
    """Send invoice ``invoice_id`` to its customer, once."""
    invoice = fetch_invoice(invoice_id)
    _ses().send_email(
        Source=os.environ.get("SQSJOBS_SENDER", "billing@example.com"),
        Destination={"ToAddresses": [invoice["email"]]},
        Message={
            "Subject": {"Data": f"Invoice {invoice['id']}"},
            "Body": {"Text": {"Data": f"Total due: {invoice['total_cents'] / 100:.2f}"}},
        },
    )
