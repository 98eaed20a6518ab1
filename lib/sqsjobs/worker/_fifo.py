"""FIFO order: on a FIFO queue, nothing of a message group runs after one of its messages that goes back.

A stage (``worker/_stages.py``). SQS delivers a FIFO group's messages in
order; when one of them goes back (a retry, a lease held elsewhere, no time),
every later message of its group in the batch goes back unstarted too
(``group_blocked``), so the group's order holds on the next delivery.
Earlier messages of the group are not affected: order is by the batch's index.
"""

from __future__ import annotations

from sqsjobs.worker._batch import Batch
from sqsjobs.worker._decision import Action, Ending, Facts
from sqsjobs.worker._delivery import Delivery
from sqsjobs.worker._stages import Stage


class FifoOrderStage(Stage):
    """Blocks, in a batch, each FIFO group after the first of its messages that goes back."""

    def concerns(self, d: Delivery) -> bool:
        return d.group_id is not None

    def after_decision(self, batch: Batch, d: Delivery) -> None:
        if d.group_id is None or d.decision is None or d.decision.action in (Action.ACK, Action.DEAD_LETTER):
            return
        blocked: dict[str, int] = batch.scratch(self, dict)  # group id → its first message that goes back
        blocked[d.group_id] = min(blocked.get(d.group_id, d.index), d.index)

    def before_run(self, batch: Batch, d: Delivery) -> Facts | None:
        first = batch.scratch(self, dict).get(d.group_id or "")
        if d.group_id is not None and first is not None and first < d.index:
            return Facts(ending=Ending.ORDER_BLOCKED)
        return None
