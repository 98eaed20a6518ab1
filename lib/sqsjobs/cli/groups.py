"""`sqsjobs group ID` and `sqsjobs chain ID`: a job group's counts and failed members, a chain's steps.

Both read the idempotency table only (``--table`` or ``SQSJOBS_TABLE``), so an
operator can ask about any group or chain without the app's code. Each exits
0 when the id has a record and 3 when it has none.

Example:
    >>> [c.name for c in commands.registered_commands]
    ['group', 'chain']
"""

from __future__ import annotations

from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sqsjobs.cli.exits import exit_on_errors
from sqsjobs.cli.lifecycle import show, table_app
from sqsjobs.cli.options import EndpointUrl, JsonStatus, RecordTable, Region
from sqsjobs.cli.render import command_console, iso_time, print_fields, titled_table
from sqsjobs.workflows._groups import GroupRecords

if TYPE_CHECKING:
    from sqsjobs.workflows._chains import ChainStatus
    from sqsjobs.workflows._groups import GroupStatus, MemberFailure


commands = typer.Typer()

GroupId = Annotated[str, typer.Argument(metavar="ID", help="The group's id (what group.enqueue() returned).")]
ChainId = Annotated[str, typer.Argument(metavar="ID", help="The chain's id (what chain.enqueue() returned).")]


@commands.command("group")
def group_command(
    group_id: GroupId, json_output: JsonStatus = False, table: RecordTable = None, endpoint_url: EndpointUrl = None,
    region: Region = None,
) -> None:
    """Show a job group's counts and state, and its members that did not succeed, with their reasons."""

    console = command_console(stderr=json_output)
    with exit_on_errors(console):
        jobs = table_app(table, endpoint_url, region)
        status = jobs.group_status(group_id)
        failures = GroupRecords(jobs.runtime.store, ttl=jobs.settings.record_ttl).failures(group_id) \
            if status is not None and status.failed else []
    show(console, status, json_output=json_output, render=lambda out, found: render_group(out, found, failures),
         as_json=lambda found: {**asdict(found), "failures": [asdict(f) for f in failures]},
         missing=f"no group {group_id!r}: it was never enqueued, or its records expired")


@commands.command("chain")
def chain_command(
    chain_id: ChainId, json_output: JsonStatus = False, table: RecordTable = None, endpoint_url: EndpointUrl = None,
    region: Region = None,
) -> None:
    """Show where a chain is, or the step that stopped it and why."""

    console = command_console(stderr=json_output)
    with exit_on_errors(console):
        status = table_app(table, endpoint_url, region).chain_status(chain_id)
    show(console, status, json_output=json_output, render=render_chain,
         missing=f"no chain {chain_id!r}: it was never enqueued, or its record expired")


def render_group(console: Any, status: GroupStatus, failures: list[MemberFailure]) -> None:
    """The counts as a two-column table, then the failed members."""
    print_fields(console, f"group {status.name or status.id}", [
        ("id", status.id), ("state", status.state), ("total", status.total), ("pending", status.pending),
        ("succeeded", status.succeeded),
        ("failed", f"{status.failed} (dead-lettered {status.dead_lettered}, cancelled {status.cancelled}, "
                   f"expired {status.expired})"),
        ("created at", iso_time(status.created_at)), ("finished at", iso_time(status.finished_at)),
    ])
    if failures:
        failed = titled_table("members that did not succeed", ("key", "job", "outcome", "reason", "last error"),
                              fold=True)
        for f in failures:
            failed.add_row(f.key, f.job or "-", f.state, f.reason or "-", f.last_error or "-")
        console.print(failed)


def render_chain(console: Any, status: ChainStatus) -> None:
    """The chain's steps, the one it is at (or stopped at) marked."""
    title = f"chain {status.name or status.id}: {status.state}"
    if status.stopped_at is not None:
        title += f" at step {status.stopped_at} ({status.reason or 'no reason'})"
    table = titled_table(title, ("step", "job", "key", "state", "last error"), fold=True)
    for step in status.steps:
        marker = " ←" if step.index == status.step and status.state != "succeeded" else ""
        table.add_row(f"{step.index}{marker}", step.job, step.key, step.state, step.last_error or "-")
    console.print(table)
