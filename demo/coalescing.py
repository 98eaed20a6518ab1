"""The demo's debounce and dedupe phase: 20 edits of one product coalesce into 1 reindex; a second export of one
account is refused at the producer.

The phase declares its own two jobs on an app of its own, over the local cloud's
idempotency table and a queue of its own that no event source mapping polls
(the deployed worker runs the reference app, which does not know them): it
plays Lambda's poller itself, in process (``process_batch``). The debounce
window is 0.4 s (SQS's ``DelaySeconds`` 0), so the burst is delivered at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

EDITS = 20
PRODUCT = 42
ACCOUNT = 7
QUEUE = "demo-coalescing"


@dataclass
class CoalescingOutcome:
    """What the phase did.

    Example:
        >>> CoalescingOutcome().problems()[0]
        'debounce: 0 reindex run(s) for 20 edits (want 1, with the last edit)'
    """

    reindexed: list[str] = field(default_factory=list)
    superseded: int = 0
    #: ``sqsjobs job KEY``'s view of the product's key while the burst waited: (state, requests coalesced)
    waiting: tuple[str, int] = ("", 0)
    export_refused: bool = False
    exports_sent: int = 0
    exports_run: int = 0

    def problems(self) -> list[str]:
        """Differences from what must happen (empty: as expected)."""
        found = []
        if self.reindexed != [f"edit {EDITS - 1}"]:
            found.append(f"debounce: {len(self.reindexed)} reindex run(s) for {EDITS} edits (want 1, with the "
                         "last edit)")
        if self.superseded != EDITS - 1 or self.waiting != ("waiting", EDITS):
            found.append(f"debounce: {self.superseded} superseded deliveries, key shown as {self.waiting}")
        if not self.export_refused or self.exports_sent != 1 or self.exports_run != 1:
            found.append(f"dedupe: refused={self.export_refused}, sent {self.exports_sent}, ran {self.exports_run}")
        return found

    def lines(self) -> list[str]:
        """The report's lines for this phase."""
        return [f"debounce: {EDITS} edits of product {PRODUCT} -> {len(self.reindexed)} reindex "
                f"({', '.join(self.reindexed) or 'none'}), {self.superseded} superseded; `sqsjobs job` showed "
                f"{self.waiting[0]} with {self.waiting[1]} requests coalesced",
                f"dedupe: a second export of account {ACCOUNT} was "
                f"{'refused at the producer (nothing sent)' if self.export_refused else 'NOT refused'}; "
                f"{self.exports_sent} sent, {self.exports_run} run"]


def run(sqs: Any, dynamodb: Any, table: str) -> CoalescingOutcome:
    """The phase on these clients: the local cloud's, or moto's in a test."""
    from sqsjobs import JobApp, Outcome
    from sqsjobs.enqueue._debounce import coalescing
    from sqsjobs.testing import FakeContext, receive_event

    outcome = CoalescingOutcome()
    queue = sqs.create_queue(QueueName=QUEUE, Attributes={"VisibilityTimeout": "60"})["QueueUrl"]
    app = JobApp(queue_url=queue, table_name=table, sqs_client=sqs, dynamodb_client=dynamodb,
                 emit_metrics=lambda line: None)

    @app.job("demo-reindex", key="demo-reindex:{product_id}", debounce=0.4)
    def reindex(product_id: int, title: str) -> None:
        outcome.reindexed.append(title)

    @app.job("demo-export", key="demo-export:{account_id}", dedupe="until_done")
    def export(account_id: int) -> None:
        outcome.exports_run += 1

    for n in range(EDITS):
        reindex.enqueue(product_id=PRODUCT, title=f"edit {n}")
    item = app.runtime.store.get(f"demo-reindex:{PRODUCT}")
    view = coalescing(item, now=app.runtime.clock()) if item is not None else None
    outcome.waiting = (view.state, view.coalesced) if view is not None else ("", 0)
    first = export.enqueue(account_id=ACCOUNT)
    outcome.export_refused = export.enqueue(account_id=ACCOUNT).duplicate and not first.duplicate
    outcome.exports_sent = int(sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=[
        "ApproximateNumberOfMessages"])["Attributes"]["ApproximateNumberOfMessages"]) - EDITS
    while (event := receive_event(sqs, queue))["Records"]:
        result = app.process_batch(event, FakeContext())
        outcome.superseded += sum(1 for d in result.deliveries if d.outcome is Outcome.SUPERSEDED)
        done = [{"Id": str(i), "ReceiptHandle": r["receiptHandle"]} for i, r in enumerate(event["Records"])
                if r["messageId"] not in set(result.failures)]
        if done:
            sqs.delete_message_batch(QueueUrl=queue, Entries=done)
    return outcome
