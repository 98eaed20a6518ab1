"""What a job group costs: write units and round trips per member, against the same jobs outside a group.

The worker runs the same jobs twice on a moto server (the local cloud's: DynamoDB atomic, transactions
checked before they write), once plain and once as the members of one group with an ``on_complete``
callback. Every DynamoDB call is counted through botocore's hooks; write units are computed from the
item sizes the run left in the table, a transaction billing each of its items twice, as DynamoDB does.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

from bench.support import CallLog, add_latency, client, create_queues, create_table, item_bytes, sequential_depth

LATENCY = 0.005
MEMBERS = (100, 1000)
WRITES = ("PutItem", "UpdateItem", "DeleteItem")


@dataclass
class GroupFigures:
    """Per run (``plain`` or ``group of N``): DynamoDB calls and units per member, and the group's own costs."""

    members: dict[str, int] = field(default_factory=dict)
    calls: dict[str, dict[str, float]] = field(default_factory=dict)
    wcu: dict[str, float] = field(default_factory=dict)
    rcu: dict[str, float] = field(default_factory=dict)
    depth: dict[str, list[int]] = field(default_factory=dict)
    enqueue_wcu: dict[str, float] = field(default_factory=dict)
    shards: dict[str, int] = field(default_factory=dict)
    callbacks_run: dict[str, int] = field(default_factory=dict)
    largest_item: dict[str, int] = field(default_factory=dict)


def group_figures() -> GroupFigures:
    """Plain jobs, then groups of each size in ``MEMBERS``, through the worker."""
    out = GroupFigures()
    from sqsjobs.local.serial_moto import serving

    with serving() as endpoint:
        sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint, framework="sqsjobs")
        for label, members in [("plain", MEMBERS[0]), *((f"group of {n:,}", n) for n in MEMBERS)]:
            _run(out, label, members, sqs, dynamodb)
    return out


def _run(out: GroupFigures, label: str, members: int, sqs: Any, dynamodb: Any) -> None:
    from sqsjobs import JobApp
    from sqsjobs.testing import receive_event

    name = label.replace(" ", "-").replace(",", "")
    queue, dlq = create_queues(sqs, f"bench-groups-{name}")
    table = f"bench-groups-{name}"
    create_table(dynamodb, table, "pk")
    log = CallLog()
    log.attach(dynamodb)
    add_latency(dynamodb, LATENCY)
    ran: list[str] = []
    app = JobApp(queue_url=queue, dlq_url=dlq, table_name=table, sqs_client=sqs, dynamodb_client=dynamodb,
                 emit_metrics=lambda line: None, sleep=lambda seconds: None)

    @app.job("resize", key="resize:{n}")
    def resize(n: int) -> None: ...

    @app.job("report", key="report:{run}")
    def report(run: str) -> None:
        ran.append(run)

    messages = [resize.message(n=n) for n in range(members)]
    log.clear()
    if label == "plain":
        app.enqueue_many(messages)
    else:
        group = app.group(on_complete=report.message(run=name))
        group.add_many(messages)
        group.enqueue()
        out.shards[label] = int(app.runtime.store.get(f"group#{group.id}").get("shards"))
    enqueue_calls = list(log.calls)
    log.clear()
    depths = []
    while True:
        event = receive_event(sqs, queue, visibility_timeout=60)
        if not event["Records"]:
            break
        before = len(log.calls)
        result = app.process_batch(event)
        depths.append(sequential_depth(log.calls[before:]))
        entries = [{"Id": str(i), "ReceiptHandle": d.receipt_handle} for i, d in enumerate(result.deliveries)
                   if d.acknowledged]
        if entries:
            sqs.delete_message_batch(QueueUrl=queue, Entries=entries)
    calls = [c for c in log.calls if c.service == "dynamodb"]
    items = dynamodb.scan(TableName=table)["Items"]
    sizes = {item["pk"]["S"]: item_bytes(item) for item in items}
    out.members[label] = members
    out.calls[label] = {op: sum(1 for c in calls if c.operation == op) / members
                        for op in sorted({c.operation for c in calls})}
    out.wcu[label] = sum(_wcu(c, sizes) for c in calls) / members
    out.rcu[label] = sum(_rcu(c, sizes) for c in calls) / members
    out.depth[label] = depths
    out.enqueue_wcu[label] = sum(_wcu(c, sizes) for c in enqueue_calls if c.service == "dynamodb") / members
    out.callbacks_run[label] = len(ran)
    out.largest_item[label] = max(sizes.values())
    app.runtime.store.close()


def _units(size: int, unit: int) -> int:
    return max(1, math.ceil(size / unit))


def _request(call: Any) -> dict[str, Any]:
    """The API parameters of a call (botocore's hooks see the serialized request)."""
    return dict(json.loads(call.params["body"])) if "body" in call.params else dict(call.params)


def _key(params: dict[str, Any]) -> str:
    return str((params.get("Key") or params.get("Item") or {}).get("pk", {}).get("S", ""))


def _wcu(call: Any, sizes: dict[str, int]) -> float:
    """Write units of one call: each item ceil(size / 1 KB); each item of a transaction twice."""
    if call.operation in WRITES:
        return _units(sizes.get(_key(_request(call)), 0), 1024)
    if call.operation == "BatchExecuteStatement":  # each statement a write of its own (store/_statements.py)
        return sum(_units(sizes.get(_statement_key(st), 0), 1024) for st in _request(call)["Statements"])
    if call.operation == "TransactWriteItems":
        keys = [_key(next(iter(entry.values()))) for entry in _request(call)["TransactItems"]]
        return sum(2 * _units(sizes.get(k, 0), 1024) for k in keys)
    return 0.0


def _statement_key(statement: dict[str, Any]) -> str:
    """The key of one of sqsjobs' statements: an INSERT's first parameter, an UPDATE's first after WHERE."""
    text = str(statement["Statement"])
    index = text.split(" WHERE ", 1)[0].count("?") if text.startswith("UPDATE") else 0
    return str(statement["Parameters"][index].get("S", ""))


def _rcu(call: Any, sizes: dict[str, int]) -> float:
    """Read units of one consistent read: each item ceil(size / 4 KB)."""
    if call.operation == "GetItem":
        return _units(sizes.get(_key(_request(call)), 0), 4096)
    if call.operation == "BatchGetItem":
        keys = [k["pk"]["S"] for request in _request(call)["RequestItems"].values() for k in request["Keys"]]
        return sum(_units(sizes.get(k, 0), 4096) for k in keys if k in sizes)
    return 0.0


def summary_row(g: GroupFigures) -> str:
    """The summary table's row: write units per member of the largest group, against the same job plain."""
    largest = max((k for k in g.members if k != "plain"), key=lambda k: g.members[k])
    return (f"| DynamoDB WCU per job group member, success ({largest}, computed from item sizes) | "
            f"{g.wcu[largest]:.2f} | {g.wcu['plain']:.2f} for the same job outside a group (Powertools has no "
            f"groups) | | one write added to the completion | see \"Job groups\" |")


def render(g: GroupFigures) -> list[str]:
    """BENCHMARKS.md's section on groups."""
    import statistics

    lines = ["## Job groups: what a member costs", "",
             "The same jobs through the worker on the local cloud's moto server, plain and as the members of one "
             "group with an `on_complete` callback (`bench/groups.py`). Write units are computed from the item "
             "sizes the run left in the table; a `TransactWriteItems` bills each of its items twice.", "",
             "| run | members | shards | DynamoDB calls per member | WCU per member (worker) | "
             "RCU per member (worker) | WCU per member at enqueue | round trips per batch of 10 | callbacks run |",
             "|---|---|---|---|---|---|---|---|---|"]
    for label in g.members:
        calls = ", ".join(f"{n:.3g} {op}" for op, n in g.calls[label].items())
        depth = statistics.median(g.depth[label]) if g.depth[label] else 0
        lines.append(f"| {label} | {g.members[label]:,} | {g.shards.get(label, '-')} | {calls} | "
                     f"{g.wcu[label]:.2f} | {g.rcu[label]:.2f} | {g.enqueue_wcu[label]:.2f} | {depth:g} "
                     f"(max {max(g.depth[label], default=0)}) | {g.callbacks_run[label]} |")
    plain = g.wcu.get("plain", 0.0)
    member = g.wcu.get(next((k for k in g.members if k != "plain"), "plain"), 0.0)
    lines += ["", f"A member's completion carries its group's count: the same two requests per member as a plain "
              f"job (a claim, then the completion as one `TransactWriteItems` of the job's record and its counter "
              f"shard), so one write is added to the completion. In write units that is {plain:.2f} → "
              f"{member:.2f} per member: a transaction bills each of its two items twice (4 WCU for the "
              "completion), and the group's finish adds a little (the head's state and the callback's own claim "
              "and completion, shared by all members). Each shard's last member sends its transaction twice (the "
              "first is refused: it finds itself the last), hence 1.01 transactions per member. The enqueue "
              "writes the group's head, its shards and its member list (a few bytes per member). The reads are "
              "the finish: the member that empties a shard sums every shard (one `BatchGetItem`) and reads the "
              "head (one `GetItem`). The batch that finishes the group takes those round trips in sequence "
              "(the max); every other batch takes 2, as without groups.", ""]
    return lines
