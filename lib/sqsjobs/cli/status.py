"""`sqsjobs status`: queue depth, oldest age, the DLQ by job and reason, alarms, recent failures, delayed jobs.

Thin over :mod:`sqsjobs.ops._status`: rich tables for people, ``--json`` for scripts.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from sqsjobs._clients import operator_client
from sqsjobs._settings import ENV_SCHEDULE_GROUP
from sqsjobs.cli import cost
from sqsjobs.cli.exits import EXIT_USAGE, exit_on_errors
from sqsjobs.cli.options import Dlq, EndpointUrl, Queue, Region, Table
from sqsjobs.cli.render import command_console, format_age, plain
from sqsjobs.ops._cost import DEFAULT_DAYS, DEFAULT_SENDS_PER_REQUEST
from sqsjobs.ops._status import collect_status
from sqsjobs.ops._status_report import DEFAULT_RECENT, DEFAULT_SAMPLE, DEFAULT_SKIPPED_HOURS, StatusReport

if TYPE_CHECKING:
    from rich.console import Console

    from sqsjobs.ops._status_report import QueueStatus
    from sqsjobs.schedules._one_time import PendingSummary



def register(app: typer.Typer) -> None:
    """Add ``sqsjobs status`` to ``app``.

    Example:
        >>> app = typer.Typer()
        >>> register(app)
        >>> [c.name for c in app.registered_commands]
        ['status']
    """

    @app.command("status")
    def status_command(
        queue: Queue = None,
        dlq: Dlq = None,
        json_output: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
        sample: Annotated[
            int, typer.Option(min=1, max=1000, help="Peek at most this many DLQ messages.")
        ] = DEFAULT_SAMPLE,
        recent: Annotated[int, typer.Option(min=0, help="Show this many recent failures.")] = DEFAULT_RECENT,
        alarm_prefix: Annotated[
            str | None,
            typer.Option(help="Alarms named with this prefix (default: alarms on these queues/metrics)."),
        ] = None,
        endpoint_url: EndpointUrl = None,
        region: Region = None,
        run: Annotated[
            list[str] | None,
            typer.Option("--run", help="A chunked run to show, as JOB:RUN_ID (repeatable)."),
        ] = None,
        table: Table = None,
        schedule_group: Annotated[
            str | None,
            typer.Option(envvar=ENV_SCHEDULE_GROUP, help="The schedule group delayed jobs wait in."),
        ] = None,
        schedule_sample: Annotated[
            int, typer.Option(min=0, max=10000, help="Read the due time of at most this many delayed jobs.")
        ] = DEFAULT_SAMPLE,
        skipped_hours: Annotated[
            int, typer.Option(min=1, max=24 * 14, help="Count cancelled and expired deliveries over this many hours.")
        ] = DEFAULT_SKIPPED_HOURS,
        cost_days: cost.CostDays = DEFAULT_DAYS,
        sends_per_request: cost.SendsPerRequest = DEFAULT_SENDS_PER_REQUEST,
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
                queue=queue,
                dlq=dlq,
                sample=sample,
                recent=recent,
                alarm_prefix=alarm_prefix,
                runs=runs,
                # The table also proves the DLQ's reasons (its evidence items): read it whenever it is known.
                dynamodb_client=operator_client("dynamodb", endpoint_url=endpoint_url, region=region)
                if runs or table else None,
                table=table,
                scheduler_client=(operator_client("scheduler", endpoint_url=endpoint_url, region=region)
                                  if schedule_group else None),
                schedule_group=schedule_group,
                schedule_sample=schedule_sample,
                skipped_hours=skipped_hours,
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
    from rich.table import Table

    queues = Table(title="queues")
    for name in ("queue", "visible", "in flight", "delayed", "oldest age", "age from"):
        queues.add_column(name, justify="left" if name in ("queue", "age from") else "right")
    jobs = report.queues or ((report.queue,) if report.queue is not None else ())
    for label, q in [*(("jobs", q) for q in jobs), ("dlq", report.dlq)]:
        if q is not None:
            queues.add_row(*_queue_row(label, q))
    console.print(queues)

    groups = Table(title=f"DLQ by job and reason ({report.dlq_sampled} peeked)")
    for name in ("job", "reason", "error type", "count", "oldest"):
        groups.add_column(name, justify="right" if name in ("count", "oldest") else "left")
    for g in report.dlq_groups:
        groups.add_row(plain(g.job), _reason(g.reason, g.verified), plain(g.error_type), str(g.count),
                       format_age(g.oldest_age_seconds))
    console.print(groups)

    alarms = Table(title="alarms")
    for name in ("alarm", "state", "metric", "reason"):
        alarms.add_column(name)
    for a in report.alarms:
        style = "bold red" if a.firing else ("green" if a.state == "OK" else "yellow")
        alarms.add_row(plain(a.name), f"[{style}]{plain(a.state)}[/{style}]", plain(a.metric), plain(a.reason[:80]))
    console.print(alarms)

    recent = Table(title="recent failures (newest first)")
    for name in ("age", "job", "reason", "error", "attempts", "redrives", "message id (as logged)", "message"):
        recent.add_column(name, overflow="fold")
    for f in report.recent_failures:
        recent.add_row(
            format_age(f.age_seconds), plain(f.job), _reason(f.reason, f.verified), plain(f.error_type),
            "?" if f.attempts is None else str(f.attempts), "?" if f.redrive_count is None else str(f.redrive_count),
            plain(f.message_id), plain(f.error_message[:60]),
        )
    console.print(recent)

    if report.skipped:
        skipped = Table(title=f"acknowledged without running (last {report.skipped_hours} h)")
        for name in ("job", "cancelled", "expired"):
            skipped.add_column(name)
        for row in report.skipped:
            skipped.add_row(plain(row.job), str(row.cancelled), str(row.expired))
        console.print(skipped)

    if report.delayed is not None:
        print_delayed(console, report.delayed)

    if report.costs is not None:
        cost.print_costs(console, report.costs)

    if report.runs:
        runs = Table(title="chunked runs")
        for name in ("job", "run", "status", "pages", "cursor", "started", "finished"):
            runs.add_column(name)
        for r in report.runs:
            cursor = "-" if r.cursor is None else plain(str(r.cursor))
            runs.add_row(plain(r.job), plain(r.run_id), plain(r.status), str(r.pages_done), cursor,
                         _when(r.started_at), _when(r.finished_at))
        console.print(runs)
    for note in report.notes:
        console.print(f"[dim]note: {plain(note)}[/dim]")


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
    from rich.table import Table

    due = "-" if delayed.next_due is None else delayed.next_due.strftime("%Y-%m-%d %H:%M:%SZ")
    exact = "" if delayed.complete else f" (of {len(delayed.sampled)} read)"
    console.print(f"{delayed.count} delayed job(s) waiting in {plain(delayed.group)}; next due {due}{exact}")
    if not delayed.sampled:
        return
    table = Table(title="soonest delayed jobs")
    for name in ("due", "kind", "job", "key"):
        table.add_column(name)
    for s in delayed.sampled[:10]:
        table.add_row("-" if s.due is None else s.due.strftime("%Y-%m-%d %H:%M:%SZ"), s.kind, plain(s.job or "?"),
                      plain(s.key or s.name))
    console.print(table)


def _reason(reason: str, verified: bool) -> str:
    """A letter's reason; a claim no table proved says so (status without ``--table``).

    Example:
        >>> _reason("permanent", True), _reason("permanent", False)
        ('permanent', 'permanent (unverified)')
    """
    return plain(reason) if verified else f"{plain(reason)} (unverified)"


def _queue_row(label: str, q: QueueStatus) -> tuple[str, ...]:
    return (
        f"{label}: {plain(q.name)}", str(q.visible), str(q.in_flight), str(q.delayed),
        format_age(q.oldest_age_seconds), q.oldest_age_source,
    )


def _when(epoch: float | None) -> str:
    from datetime import UTC, datetime

    return "-" if epoch is None else datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%S")
