"""The demo's patterns phase: orders through the outbox, a chunked reindex, a leased schedule, a delayed job,
a job group.

Each step uses the reference app the way application code would, against the
local cloud's tables; ``check`` says what must hold afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from demo import workload
from sqsjobs._errors import TransactionError
from sqsjobs.enqueue._delays import schedule_name
from sqsjobs.ops._redrive import Redrive, RedriveOptions
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.workflows._chunked import RunStore
from sqsjobs.workflows._outbox import Transaction

ORDERS = tuple(range(1, 9))
# Enqueued before their orders were committed (the mistake the outbox prevents):
# they dead-letter, the orders commit late, a redrive brings the jobs back.
EARLY_ORDERS = (901, 902, 903)
RUN_ID = "demo"
REINDEX_PAGES = 5  # 2,000 demo products: four pages of 500 and the empty fifth
# Processed two hours after it was placed (a one-time schedule), fired early by the demo.
DELAYED_ORDER = 960
# Cancelled by key before its job was delivered: the delivery is acknowledged without running.
CANCELLED_ORDER = 970
# A billing run as a job group: 20 invoices e-mailed, one of them missing (its e-mail is dead-lettered);
# the report (on_complete) runs once, when all 20 are done.
BILLING_RUN = "demo"
BILLING_INVOICES = workload.BILLING_INVOICES


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
    early_dead_lettered: int = 0
    redriven: int = 0
    early_processed: int = 0
    #: the delayed order's schedule (due time), while it waited; "" when it was not scheduled
    delayed_due: str = ""
    delayed_waited: bool = False
    delayed_processed: bool = False
    #: ``app.status`` of the first outbox order's job: (state, attempts)
    looked_up: tuple[str, int] = ("not found", 0)
    #: what ``app.cancel`` answered before the cancelled order's job was sent
    cancel_answer: str = ""
    #: the cancelled order's delivery was acknowledged without running (JobCancelled; the order stays NEW)
    cancel_skipped: bool = False
    group_id: str = ""
    group_counts: tuple[int, int, int, int] = (0, 0, 0, 0)
    group_state: str = ""
    group_reports: int = 0

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
        total, missing = len(BILLING_INVOICES), sum(1 for i in BILLING_INVOICES if i < 0)
        if (self.group_counts, self.group_state, self.group_reports) != \
                ((total, 0, total - missing, missing), "completed_with_failures", 1):
            found.append(f"billing run group: total, pending, succeeded, failed {self.group_counts}, state "
                         f"{self.group_state!r}, report ran {self.group_reports} times; expected "
                         f"{(total, 0, total - missing, missing)}, completed_with_failures, once")
        n = len(EARLY_ORDERS)
        if (self.early_dead_lettered, self.redriven, self.early_processed) != (n, n, n):
            found.append(f"enqueue-before-commit: {self.early_dead_lettered} dead-lettered, {self.redriven} "
                         f"redriven, {self.early_processed} processed; expected {n} each")
        if not (self.delayed_due and self.delayed_waited and self.delayed_processed):
            found.append(f"delayed order {DELAYED_ORDER}: scheduled for {self.delayed_due or 'nothing'}, "
                         f"waited={self.delayed_waited}, processed when fired early={self.delayed_processed}")
        if self.looked_up != ("succeeded", 1):
            found.append(f"status of process-order:{ORDERS[0]}: {self.looked_up}, expected ('succeeded', 1)")
        if self.cancel_answer != "not_found_but_cancelled" or not self.cancel_skipped:
            found.append(f"cancel of process-order:{CANCELLED_ORDER}: {self.cancel_answer or 'nothing'}, "
                         f"acknowledged without running={self.cancel_skipped}")
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
            f"group: billing run {self.group_id[:8]}… e-mailed {self.group_counts[2]} of {self.group_counts[0]} "
            f"invoices ({self.group_counts[3]} missing, dead-lettered) and is {self.group_state}; its report "
            f"(on_complete) ran {self.group_reports} time(s)",
            f"redrive: {self.early_dead_lettered} process-order jobs enqueued before their orders were committed "
            f"were dead-lettered (PermanentError); after the late commit a redrive of job=process-order moved "
            f"{self.redriven} back through the guard and {self.early_processed} were processed",
            f"delayed: process-order {DELAYED_ORDER} enqueued with delay=timedelta(hours=2) waited in a one-time "
            f"EventBridge Scheduler schedule (due {self.delayed_due or '?'}), "
            f"{'not on the queue' if self.delayed_waited else 'NOT held back'}; fired early (sqsjobs local fire "
            f"process-order:{DELAYED_ORDER}) it was {'processed' if self.delayed_processed else 'NOT processed'}",
            f"lifecycle: app.status('process-order:{ORDERS[0]}') -> {self.looked_up[0]} after "
            f"{self.looked_up[1]} attempt(s); app.cancel('process-order:{CANCELLED_ORDER}') before delivery -> "
            f"{self.cancel_answer or '?'}, and its delivery was "
            f"{'acknowledged without running (JobCancelled)' if self.cancel_skipped else 'NOT skipped'}",
        ]


def _tx(cloud: Any, app: Any) -> Transaction:
    return app.transaction(client=cloud.clients.get("dynamodb"), outbox_table=cloud.deployment.tables["OutboxTable"])


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


def start_billing_run(cloud: Any, app: Any) -> str:
    """A job group: every invoice of the run e-mailed, then the run's report once (handlers/app.py)."""
    import handlers.app as reference

    with _on_cloud(cloud, app):
        return str(reference.start_billing_run(BILLING_RUN, BILLING_INVOICES))


def _on_cloud(cloud: Any, app: Any) -> Any:
    """The app, producing onto the local cloud's queue and reading its table, for a ``with`` block."""
    from sqsjobs.store._dynamodb import DynamoDBStore

    worker = cloud.function_env("WorkerFunction")
    return app.use(store=DynamoDBStore(cloud.clients.get("dynamodb"), worker["SQSJOBS_TABLE"]),
                   sqs_client=cloud.clients.get("sqs"),
                   settings={"queue_url": worker["SQSJOBS_QUEUE_URL"], "table_name": worker["SQSJOBS_TABLE"]})


def fire_schedule_twice(cloud: Any) -> list[dict[str, Any]]:
    """Two schedulers firing in the same period: the lease lets one run."""
    runs = []
    for _ in range(2):
        result = cloud.fire("nightly-report")
        runs.append(result.payload if isinstance(result.payload, dict) else {"error": result.error_message})
    return runs


def enqueue_before_commit(cloud: Any, app: Any) -> None:
    """The anti-pattern: jobs on the queue before their orders exist."""
    for order_id in EARLY_ORDERS:
        cloud.send_job(app.message("process-order", order_id=order_id))


def delay_and_fire_early(cloud: Any, app: Any, outcome: PatternsOutcome, wait: Any) -> None:
    """An order processed two hours after it was placed: it waits in a schedule; the demo fires it now."""
    table = orders_table(cloud)
    dynamodb = cloud.clients.get("dynamodb")
    dynamodb.put_item(TableName=table, Item={"pk": {"S": f"order#{DELAYED_ORDER}"}, "total_cents": {"N": "4200"},
                                             "status": {"S": "NEW"}})
    with cloud.producing(app) as producer:  # the app as the template configures its functions
        scheduled = producer.enqueue("process-order", order_id=DELAYED_ORDER, delay=timedelta(hours=2))
    outcome.delayed_due = scheduled.due.strftime("%H:%M:%SZ") if hasattr(scheduled, "due") else ""
    key = f"process-order:{DELAYED_ORDER}"
    waiting = [name for _, name, _ in cloud.one_time.pending()] if cloud.one_time is not None else []
    outcome.delayed_waited = schedule_name(key) in waiting and _order_status(cloud, DELAYED_ORDER) == "NEW"
    fired = cloud.fire_delayed(key)
    outcome.delayed_processed = bool(fired) and all(f.ok for f in fired) and wait(
        lambda: _order_status(cloud, DELAYED_ORDER) == "PROCESSED")


def look_up_and_cancel(cloud: Any, app: Any, outcome: PatternsOutcome, wait: Any) -> None:
    """Ask what happened to a job by its key; cancel one before its delivery, which then does not run."""
    from sqsjobs.local.timeline import metric_total

    dynamodb = cloud.clients.get("dynamodb")
    dynamodb.put_item(TableName=orders_table(cloud), Item={"pk": {"S": f"order#{CANCELLED_ORDER}"},
                                                           "total_cents": {"N": "990"}, "status": {"S": "NEW"}})
    key = f"process-order:{CANCELLED_ORDER}"
    with cloud.producing(app) as producer:  # the app as the template configures its functions
        wait(lambda: getattr(producer.status(f"process-order:{ORDERS[0]}"), "state", None) == "succeeded")
        done = producer.status(f"process-order:{ORDERS[0]}")
        outcome.looked_up = (done.state, done.attempts) if done is not None else ("not found", 0)
        before = metric_total(cloud, "JobCancelled", Job="process-order")
        outcome.cancel_answer = producer.cancel(key, reason="the customer cancelled the order")
        producer.enqueue("process-order", order_id=CANCELLED_ORDER)
    outcome.cancel_skipped = wait(lambda: metric_total(cloud, "JobCancelled", Job="process-order") > before) \
        and _order_status(cloud, CANCELLED_ORDER) == "NEW"


def _order_status(cloud: Any, order_id: int) -> str | None:
    item = cloud.clients.get("dynamodb").get_item(TableName=orders_table(cloud),
                                                  Key={"pk": {"S": f"order#{order_id}"}}).get("Item") or {}
    status = item.get("status", {}).get("S")
    return str(status) if status is not None else None


def dlq_url(cloud: Any) -> str:
    """The DLQ of the app's queue."""
    queue = cloud.deployment.queues[cloud.app_queue()]
    return str(cloud.deployment.queue_by_arn(queue.dead_letter_arn).url)


def redrive_after_late_commit(cloud: Any, wait: Any) -> tuple[int, int]:
    """Wait for the early jobs to dead-letter, commit their orders, redrive; return (dead, moved)."""
    dead = wait(lambda: _dead_letters_of(cloud, "process-order") >= len(EARLY_ORDERS))
    dynamodb = cloud.clients.get("dynamodb")
    for order_id in EARLY_ORDERS:
        dynamodb.put_item(TableName=orders_table(cloud), Item={
            "pk": {"S": f"order#{order_id}"}, "total_cents": {"N": "100"}, "status": {"S": "NEW"}})
    options = RedriveOptions(dlq=dlq_url(cloud), job="process-order", wait_time_seconds=0, stop_margin_seconds=0)
    summary = Redrive(options, sqs_client=cloud.clients.get("sqs")).run()
    return (len(EARLY_ORDERS) if dead else _dead_letters_of(cloud, "process-order")), summary.moved


def _dead_letters_of(cloud: Any, job: str) -> int:
    attributes = cloud.clients.get("sqs").get_queue_attributes(
        QueueUrl=dlq_url(cloud), AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    if int(attributes["ApproximateNumberOfMessages"]) == 0:
        return 0
    letters = cloud.peek_all(cloud.deployment.queue_by_url(dlq_url(cloud)).logical_id)
    return sum(1 for m in letters
               if m.get("MessageAttributes", {}).get("sqsjobs.job", {}).get("StringValue") == job)


def check(cloud: Any, outcome: PatternsOutcome) -> None:
    """Read back orders and the run record into ``outcome``."""
    dynamodb = cloud.clients.get("dynamodb")
    processed = 0
    for order_id in ORDERS:
        item = dynamodb.get_item(TableName=orders_table(cloud), Key={"pk": {"S": f"order#{order_id}"}}).get("Item")
        processed += int(bool(item) and item["status"]["S"] == "PROCESSED")
    outcome.orders_processed = processed
    outcome.early_processed = sum(
        1 for order_id in EARLY_ORDERS
        if (dynamodb.get_item(TableName=orders_table(cloud), Key={"pk": {"S": f"order#{order_id}"}}).get("Item")
            or {}).get("status", {}).get("S") == "PROCESSED"
    )
    # Reading only: the TTL matters to writes.
    store = DynamoDBStore(dynamodb, cloud.function_env("WorkerFunction")["SQSJOBS_TABLE"])
    status = RunStore(store, ttl=0.0).status("reindex-products", RUN_ID)
    outcome.reindex_pages = status.pages_done if status else 0
    outcome.reindex_finished = bool(status and status.finished)
    if outcome.group_id:
        from sqsjobs.cli.enqueue import load_app

        with _on_cloud(cloud, load_app("handlers.app:app")) as app:
            group = app.group_status(outcome.group_id)
        if group is not None:
            outcome.group_counts = (group.total, group.pending, group.succeeded, group.failed)
            outcome.group_state = group.state
        report = dynamodb.get_item(TableName=orders_table(cloud),
                                   Key={"pk": {"S": f"report#billing-run#{BILLING_RUN}"}}).get("Item") or {}
        outcome.group_reports = int(report.get("runs", {}).get("N", "0"))
