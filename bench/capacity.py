"""A capacity model for 10,000 jobs a second: the items many deliveries write, and the time to drain a backlog.

Run ``python -m bench.capacity`` to print it (``make bench`` puts it in BENCHMARKS.md). It is arithmetic
over stated assumptions, not a measurement: each row says what it assumes, and the constants it reads
come from the code (``sqsjobs.flow._permits``, ``sqsjobs.workflows._groups``), so the model follows it.

**Hot items.** DynamoDB serves at most 1,000 write units and 3,000 read units a second per partition,
and one item lives in one partition, so no item may take more than that, however the table scales.
For every item that many deliveries write (a limiter's tokens and slots, a group's counter shards, a
chunked run's record, a period lock, and the job records themselves), the model gives its write units
a second at the load, and the verdict against 1,000.

**Drain.** 1 million jobs of 100 ms each (100,000 concurrency-seconds; an invocation runs its batch's
jobs one after another, so one concurrent execution finishes 10 jobs a second, whatever the batch size)
under the event source mapping's standard scaling and under provisioned mode, with Lambda's account
concurrency and the idempotency table's on-demand throughput as caps.

Example:
    >>> round(drain_seconds(Scaling(start=5, per_minute=300, maximum=1250)))
    199
    >>> round(drain_seconds(Scaling(start=1250, per_minute=300, maximum=1250)))
    80
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sqsjobs.flow._permits import CONTENDED_READS, CONTENDED_SECONDS, SLOT_PROBES
from sqsjobs.flow._schedule import FULL_RETRY_SECONDS
from sqsjobs.workflows._groups import MAX_SHARDS, MEMBERS_PER_SHARD

#: the load
JOBS_PER_SECOND = 10_000
BATCH = 10
JOB_SECONDS = 0.1
#: DynamoDB's per-partition throughput (on-demand and provisioned alike), and so per item
PARTITION_WCU = 1_000
PARTITION_RCU = 3_000
#: a new on-demand table serves this many write units a second at first (then up to twice its previous peak)
NEW_ON_DEMAND_TABLE_WCU = 4_000
#: write units of a successful job: the claim and the completion (items under 1 KB), BENCHMARKS.md measures it
WCU_PER_JOB = 2
BACKLOG = 1_000_000
#: Lambda's default concurrency per account and region (raise it with a quota request)
ACCOUNT_CONCURRENCY = 1_000

SOURCES = {
    "partition": "DynamoDB developer guide, 'Burst and adaptive capacity' / partitions: 3,000 RCU and "
                 "1,000 WCU per partition",
    "on-demand": "DynamoDB developer guide, 'On-demand capacity mode': a new table sustains 4,000 writes/s at "
                 "first, then twice its previous peak within 30 minutes",
    "standard": "Lambda developer guide, 'Configuring scaling behavior for SQS event source mappings': starts "
                "at 5, adds up to 300 concurrent executions a minute, at most 1,250 per mapping",
    "provisioned": "AWS News Blog, Lambda SQS provisioned mode: up to 1,000 concurrency added a minute, up to "
                   "20,000; MinimumPollers 1-200; about 10 concurrent invokes per poller (third-party figure)",
}


@dataclass(frozen=True)
class Item:
    """One kind of item many deliveries write, at the model's load."""

    name: str
    key: str
    scenario: str
    wcu_per_second: float
    rcu_per_second: float = 0.0
    note: str = ""

    @property
    def over(self) -> bool:
        """Past what one item (one partition) can take."""
        return self.wcu_per_second > PARTITION_WCU or self.rcu_per_second > PARTITION_RCU


def batches_per_second(jobs: float = JOBS_PER_SECOND) -> float:
    return jobs / BATCH


def invocations(jobs: float = JOBS_PER_SECOND) -> float:
    """Concurrent invocations at the load (Little's law: batches a second x a batch's seconds)."""
    return batches_per_second(jobs) * BATCH * JOB_SECONDS


def hot_items(jobs: float = JOBS_PER_SECOND) -> list[Item]:
    """Every item many deliveries write, with its write (and read) units a second at ``jobs`` a second."""
    b, p = batches_per_second(jobs), invocations(jobs)
    slot_writes_free = SLOT_PROBES + (SLOT_PROBES - 1) + 1  # probes, the extras given back, the kept one's release
    items = [
        Item("job record", "<job key>", "every job", WCU_PER_JOB / 1.0,
             note=f"one item per job, written twice in its life; the table takes {jobs * WCU_PER_JOB:,.0f} WCU/s "
                  f"in all, spread over many partitions by key"),
        Item("rate-limit schedule", "limit#<name>#gcra", f"rate_limit(rate={int(jobs):,}/s), sized for the load",
             b * 1.0,
             note="one conditional write per batch, whatever its size (sqsjobs.flow._schedule: the batch reserves a "
                  "start slot for each job); copies back at their slots write nothing"),
        Item("rate-limit schedule", "limit#<name>#gcra",
             "rate_limit(rate=10/s) saturated: the schedule full to its 15-minute horizon",
             p / FULL_RETRY_SECONDS + 10 / BATCH,
             note=f"each of the {p:,.0f} invocations writes once, is refused, then knows the schedule is full and "
                  f"writes again only once {FULL_RETRY_SECONDS:g} s of the horizon are free; the jobs it defers "
                  "meanwhile come back spread over those seconds"),
        Item("concurrency slot", "limit#<name>#slot#<i>", f"concurrency_limit({int(p):,}), sized for the load",
             b * slot_writes_free / p,
             note=f"a batch probes {SLOT_PROBES} slots, keeps one, gives the others back, releases the kept one"),
        Item("concurrency slot", "limit#<name>#slot#<i>",
             "concurrency_limit(2) saturated, every batch probing blind (before)",
             b * min(SLOT_PROBES, 2) / 2 + 2,
             note="each batch's refused probes are billed write units on the same two items"),
        Item("concurrency slot", "limit#<name>#slot#<i>",
             "concurrency_limit(2) saturated, contended slots read first (sqsjobs.flow._permits)",
             p / CONTENDED_SECONDS + 2 * (1 + 5), rcu_per_second=b * min(2, CONTENDED_READS) / 2,
             note=f"refused blind probes: one per invocation per {CONTENDED_SECONDS:g} s; then reads (one "
                  "consistent read a batch per slot) and writes only to a slot that looks free: its turnover "
                  "(a probe and a release per holder) and the racers that read it free first (about 5)"),
    ]
    group_shards = MAX_SHARDS
    items.append(Item("group counter shard", "group#<id>#shard#<s>",
                      f"one group of 1,000,000 members finishing at {int(jobs):,}/s ({group_shards} shards)",
                      jobs / group_shards * 2,
                      note="each member's count is a TransactWriteItems (2 WCU on the shard); overlapping "
                           "transactions on one shard conflict and are sent again"))
    items.append(Item("group counter shard", "group#<id>#shard#<s>",
                      f"groups of up to {MEMBERS_PER_SHARD * MAX_SHARDS:,} members ({MEMBERS_PER_SHARD} a shard)",
                      MEMBERS_PER_SHARD * 2,
                      note="a shard's whole life is 200 WCU, even when its members all finish within a second"))
    items.append(Item("chunked run record", "run#<job>:<run_id>", "one run, 100 ms pages", 2 / JOB_SECONDS,
                      rcu_per_second=1 / JOB_SECONDS,
                      note="a run moves one page at a time: a read and a hand-over per page"))
    items.append(Item("period lock", "lock#<job>:<period>", "a scheduled job, every minute", 3 / 60,
                      note="a fire's lease and its completion, plus a duplicate fire's refused take"))
    return items


@dataclass(frozen=True)
class Scaling:
    """How the concurrency of one event source mapping grows: from ``start``, ``per_minute`` more, up to ``maximum``."""

    start: float
    per_minute: float
    maximum: float
    #: the account's concurrency, and the jobs a second the table's write units allow (None: no cap)
    account: float | None = None
    table_jobs_per_second: float | None = None


def drain_seconds(scaling: Scaling, backlog: float = BACKLOG, step: float = 0.01) -> float:
    """Seconds to finish ``backlog`` jobs of ``JOB_SECONDS`` each, the concurrency ramping continuously."""
    done, t = 0.0, 0.0
    while done < backlog:
        concurrency = min(scaling.maximum, scaling.start + scaling.per_minute * t / 60)
        if scaling.account is not None:
            concurrency = min(concurrency, scaling.account)
        rate = concurrency / JOB_SECONDS
        if scaling.table_jobs_per_second is not None:
            rate = min(rate, scaling.table_jobs_per_second)
        done += rate * step
        t += step
    return t


def drain_scenarios() -> list[tuple[str, Scaling]]:
    """The scenarios the model compares (research numbers: see SOURCES)."""
    table = NEW_ON_DEMAND_TABLE_WCU / WCU_PER_JOB
    return [
        ("standard: from 5, +300/min, at most 1,250 (account concurrency raised)", Scaling(5, 300, 1250)),
        ("standard, within the default account concurrency of 1,000", Scaling(5, 300, 1250, account=1000)),
        ("standard, already at 1,250", Scaling(1250, 300, 1250)),
        ("standard, a new on-demand table (4,000 WCU/s at first)", Scaling(5, 300, 1250, table_jobs_per_second=table)),
        ("provisioned: MinimumPollers 2 (about 20), +1,000/min, account concurrency 1,000",
         Scaling(20, 1000, 20000, account=1000)),
        ("provisioned: MinimumPollers 2, account concurrency raised", Scaling(20, 1000, 20000)),
        ("provisioned: MinimumPollers 125 (1,250 at once), +1,000/min", Scaling(1250, 1000, 20000)),
        ("provisioned: MinimumPollers 200 (2,000 at once, the most), +1,000/min", Scaling(2000, 1000, 20000)),
    ]


@dataclass(frozen=True)
class Capacity:
    items: list[Item]
    drains: list[tuple[str, float, float]]


def model() -> Capacity:
    """The items at 10,000 jobs a second, and each drain scenario's seconds and peak jobs a second."""
    drains = []
    for label, scaling in drain_scenarios():
        seconds = drain_seconds(scaling)
        peak = min(scaling.maximum, scaling.start + scaling.per_minute * seconds / 60, scaling.account or math.inf)
        rate = min(peak / JOB_SECONDS, scaling.table_jobs_per_second or math.inf)
        drains.append((label, seconds, rate))
    return Capacity(items=hot_items(), drains=drains)


def render_markdown(capacity: Capacity) -> list[str]:
    """BENCHMARKS.md's section."""
    b, p = batches_per_second(), invocations()
    lines = [
        "## Capacity at 10,000 jobs a second (`bench/capacity.py`)",
        "",
        f"A model, not a measurement. Assumptions: {JOBS_PER_SECOND:,} deliveries a second in batches of {BATCH} "
        f"({b:,.0f} batches a second), jobs of {JOB_SECONDS * 1000:.0f} ms run one after another in their "
        f"invocation (so {p:,.0f} invocations at once), every item under 1 KB (a write is 1 WCU, a refused "
        "conditional write too; a transaction's item 2), every delivery of the limited rows asking for the same "
        f"limiter. The limit per item is one partition's: {PARTITION_WCU:,} WCU/s and {PARTITION_RCU:,} RCU/s.",
        "",
        "| item | key | scenario | WCU/s | RCU/s | verdict | why |",
        "|---|---|---|---|---|---|---|",
    ]
    for item in capacity.items:
        verdict = "**over**" if item.over else "under"
        lines.append(f"| {item.name} | `{item.key}` | {item.scenario} | {item.wcu_per_second:,.1f} | "
                     f"{item.rcu_per_second:,.0f} | {verdict} | {item.note} |")
    lines += [
        "",
        f"The table as a whole takes {JOBS_PER_SECOND * WCU_PER_JOB:,} WCU/s for the job records alone; a new "
        f"on-demand table serves {NEW_ON_DEMAND_TABLE_WCU:,} at first, so set the table's warm throughput "
        "(or pre-warm it) before such a load, or the first minutes run at "
        f"{NEW_ON_DEMAND_TABLE_WCU // WCU_PER_JOB:,} jobs a second.",
        "",
        f"**Draining a backlog of {BACKLOG:,} jobs of {JOB_SECONDS * 1000:.0f} ms** ({BACKLOG * JOB_SECONDS:,.0f} "
        "concurrency-seconds; one concurrent execution finishes 10 jobs a second; invoke overhead left out; the "
        "concurrency ramps continuously rather than in steps):",
        "",
        "| scenario | drain, s | jobs/s at the end |",
        "|---|---|---|",
    ]
    for label, seconds, rate in capacity.drains:
        lines.append(f"| {label} | {seconds:,.0f} | {rate:,.0f} |")
    lines += ["", "Sources of the limits (read for this model, not measured):", ""]
    lines += [f"- {name}: {text}." for name, text in SOURCES.items()]
    lines.append("")
    return lines


if __name__ == "__main__":
    print("\n".join(render_markdown(model())))
