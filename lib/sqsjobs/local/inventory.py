"""What a stopping local cloud keeps for the next ``local up``: its queues, tables and schedules, counted.

Read through the service APIs just before the moto server saves its state
(``sqsjobs.local.snapshot``), so the line Ctrl-C prints says what the next run resumes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqsjobs.local.model import Deployment


@dataclass(frozen=True)
class Inventory:
    """Counts of what the saved state holds.

    Example:
        >>> Inventory(queues=3, visible=4, in_flight=1, delayed=2, tables=2, items=17, schedules=1).describe()
        '3 queue(s) with 7 message(s) (4 visible, 2 delayed, 1 in flight), 2 table(s) with 17 item(s), \
1 pending schedule(s)'
    """

    queues: int
    visible: int
    in_flight: int
    delayed: int
    tables: int
    items: int
    schedules: int

    @property
    def messages(self) -> int:
        """Every message on the queues."""
        return self.visible + self.in_flight + self.delayed

    def describe(self) -> str:
        """The counts in words."""
        return (f"{self.queues} queue(s) with {self.messages} message(s) ({self.visible} visible, {self.delayed} "
                f"delayed, {self.in_flight} in flight), {self.tables} table(s) with {self.items} item(s), "
                f"{self.schedules} pending schedule(s)")


def inventory(clients: Any, deployment: Deployment) -> Inventory:
    """Count the deployment's queues' messages, its tables' items and its schedule groups' schedules."""
    sqs, dynamodb, scheduler = clients.get("sqs"), clients.get("dynamodb"), clients.get("scheduler")
    visible = in_flight = delayed = 0
    for queue in deployment.queues.values():
        attributes = sqs.get_queue_attributes(QueueUrl=queue.url, AttributeNames=[
            "ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible",
            "ApproximateNumberOfMessagesDelayed"])["Attributes"]
        visible += int(attributes.get("ApproximateNumberOfMessages", 0))
        in_flight += int(attributes.get("ApproximateNumberOfMessagesNotVisible", 0))
        delayed += int(attributes.get("ApproximateNumberOfMessagesDelayed", 0))
    items = 0
    for table in deployment.tables.values():
        for page in dynamodb.get_paginator("scan").paginate(TableName=table, Select="COUNT"):
            items += int(page["Count"])
    schedules = 0
    for group in deployment.schedule_groups.values():
        for page in scheduler.get_paginator("list_schedules").paginate(GroupName=group):
            schedules += len(page.get("Schedules", []))
    return Inventory(queues=len(deployment.queues), visible=visible, in_flight=in_flight, delayed=delayed,
                     tables=len(deployment.tables), items=items, schedules=schedules)
