"""The demo's patterns phase: orders through the outbox, a chunked reindex, a leased schedule.

Each step uses the reference app the way application code would, against the
local cloud's tables; ``check`` says what must hold afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqsjobs.chunked import RunStore
from sqsjobs.errors import TransactionError
from sqsjobs.outbox import Transaction

ORDERS = tuple(range(1, 9))
RUN_ID = "demo"
REINDEX_PAGES = 5  # 2,000 demo products: four pages of 500 and the empty fifth


@dataclass
class PatternsOutcome:
    """What the patterns phase did and found.

    Example:
        >>> PatternsOutcome().problems()[0]
        'orders processed through the outbox: 0 of 8'
    """

    orders_processed: int = 0
    duplicate_order_refused: bool = False
    reindex_pages: int = 0
    reindex_finished: bool = False
    schedule_runs: list[dict[str, Any]] = field(default_factory=list)

    def problems(self) -> list[str]:
        """Differences from what must happen (empty: as expected)."""
        found = []
        if self.orders_processed != len(ORDERS):
            found.append(f"orders processed through the outbox: {self.orders_processed} of {len(ORDERS)}")
        if not self.duplicate_order_refused:
            found.append("a second transaction for the same order was not refused")
        if not self.reindex_finished or self.reindex_pages != REINDEX_PAGES:
            found.append(f"reindex run: {self.reindex_pages} pages, finished={self.reindex_finished}")
        fired = [r for r in self.schedule_runs if r.get("fired")]
        if len(self.schedule_runs) != 2 or len(fired) != 1:
            found.append(f"nightly-report fired {len(fired)} of {len(self.schedule_runs)} times, expected once")
        return found

    def lines(self) -> list[str]:
        """The report's lines for this phase."""
        runs = ", ".join(f"{'fired' if r.get('fired') else 'skipped'} ({r.get('reason')})"
                         for r in self.schedule_runs)
        return [
            f"outbox: {self.orders_processed}/{len(ORDERS)} orders committed with their job and processed; "
            f"a duplicate order was {'refused, nothing enqueued' if self.duplicate_order_refused else 'NOT refused'}",
            f"chunked: reindex-products run '{RUN_ID}' {'finished' if self.reindex_finished else 'NOT finished'} "
            f"in {self.reindex_pages} pages",
            f"schedule: nightly-report fired twice in one period -> {runs}",
        ]


def _tx(cloud: Any, app: Any) -> Transaction:
    return Transaction(app, client=cloud.clients.get("dynamodb"), outbox_table=cloud.deployment.tables["OutboxTable"])


def orders_table(cloud: Any) -> str:
    """The orders table the worker uses."""
    return str(cloud.function_env("WorkerFunction")["SQSJOBS_ORDERS_TABLE"])


def place_orders(cloud: Any, app: Any) -> bool:
    """Commit each order with its job (outbox); then try one order again. True when it was refused."""
    table = orders_table(cloud)
    for order_id in ORDERS:
        with _tx(cloud, app) as tx:
            tx.put(table, {"pk": f"order#{order_id}", "total_cents": order_id * 990, "status": "NEW"},
                   condition="attribute_not_exists(pk)")
            tx.enqueue("process-order", order_id=order_id)
    try:
        with _tx(cloud, app) as tx:
            tx.put(table, {"pk": f"order#{ORDERS[0]}", "total_cents": 1, "status": "NEW"},
                   condition="attribute_not_exists(pk)")
            tx.enqueue("process-order", order_id=ORDERS[0])
    except TransactionError as exc:
        return exc.condition_failed
    return False


def start_reindex(cloud: Any, app: Any) -> None:
    """Enqueue the first page of a chunked run; each page enqueues the next."""
    cloud.send_job(app.message("reindex-products", run_id=RUN_ID, cursor=0))


def fire_schedule_twice(cloud: Any) -> list[dict[str, Any]]:
    """Two schedulers firing in the same period: the lease lets one run."""
    runs = []
    for _ in range(2):
        result = cloud.fire("nightly-report")
        runs.append(result.payload if isinstance(result.payload, dict) else {"error": result.error_message})
    return runs


def check(cloud: Any, outcome: PatternsOutcome) -> None:
    """Read back orders and the run record into ``outcome``."""
    dynamodb = cloud.clients.get("dynamodb")
    processed = 0
    for order_id in ORDERS:
        item = dynamodb.get_item(TableName=orders_table(cloud), Key={"pk": {"S": f"order#{order_id}"}}).get("Item")
        processed += int(bool(item) and item["status"]["S"] == "PROCESSED")
    outcome.orders_processed = processed
    status = RunStore(dynamodb, cloud.function_env("WorkerFunction")["SQSJOBS_TABLE"]).status(
        "reindex-products", RUN_ID)
    outcome.reindex_pages = status.pages_done if status else 0
    outcome.reindex_finished = bool(status and status.finished)
