"""The reference app: jobs that use every capability of sqsjobs.

``invoice-email`` sends an invoice through SES. The invoice is *re-fetched* by
id inside the job (IDs-only payloads); here the "database" is a tiny
deterministic function so the demo needs no other table.

``receipt-email`` is the same send as an ``async def`` job: a batch's receipts run at once
(docs/jobs.md, "Async jobs and concurrency"). The patterns of docs/patterns.md follow it:
``place_order`` + ``process-order`` (transactional enqueue through the outbox; orders live in
``SQSJOBS_ORDERS_TABLE``), ``reindex-products`` (a chunked job) and
``nightly-report`` (a scheduled job behind a lease), ``start_billing_run``
+ ``billing-run-report`` (a job group of invoice e-mails, and its callback). Flow control
(docs/flow-control.md) closes it: ``sms-reminder`` (a rate limit),
``invoice-pdf`` (a concurrency limit) and ``password-reset`` (the critical
queue, with per-tenant metrics). ``product-search-bulk`` is a batch handler (docs/jobs.md): 25
products to one ``BatchWriteItem``; ``product-search`` is the same upsert one job per product, the
per-item side of its measurement (BENCHMARKS.md).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from typing import Any, TypedDict

import sqsjobs
from sqsjobs import JobApp, PermanentError

# "critical" is the template's CriticalQueue: its URL comes from SQSJOBS_QUEUE_URL_CRITICAL.
app = JobApp(queues={"critical": None})


def ses_client() -> Any:
    """The SES client from the worker's own botocore session: built on first use, then shared while the
    environment is unchanged (no second session, no boto3 import, nothing for a test to clear)."""
    return sqsjobs.client("ses")


def fetch_invoice(invoice_id: int) -> dict[str, Any]:
    """Stand-in for the app's database read (fresh state on every run)."""
    if invoice_id < 0:
        raise PermanentError(f"invoice {invoice_id} does not exist")
    return {"id": invoice_id, "email": f"customer-{invoice_id}@example.com", "total_cents": invoice_id * 1000}


@app.job("invoice-email", key="invoice-email:{invoice_id}")
def send_invoice_email(invoice_id: int) -> None:
    """Send invoice ``invoice_id`` to its customer, once."""
    invoice = fetch_invoice(invoice_id)
    ses_client().send_email(
        Source=os.environ.get("SQSJOBS_SENDER", "billing@example.com"),
        Destination={"ToAddresses": [invoice["email"]]},
        Message={
            "Subject": {"Data": f"Invoice {invoice['id']}"},
            "Body": {"Text": {"Data": f"Total due: {invoice['total_cents'] / 100:.2f}"}},
        },
    )


@app.job("receipt-email", key="receipt-email:{order_id}")
async def send_receipt_email(order_id: int) -> None:
    """An async job (docs/jobs.md, "Async jobs and concurrency"): a batch's receipts go out at once.

    boto3 has no async client, so the send runs on a thread (``asyncio.to_thread``) while the loop
    serves the batch's other receipts; an async HTTP client would be awaited directly.
    """
    import asyncio  # loaded by the worker for a batch with async jobs, never at import

    await asyncio.to_thread(
        ses_client().send_email,
        Source=os.environ.get("SQSJOBS_SENDER", "billing@example.com"),
        Destination={"ToAddresses": [f"customer-{order_id}@example.com"]},
        Message={"Subject": {"Data": f"Receipt {order_id}"}, "Body": {"Text": {"Data": "Thank you."}}},
    )


# ---------------------------------------------------------------- patterns (docs/patterns.md)
# Transactional enqueue: an order and its processing job commit together or not at all.
ORDERS_TABLE_ENV = "SQSJOBS_ORDERS_TABLE"


def orders_client() -> Any:
    """The DynamoDB client of the orders table, shared as ``ses_client``'s is."""
    return sqsjobs.client("dynamodb")


def _orders_table() -> str:
    return os.environ.get(ORDERS_TABLE_ENV, "orders")


def place_order(order_id: int, total_cents: int) -> str:
    """Producer side (e.g. an API handler): write the order and enqueue its processing in one transaction.

    A second call for the same order fails the condition and enqueues nothing
    (``TransactionError.condition_failed``).
    """
    with app.transaction() as tx:
        tx.put(_orders_table(), {"pk": f"order#{order_id}", "total_cents": total_cents, "status": "NEW"},
               condition="attribute_not_exists(pk)")
        return tx.enqueue("process-order", order_id=order_id)


@app.job("process-order", key="process-order:{order_id}")
def process_order(order_id: int) -> None:
    """Mark order ``order_id`` processed; it exists, because the job was committed with it."""
    item = orders_client().get_item(TableName=_orders_table(), Key={"pk": {"S": f"order#{order_id}"}},
                                ConsistentRead=True).get("Item")
    if item is None:
        raise PermanentError(f"order {order_id} does not exist")
    orders_client().update_item(TableName=_orders_table(), Key={"pk": {"S": f"order#{order_id}"}},
                            UpdateExpression="SET #s = :done", ExpressionAttributeNames={"#s": "status"},
                            ExpressionAttributeValues={":done": {"S": "PROCESSED"}})


# Chunked long-running job: the product catalogue reindexed 500 products per message.
PRODUCTS = int(os.environ.get("SQSJOBS_DEMO_PRODUCTS", "2000"))
REINDEX_PAGE = 500


def fetch_product_ids(after: int, limit: int) -> list[int]:
    """Stand-in for ``SELECT id FROM products WHERE id > %s ORDER BY id LIMIT %s``."""
    return list(range(after + 1, min(after + limit, PRODUCTS) + 1))


def index_product(product_id: int) -> None:
    """Stand-in for an idempotent upsert into the search index."""


@app.job("reindex-products", key="reindex-products:{run_id}:{cursor}", chunked=True)
def reindex_products(run_id: str, cursor: int = 0) -> int | None:
    """Index one page after ``cursor``; return where the next page starts, or None when done.

    Start a run with ``reindex_products.start()``; follow it with ``app.run_status("reindex-products", run_id)``.
    """
    from sqsjobs import time_left

    ids = fetch_product_ids(cursor, REINDEX_PAGE)
    for done, product_id in enumerate(ids):
        left = time_left()
        if done and left is not None and left < 2.0:
            return ids[done - 1]  # out of time: the next message continues here
        index_product(product_id)
    return ids[-1] if len(ids) == REINDEX_PAGE else None


# Scheduled job behind a lease: one report per day, however many schedulers fire.
@app.scheduled("nightly-report", schedule="cron(0 2 * * ? *)", lease_seconds=300)
def nightly_report(period: str) -> None:
    """Count the orders and store the day's report (``report#<period>``) in the orders table."""
    pages = orders_client().get_paginator("scan").paginate(TableName=_orders_table(), Select="COUNT",
                                                       FilterExpression="begins_with(pk, :order)",
                                                       ExpressionAttributeValues={":order": {"S": "order#"}})
    orders = sum(page["Count"] for page in pages)
    orders_client().put_item(TableName=_orders_table(), Item={"pk": {"S": f"report#{period}"},
                                                          "orders": {"N": str(orders)}})


# Job group: a billing run e-mails every invoice of the run, then reports once, when all are done.
@app.job("billing-run-report", key="billing-run-report:{run}")
def billing_run_report(run: str) -> None:
    """The billing run's ``on_complete``: count the report in ``report#billing-run#<run>`` (it runs once)."""
    orders_client().update_item(TableName=_orders_table(), Key={"pk": {"S": f"report#billing-run#{run}"}},
                                UpdateExpression="ADD runs :one", ExpressionAttributeValues={":one": {"N": "1"}})


def start_billing_run(run: str, invoice_ids: Iterable[int]) -> str:
    """Producer side: e-mail each invoice as a member of one group; returns the group's id.

    ``app.group_status(id)`` follows it; the report runs once every e-mail is
    sent or dead-lettered (a missing invoice does not hold the report back).
    """
    group = app.group(on_complete=billing_run_report.message(run=run), name=f"billing run {run}")
    group.add_many(send_invoice_email.message(invoice_id=i) for i in invoice_ids)
    return group.enqueue()


# ---------------------------------------------------------------- flow control (docs/flow-control.md)
# The dependencies' limits, across every worker invocation.
app.rate_limit("sms", rate=10)  # the SMS provider takes 10 messages a second
app.concurrency_limit("pdf", 2)  # the PDF renderer takes two documents at a time
PDF_RENDER_SECONDS = 0.3


def _called(provider: str, ident: int, started: float) -> None:
    """Stand-in for the provider's side: a log line with when the call started and ended."""
    app.logger.info("provider called", extra={"provider": provider, "id": ident, "started": started,
                                              "finished": time.time()})


@app.job("sms-reminder", key="sms-reminder:{appointment_id}", limits=["sms"])
def send_sms_reminder(appointment_id: int) -> None:
    """Text the reminder of ``appointment_id``: at most 10 a second, however many workers run."""
    _called("sms", appointment_id, time.time())


@app.job("invoice-pdf", key="invoice-pdf:{invoice_id}", limits=["pdf"])
def render_invoice_pdf(invoice_id: int) -> None:
    """Render invoice ``invoice_id`` as a PDF: at most two renders at once."""
    started = time.time()
    time.sleep(PDF_RENDER_SECONDS)  # stand-in for the renderer
    _called("pdf", invoice_id, started)


@app.job("password-reset", key="password-reset:{user_id}", queue="critical", tenant_metrics=True)
def send_password_reset(user_id: int) -> None:
    """Mail a password-reset link: on the critical queue, never behind a backlog of invoices."""
    _called("reset", user_id, time.time())


# ---------------------------------------------------------------- batch handlers (docs/jobs.md)
# The search documents live beside the orders (pk "search#<id>"): the reference app has one table of its own.
SEARCH_BATCH = 25  # DynamoDB's BatchWriteItem takes 25 items


class ProductRef(TypedDict):
    """One product to upsert into the search documents."""

    product_id: int


def _search_document(product_id: int) -> dict[str, Any]:
    """Stand-in for the product's fresh state, as its search document."""
    return {"pk": {"S": f"search#{product_id}"}, "product_id": {"N": str(product_id)},
            "title": {"S": f"product {product_id}"}}


@app.job("product-search", key="product-search:{product_id}")
def upsert_product_search(product_id: int) -> None:
    """Upsert one product's search document: one ``PutItem`` a job."""
    orders_client().put_item(TableName=_orders_table(), Item=_search_document(product_id))


@app.job("product-reindex", key="product-reindex:{product_id}", debounce=2)
def reindex_product(product_id: int, title: str) -> None:
    """A debounced job (docs/jobs.md, "Debounce and dedupe"): a burst of edits of one product is one
    reindex, 2 s after the last edit, with the last edit's title."""
    app.logger.info("reindexing product", extra={"product_id": product_id, "title": title})


@app.job("account-export", key="account-export:{account_id}", dedupe="until_done")
def export_account(account_id: int) -> None:
    """A deduplicated job (docs/jobs.md, "Debounce and dedupe"): a second request while one is queued or
    running is refused at the producer."""
    app.logger.info("exporting account", extra={"account_id": account_id})


@app.job("product-search-bulk", key="product-search-bulk:{product_id}", batch=SEARCH_BATCH)
def upsert_product_search_bulk(items: list[ProductRef]) -> dict[int, BaseException]:
    """Upsert up to 25 products' search documents in one ``BatchWriteItem``. A product that does not
    exist fails alone for good; one DynamoDB left unprocessed fails alone and is retried after its own
    backoff; the others are done."""
    from sqsjobs import RetryableError

    app.logger.info("writing search documents", extra={"items": len(items)})
    failed: dict[int, BaseException] = {i: PermanentError(f"product {item['product_id']} does not exist")
                                        for i, item in enumerate(items) if item["product_id"] < 0}
    requests = [{"PutRequest": {"Item": _search_document(item["product_id"])}}
                for i, item in enumerate(items) if i not in failed]
    if not requests:
        return failed
    answer = orders_client().batch_write_item(RequestItems={_orders_table(): requests})
    left = {r["PutRequest"]["Item"]["pk"]["S"] for r in answer.get("UnprocessedItems", {}).get(_orders_table(), [])}
    failed.update({i: RetryableError("throttled: DynamoDB left it unprocessed") for i, item in enumerate(items)
                   if f"search#{item['product_id']}" in left})
    return failed
