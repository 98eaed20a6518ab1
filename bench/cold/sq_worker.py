"""The sqsjobs handler doing exactly pt_worker.py's job: one ``invoice-email`` job, its app using no other feature.

handlers/worker.py serves the reference app (handlers/app.py), which declares every capability; this is
the like-for-like of Powertools' handler, and what a team with one job ships. Only imported by ``bench``.
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import sqsjobs
from sqsjobs import JobApp, prepare_snapstart

app = JobApp()


@lru_cache(maxsize=1)
def ses_client() -> Any:
    """The SES client, from the worker's own botocore session."""
    return sqsjobs.client("ses")


def fetch_invoice(invoice_id: int) -> dict[str, Any]:
    """The same stand-in for a database read as handlers/app.py."""
    return {"id": invoice_id, "email": f"customer-{invoice_id}@example.com", "total_cents": invoice_id * 1000}


@app.job("invoice-email", key="invoice-email:{invoice_id}")
def send_invoice_email(invoice_id: int) -> None:
    """Send invoice ``invoice_id`` to its customer, once."""
    invoice = fetch_invoice(invoice_id)
    ses_client().send_email(
        Source=os.environ.get("SQSJOBS_SENDER", "billing@example.com"),
        Destination={"ToAddresses": [invoice["email"]]},
        Message={"Subject": {"Data": f"Invoice {invoice['id']}"},
                 "Body": {"Text": {"Data": f"Total due: {invoice['total_cents'] / 100:.2f}"}}},
    )


prepare_snapstart(app, ses_client)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """``{"batchItemFailures": [...]}``."""
    return app.handle_batch(event, context)
