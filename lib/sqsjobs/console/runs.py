"""Chunked runs, job groups and scheduled periods: the ``run#`` and ``group#`` records, and the periods' own.

A scheduled job's period is its job's record (``schedules/_period_locks.py``),
found by its ``period`` field.

The table has one key (``pk``) and no index by prefix, so finding them is a
``Scan`` with a prefix filter, bounded by ``max_items`` items read (about
1 KB each) so a big table costs a known amount per look; the page says when
the bound cut the scan short, and a run can still be looked up exactly by
``JOB:RUN_ID``. Each record found is read through its owner's code
(:class:`sqsjobs.workflows._chunked.RunStore`, :class:`sqsjobs.schedules._period_locks.PeriodLocks`), so
the page shows what ``sqsjobs status --run`` and the scheduler see. A job
group is looked up by its id through ``app.group_status`` (what ``sqsjobs
group ID`` shows): one read of its head and one of its counter shards.

Example:
    >>> parse_run_ref("reindex-products:2026-08-05")
    ('reindex-products', '2026-08-05')
    >>> parse_run_ref("no-run-id") is None
    True
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from sqsjobs._app import JobApp
from sqsjobs.schedules._period_locks import PeriodLocks
from sqsjobs.store._dynamodb import DynamoDBStore
from sqsjobs.store._lease import LeaseItem
from sqsjobs.store._table import KEY_ATTRIBUTE
from sqsjobs.workflows._chunked import RUN_PREFIX, RunStatus, RunStore

if TYPE_CHECKING:
    from mypy_boto3_dynamodb import DynamoDBClient

    from sqsjobs.workflows._groups import GroupStatus

#: items a look at the runs page reads at most (the scan's cost bound)
DEFAULT_SCAN_ITEMS: Final = 20_000
#: records shown per kind; the rest are counted
SHOWN: Final = 100


@dataclass(frozen=True, kw_only=True)
class RunsAndLeases:
    """The run and lease records found, and how much of the table was read to find them."""

    runs: tuple[RunStatus, ...]
    leases: tuple[LeaseItem, ...]
    scanned: int
    complete: bool
    more_runs: int = 0
    more_leases: int = 0


def parse_run_ref(text: str) -> tuple[str, str] | None:
    """``JOB:RUN_ID`` as ``(job, run_id)``; None when it is not that shape."""
    job, sep, run_id = text.strip().rpartition(":")
    return (job, run_id) if sep and job and run_id else None


def read_runs_and_leases(dynamodb: DynamoDBClient, table: str, *,
                         max_items: int = DEFAULT_SCAN_ITEMS) -> RunsAndLeases:
    """Scan ``table`` for run and lease records (at most ``max_items`` read) and read each one."""
    run_refs: list[tuple[str, str]] = []
    lease_keys: list[str] = []
    scanned = 0
    kwargs: dict[str, object] = {
        "TableName": table,
        "FilterExpression": "begins_with(#pk, :run) OR attribute_exists(#period)",
        "ProjectionExpression": "#pk, job, run_id, #period",
        "ExpressionAttributeNames": {"#pk": KEY_ATTRIBUTE, "#period": "period"},
        "ExpressionAttributeValues": {":run": {"S": RUN_PREFIX}},
    }
    complete = False
    while scanned < max_items:
        page = dynamodb.scan(**kwargs, Limit=min(1000, max_items - scanned))  # type: ignore[arg-type]
        scanned += page.get("ScannedCount", 0)
        for item in page.get("Items", []):
            key = item[KEY_ATTRIBUTE].get("S", "")
            if key.startswith(RUN_PREFIX) and "job" in item and "run_id" in item:
                run_refs.append((item["job"].get("S", ""), item["run_id"].get("S", "")))
            elif "period" in item:
                lease_keys.append(key)
        if "LastEvaluatedKey" not in page:
            complete = True
            break
        kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    store = DynamoDBStore(dynamodb, table)
    runs = [s for s in (_runs(store).status(job, run_id) for job, run_id in run_refs[:SHOWN]) if s]
    locks = PeriodLocks(store)
    leases = [s for s in (locks.get(key) for key in sorted(lease_keys)[:SHOWN]) if s]
    runs.sort(key=lambda r: -(r.updated_at or r.started_at or 0.0))
    return RunsAndLeases(runs=tuple(runs), leases=tuple(leases), scanned=scanned, complete=complete,
                         more_runs=max(0, len(run_refs) - SHOWN), more_leases=max(0, len(lease_keys) - SHOWN))


def read_run(dynamodb: DynamoDBClient, table: str, job: str, run_id: str) -> RunStatus | None:
    """One run by its job and id (exact, no scan), as ``sqsjobs status --run JOB:RUN_ID`` shows it."""
    return _runs(DynamoDBStore(dynamodb, table)).status(job, run_id)


def read_group(dynamodb: DynamoDBClient, table: str, group_id: str) -> GroupStatus | None:
    """One job group by its id (exact, no scan): its counts and state, as ``app.group_status`` answers."""
    return JobApp(table_name=table, dynamodb_client=dynamodb).group_status(group_id)


def _runs(store: DynamoDBStore) -> RunStore:
    # The TTL only matters to writes, which the console never makes.
    return RunStore(store, ttl=0.0)
