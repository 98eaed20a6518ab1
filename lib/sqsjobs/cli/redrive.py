"""`sqsjobs redrive`: move dead letters back to their source queue, through the guard.

Thin over :mod:`sqsjobs.ops._redrive`: parse flags, build the client, show a
progress bar and a summary. Exit codes: 0 done, 1 something failed or an AWS
error stopped the run, 2 bad options, 130 interrupted (nothing lost: run it
again to continue).

Example:
    >>> [c.name for c in commands.registered_commands]
    ['redrive']
"""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from sqsjobs._clients import operator_client
from sqsjobs._settings import DEFAULT_RECORD_TTL, ENV_DLQ_URL, ENV_QUEUE_URL, ENV_RECORD_TTL, ENV_TABLE
from sqsjobs.cli.exits import EXIT_FAILED, EXIT_INTERRUPTED, exit_on_errors
from sqsjobs.cli.options import EndpointUrl, Region
from sqsjobs.cli.render import command_console, format_age, plain, reason_text, titled_table
from sqsjobs.enqueue._addresses import resolve_queue_url
from sqsjobs.ops._errors import RedriveError
from sqsjobs.ops._queues import dead_letter_queue_of, dead_letter_sources, queue_depth
from sqsjobs.ops._redrive import Redrive
from sqsjobs.ops._redrive_native import cancel_native_redrive, native_redrive_status, start_native_redrive
from sqsjobs.ops._redrive_options import RedriveOptions, refuse_filters_for_native
from sqsjobs.ops._redrive_report import RedriveSummary

if TYPE_CHECKING:
    from mypy_boto3_sqs import SQSClient
    from rich.console import Console

    from sqsjobs.ops._redrive_native import MoveTask
    from sqsjobs.ops._redrive_report import PlannedMove
    from sqsjobs.store._lease import LeaseStore

# A dry run lists each message up to this many, then groups them.
PLAN_ROWS = 50
# Lines about single letters (notes) printed before the rest are only counted.
NOTE_ROWS = 20


commands = typer.Typer()

RedriveDlq = Annotated[
    str | None, typer.Option("--dlq", envvar=ENV_DLQ_URL, help="The DLQ: URL, ARN or name (default: --queue's DLQ).")
]
SourceQueue = Annotated[str | None, typer.Option(envvar=ENV_QUEUE_URL, help="Without --dlq: use this queue's "
                                                                      "redrive-policy DLQ.")]
To = Annotated[str | None, typer.Option(help="Send here (URL, ARN or name) instead of each message's source queue.")]
JobFilter = Annotated[str | None, typer.Option(help="Only messages of this job.")]
ErrorFilter = Annotated[
    str | None, typer.Option(help="Only this error type (e.g. TimeoutError) or reason (permanent, exhausted).")
]
MaxMessages = Annotated[int | None, typer.Option("--max", min=1, help="Move at most this many messages.")]
Rate = Annotated[float | None, typer.Option(min=0.001, help="At most this many messages per second.")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="List what would move (job, reason, age); change nothing.")]
Force = Annotated[bool, typer.Option("--force", help="Also move messages past the redrive limit (poison guard).")]
MaxRedrives = Annotated[int, typer.Option(min=0, help="Poison guard: skip messages already redriven this often.")]
SkipMalformed = Annotated[
    bool, typer.Option("--skip-malformed", help="Leave malformed bodies in the DLQ (default: move them).")
]
Native = Annotated[bool, typer.Option("--native", help="Use SQS's own message move task (no filters).")]
NativeStatus = Annotated[bool, typer.Option("--status", help="With --native: show the DLQ's move tasks.")]
NativeCancel = Annotated[bool, typer.Option("--cancel", help="With --native: cancel the running move task.")]
JsonSummary = Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")]
RecordTtl = Annotated[
    float | None,
    typer.Option("--record-ttl", envvar=ENV_RECORD_TTL, metavar="SECONDS",
                 help="How long the stack keeps idempotency records (its RecordTtlSeconds; default 21 days): "
                      "older letters are counted and named, a replay may run a completed job again."),
]
WaitTime = Annotated[int, typer.Option(min=0, max=20, help="Receive long-poll seconds (0 = short polling).")]
EvidenceTable = Annotated[
    str | None,
    typer.Option(envvar=ENV_TABLE,
                 help="The idempotency table: it proves each letter's reason and keeps its redrive count (without "
                      "it both are the letters' unverified claims); letters whose key was cancelled stay in the DLQ."),
]


@commands.command("redrive")
def redrive_command(
    dlq: RedriveDlq = None, queue: SourceQueue = None, to: To = None, job: JobFilter = None,
    error: ErrorFilter = None, max_messages: MaxMessages = None, rate: Rate = None, dry_run: DryRun = False,
    force: Force = False, max_redrives: MaxRedrives = 3, skip_malformed: SkipMalformed = False,
    native: Native = False, status: NativeStatus = False, cancel: NativeCancel = False,
    json_output: JsonSummary = False, record_ttl: RecordTtl = None, wait_time: WaitTime = 1,
    table: EvidenceTable = None, endpoint_url: EndpointUrl = None, region: Region = None,
) -> None:
    """Move dead letters back to their source queue (through the idempotency guard)."""

    console = command_console(stderr=json_output)
    malformed: Literal["move", "skip"] = "skip" if skip_malformed else "move"
    # Errors before the run started (no region, finding the DLQ, its depth) or in a native task call:
    # nothing moved.
    with exit_on_errors(console):
        if (status or cancel) and not native:
            raise RedriveError("--status and --cancel go with --native")
        sqs = operator_client("sqs", endpoint_url=endpoint_url, region=region)
        options = RedriveOptions(
            dlq=_checked_dlq(sqs, dlq) if dlq else _dlq_of(sqs, queue), to=to, job=job, error_type=error,
            max_messages=max_messages, rate=rate, dry_run=dry_run, force=force, max_redrives=max_redrives,
            malformed=malformed, wait_time_seconds=wait_time,
            record_ttl=DEFAULT_RECORD_TTL if record_ttl is None else record_ttl,
        )
        if native:
            _native(console, options, sqs, status=status, cancel=cancel, json_output=json_output)
            return
        records = None
        if table:
            from sqsjobs.store._dynamodb import DynamoDBStore

            records = DynamoDBStore(operator_client("dynamodb", endpoint_url=endpoint_url, region=region), table)
        summary = _run(console, options, sqs, json_output=json_output, records=records)
    if json_output:
        typer.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        _print_summary(console, summary)
    if summary.stopped == "interrupted":
        raise typer.Exit(EXIT_INTERRUPTED)
    if not summary.ok:
        raise typer.Exit(EXIT_FAILED)


def _checked_dlq(sqs: SQSClient, dlq: str) -> str:
    """``dlq``, unless it is a queue that has a DLQ of its own and is nobody's DLQ (the jobs queue, by mistake)."""
    url = resolve_queue_url(sqs, dlq)
    own_dlq = dead_letter_queue_of(sqs, url)
    if own_dlq is not None and next(iter(dead_letter_sources(sqs, url)), None) is None:
        raise RedriveError(
            f"{dlq} is not a dead-letter queue: no queue sends its failures there, and it sends its own to "
            f"{own_dlq}; pass --dlq {own_dlq} (or --queue {dlq})"
        )
    return dlq


def _dlq_of(sqs: SQSClient, queue: str | None) -> str:
    if not queue:
        from sqsjobs._env_names import did_you_mean

        raise RedriveError(f"which DLQ? pass --dlq (or set {ENV_DLQ_URL}), or --queue to use its DLQ"
                           f"{did_you_mean(ENV_DLQ_URL)}")
    dlq = dead_letter_queue_of(sqs, resolve_queue_url(sqs, queue))
    if dlq is None:
        raise RedriveError(f"{queue} has no redrive policy, so no DLQ; pass --dlq")
    return dlq


def _run(console: Console, options: RedriveOptions, sqs: SQSClient, *, json_output: bool,
         records: LeaseStore | None = None) -> RedriveSummary:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    dlq_url = resolve_queue_url(sqs, options.dlq)
    depth = queue_depth(sqs, dlq_url)
    total = min(depth, options.max_messages) if options.max_messages else depth
    label = "scanning (dry run)" if options.dry_run else "redriving"
    with Progress(
        TextColumn(f"[bold]{label}[/bold]"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[counts]}"),
        TimeElapsedColumn(),
        console=console,
        disable=json_output,
        transient=False,
    ) as progress:
        task = progress.add_task(label, total=total or None, counts="")

        def show(summary: RedriveSummary) -> None:
            done = summary.matched if options.dry_run else summary.moved
            skipped = sum(summary.skipped.values())
            progress.update(
                task,
                completed=done,
                counts=f"moved {summary.moved} · skipped {skipped} · failed {summary.failed}",
            )

        engine = Redrive(options, sqs_client=sqs, on_progress=show, records=records)
        try:
            summary = engine.run()
        except KeyboardInterrupt:
            # run() released what it held before re-raising; the counts are final.
            summary = engine.summary()
        show(summary)
    return summary


def _native(
    console: Console,
    options: RedriveOptions,
    sqs: SQSClient,
    *,
    status: bool,
    cancel: bool,
    json_output: bool,
) -> None:
    if status:
        tasks = native_redrive_status(options.dlq, sqs_client=sqs)
        if json_output:
            typer.echo(json.dumps([t.to_dict() for t in tasks], indent=2))
        else:
            _print_tasks(console, tasks)
        return
    if cancel:
        moved = cancel_native_redrive(options.dlq, sqs_client=sqs)
        if json_output:
            typer.echo(json.dumps({"cancelled": True, "moved": moved}))
        else:
            console.print(f"cancelled the move task after ~{moved} messages; the rest stay in the DLQ")
        return
    refuse_filters_for_native(options)
    handle = start_native_redrive(options.dlq, to=options.to, rate=options.rate, sqs_client=sqs)
    if json_output:
        typer.echo(json.dumps({"task_handle": handle}))
    else:
        console.print(f"started a message move task: {handle}")
        console.print(f"follow it with: sqsjobs redrive --dlq {options.dlq} --native --status")


def _print_summary(console: Console, summary: RedriveSummary) -> None:
    if summary.dry_run:
        _print_plan(console, summary)
    table = titled_table("redrive summary" + (" (dry run: nothing changed)" if summary.dry_run else ""),
                         ("count", "value"), right={"value"})
    table.add_row("would move" if summary.dry_run else "moved", str(summary.matched if summary.dry_run
                                                                     else summary.moved))
    for reason, count in sorted(summary.skipped.items()):
        table.add_row(f"skipped: {reason}", str(count))
    table.add_row("send failed (still in DLQ)", str(summary.failed))
    table.add_row("sent, delete failed (duplicate on re-run)", str(summary.delete_failed))
    if summary.counts_unrecorded:
        table.add_row("sent, redrive count not written (still in DLQ)", str(summary.counts_unrecorded))
    table.add_row("extra DLQ copies " + ("to delete" if summary.dry_run else "deleted"), str(summary.duplicates))
    table.add_row("older than the record TTL", str(summary.older_than_record_ttl))
    table.add_row("with malformed sqsjobs.* attributes", str(summary.malformed_attributes))
    table.add_row("left in DLQ (approx.)", "?" if summary.left is None else str(summary.left))
    table.add_row("stopped", summary.stopped)
    console.print(table)
    if summary.unverified:
        console.print(f"[yellow]unverified:[/yellow] {plain(summary.unverified)}", highlight=False)
    _print_notes(console, summary)
    if summary.error:
        console.print(f"[red]error:[/red] {plain(summary.error)}")
    for target, error in summary.target_errors.items():
        console.print(f"[red]target refused:[/red] {plain(target)}: {plain(error)} (its letters stay in the DLQ)")
    if summary.stopped in ("interrupted", "error", "deadline"):
        console.print("nothing was lost: run the same command again to continue")
    if summary.skipped.get("poison") or summary.skipped.get("poison-suspect"):
        console.print("poison guard: over-redriven messages (or unreadable redrive counts) stay in the DLQ; "
                      "fix the job, then --force")
    if summary.older_than_record_ttl:
        days = summary.record_ttl / 86400
        console.print(
            f"[yellow]warning:[/yellow] {summary.older_than_record_ttl} letter(s) were first delivered more than "
            f"{days:g} days ago, longer than idempotency records live: a job that completed meanwhile "
            f"{'would run' if summary.dry_run else 'may run'} again"
        )


def _print_notes(console: Console, summary: RedriveSummary) -> None:
    """One line per letter worth a look, up to ``NOTE_ROWS`` (``--json`` has them all)."""
    for note in summary.notes[:NOTE_ROWS]:
        console.print(f"[yellow]note:[/yellow] {plain(note.line())}", highlight=False)
    if len(summary.notes) > NOTE_ROWS:
        console.print(f"... and {len(summary.notes) - NOTE_ROWS} more notes (--json lists every one)")


def _print_plan(console: Console, summary: RedriveSummary) -> None:
    def action(p: PlannedMove) -> str:
        return p.action if p.action != "move" else f"move → {p.target}"

    if len(summary.planned) > PLAN_ROWS:
        # Thousands of rows help nobody at 3 a.m.: group them, and --json has every message.
        groups = Counter((p.job, reason_text(p.reason, p.verified), p.error_type, action(p)) for p in summary.planned)
        table = titled_table(f"would redrive from {plain(summary.dlq_url)} (grouped; --json lists every message)",
                             ("job", "reason", "error", "action", "count"), right={"count"})
        for (job, reason, error_type, act), count in groups.most_common():
            table.add_row(plain(job), reason, plain(error_type), plain(act), str(count))
        console.print(table)
        return
    table = titled_table(f"would redrive from {plain(summary.dlq_url)}",
                         ("message id (as logged)", "job", "reason", "error", "age", "redrives", "action"), fold=True)
    for p in summary.planned:
        table.add_row(
            plain(p.message_id), plain(p.job), reason_text(p.reason, p.verified), plain(p.error_type),
            format_age(p.age_seconds), "?" if p.redrive_count is None else str(p.redrive_count), plain(action(p)),
        )
    console.print(table)


def _print_tasks(console: Console, tasks: tuple[MoveTask, ...]) -> None:
    table = titled_table("message move tasks (newest first)",
                         ("status", "moved", "to move", "rate", "destination", "failure"))
    for t in tasks:
        table.add_row(
            t.status, str(t.moved or 0), str(t.to_move or "?"), str(t.rate or "max"),
            t.destination_arn or "(original sources)", t.failure_reason or "",
        )
    console.print(table)
