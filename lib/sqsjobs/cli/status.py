"""`sqsjobs status`: queue depth, oldest age, the DLQ by job and reason, alarms, recent failures, delayed jobs, costs.

Thin over :mod:`sqsjobs.ops._status`: rich tables for people, ``--json`` for scripts.

Example:
    >>> [c.name for c in commands.registered_commands]
    ['status']
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from sqsjobs._clients import operator_client
from sqsjobs.cli import cost
from sqsjobs.cli.exits import EXIT_USAGE, exit_on_errors
from sqsjobs.cli.options import AlarmPrefix, Dlq, EndpointUrl, Queue, Region, ScheduleGroup, Table
from sqsjobs.cli.render import command_console, format_age, plain, reason_text, short_time, titled_table
from sqsjobs.ops._cost import DEFAULT_DAYS, DEFAULT_SENDS_PER_REQUEST
from sqsjobs.ops._status import collect_status
from sqsjobs.ops._status_report import DEFAULT_RECENT, DEFAULT_SAMPLE, DEFAULT_SKIPPED_HOURS, StatusReport

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table as RichTable

    from sqsjobs.ops._status_report import QueueStatus
    from sqsjobs.schedules._one_time import PendingSummary

commands = typer.Typer()

JsonReport = Annotated[bool, typer.Option("--json", help="Print the report as JSON.")]
Sample = Annotated[int, typer.Option(min=1, max=1000, help="Peek at most this many DLQ messages.")]
Recent = Annotated[int, typer.Option(min=0, help="Show this many recent failures.")]
Runs = Annotated[list[str] | None, typer.Option("--run", help="A chunked run to show, as JOB:RUN_ID (repeatable).")]
ScheduleSample = Annotated[
    int, typer.Option(min=0, max=10000, help="Read the due time of at most this many delayed jobs.")
]
SkippedHours = Annotated[
    int, typer.Option(min=1, max=24 * 14, help="Count cancelled and expired deliveries over this many hours.")
]


@commands.command("status")
def status_command(
    queue: Queue = None, dlq: Dlq = None, json_output: JsonReport = False, sample: Sample = DEFAULT_SAMPLE,
    recent: Recent = DEFAULT_RECENT, alarm_prefix: AlarmPrefix = None, endpoint_url: EndpointUrl = None,
    region: Region = None, run: Runs = None, table: Table = None, schedule_group: ScheduleGroup = None,
    schedule_sample: ScheduleSample = DEFAULT_SAMPLE, skipped_hours: SkippedHours = DEFAULT_SKIPPED_HOURS,
    cost_days: cost.CostDays = DEFAULT_DAYS, sends_per_request: cost.SendsPerRequest = DEFAULT_SENDS_PER_REQUEST,
    price: cost.PriceOverrides = None,
) -> None:
    """Show queue depth, oldest age, the DLQ by job and reason, alarms, recent failures, cancelled and expired,
    and what each job cost."""

    console = command_console(stderr=json_output)
    runs = []
    for spec in run or []:
        job, sep, run_id = spec.partition(":")
        if not sep or not job or not run_id:
            console.print(f"[red]error:[/red] --run takes JOB:RUN_ID, got {plain(repr(spec))}")
            raise typer.Exit(EXIT_USAGE)
        runs.append((job, run_id))
    with exit_on_errors(console):
        report = collect_status(
            sqs_client=operator_client("sqs", endpoint_url=endpoint_url, region=region),
            cloudwatch_client=operator_client("cloudwatch", endpoint_url=endpoint_url, region=region),
            queue=queue, dlq=dlq, sample=sample, recent=recent, alarm_prefix=alarm_prefix, runs=runs,
            # The table also proves the DLQ's reasons (its evidence items): read it whenever it is known.
            dynamodb_client=operator_client("dynamodb", endpoint_url=endpoint_url, region=region)
            if runs or table else None,
            table=table,
            scheduler_client=(operator_client("scheduler", endpoint_url=endpoint_url, region=region)
                              if schedule_group else None),
            schedule_group=schedule_group, schedule_sample=schedule_sample, skipped_hours=skipped_hours,
            costs=cost.options(days=cost_days, sends_per_request=sends_per_request, prices=price),
        )
    if json_output:
        typer.echo(json.dumps(report.to_dict(), indent=2))
    else:
        print_report(console, report)


def print_report(console: Console, report: StatusReport) -> None:
    """Render ``report`` as rich tables.

    Example:
        >>> import io
        >>> from rich.console import Console
        >>> from sqsjobs.ops._status_report import StatusReport
        >>> console = Console(width=100, record=True, file=io.StringIO())
        >>> print_report(console, StatusReport(queue=None, dlq=None, dlq_groups=(),
        ...     dlq_sampled=0, alarms=(), recent_failures=(), notes=()))
        >>> "DLQ by job and reason" in console.export_text()
        True
    """
    for table in (_queues(report), _dlq_groups(report), _alarms(report), _recent_failures(report)):
        console.print(table)
    if report.skipped:
        skipped = titled_table(f"acknowledged without running (last {report.skipped_hours} h)",
                               ("job", "cancelled", "expired"))
        for row in report.skipped:
            skipped.add_row(plain(row.job), str(row.cancelled), str(row.expired))
        console.print(skipped)
    if report.delayed is not None:
        print_delayed(console, report.delayed)
    if report.costs is not None:
        cost.print_costs(console, report.costs)
    if report.runs:
        runs = titled_table("chunked runs", ("job", "run", "status", "pages", "cursor", "started", "finished"))
        for r in report.runs:
            cursor = "-" if r.cursor is None else plain(str(r.cursor))
            runs.add_row(plain(r.job), plain(r.run_id), plain(r.status), str(r.pages_done), cursor,
                         short_time(r.started_at), short_time(r.finished_at))
        console.print(runs)
    for note in report.notes:
        console.print(f"[dim]note: {plain(note)}[/dim]")


def _queues(report: StatusReport) -> RichTable:
    columns = ("queue", "visible", "in flight", "delayed", "oldest age", "age from")
    table = titled_table("queues", columns, right=set(columns) - {"queue", "age from"})
    jobs = report.queues or ((report.queue,) if report.queue is not None else ())
    for label, q in [*(("jobs", q) for q in jobs), ("dlq", report.dlq)]:
        if q is not None:
            table.add_row(*_queue_row(label, q))
    return table


def _dlq_groups(report: StatusReport) -> RichTable:
    table = titled_table(f"DLQ by job and reason ({report.dlq_sampled} peeked)",
                         ("job", "reason", "error type", "count", "oldest"), right={"count", "oldest"})
    for g in report.dlq_groups:
        table.add_row(plain(g.job), reason_text(g.reason, g.verified), plain(g.error_type), str(g.count),
                      format_age(g.oldest_age_seconds))
    return table


def _alarms(report: StatusReport) -> RichTable:
    table = titled_table("alarms", ("alarm", "state", "metric", "reason"))
    for a in report.alarms:
        style = "bold red" if a.firing else ("green" if a.state == "OK" else "yellow")
        table.add_row(plain(a.name), f"[{style}]{plain(a.state)}[/{style}]", plain(a.metric), plain(a.reason[:80]))
    return table


def _recent_failures(report: StatusReport) -> RichTable:
    table = titled_table("recent failures (newest first)", (
        "age", "job", "reason", "error", "attempts", "redrives", "message id (as logged)", "message"), fold=True)
    for f in report.recent_failures:
        table.add_row(
            format_age(f.age_seconds), plain(f.job), reason_text(f.reason, f.verified), plain(f.error_type),
            "?" if f.attempts is None else str(f.attempts), "?" if f.redrive_count is None else str(f.redrive_count),
            plain(f.message_id), plain(f.error_message[:60]),
        )
    return table


def print_delayed(console: Console, delayed: PendingSummary) -> None:
    """The delayed jobs: how many wait, the next due, and the soonest few.

    Example:
        >>> import io
        >>> from rich.console import Console
        >>> from sqsjobs.schedules._one_time import PendingSummary
        >>> console = Console(width=100, record=True, file=io.StringIO())
        >>> print_delayed(console, PendingSummary(group="jobs-delayed", count=0, sampled=()))
        >>> "0 delayed job(s) waiting in jobs-delayed" in console.export_text()
        True
    """
    due = "-" if delayed.next_due is None else delayed.next_due.strftime("%Y-%m-%d %H:%M:%SZ")
    exact = "" if delayed.complete else f" (of {len(delayed.sampled)} read)"
    console.print(f"{delayed.count} delayed job(s) waiting in {plain(delayed.group)}; next due {due}{exact}")
    if not delayed.sampled:
        return
    table = titled_table("soonest delayed jobs", ("due", "kind", "job", "key"))
    for s in delayed.sampled[:10]:
        table.add_row("-" if s.due is None else s.due.strftime("%Y-%m-%d %H:%M:%SZ"), s.kind, plain(s.job or "?"),
                      plain(s.key or s.name))
    console.print(table)


def _queue_row(label: str, q: QueueStatus) -> tuple[str, ...]:
    return (
        f"{label}: {plain(q.name)}", str(q.visible), str(q.in_flight), str(q.delayed),
        format_age(q.oldest_age_seconds), q.oldest_age_source,
    )
