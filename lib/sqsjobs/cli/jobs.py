"""`sqsjobs jobs`: the jobs an app registers, with their options (a table, or ``--json``).

The app is loaded as ``sqsjobs enqueue`` loads it (``--app``, default
``handlers.app:app``); nothing is sent and no AWS client is made.

Example:
    >>> [c.name for c in commands.registered_commands]
    ['jobs']
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sqsjobs._errors import SqsJobsError
from sqsjobs._loading import DEFAULT_APP, load_app
from sqsjobs.cli.exits import EXIT_USAGE, exit_with
from sqsjobs.cli.options import AppSpec
from sqsjobs.cli.render import command_console, titled_table
from sqsjobs.enqueue._debounce import DEBOUNCE, DEDUPE
from sqsjobs.enqueue._routing import QUEUE, TENANT_METRICS
from sqsjobs.flow._limits import LIMITS

if TYPE_CHECKING:
    from sqsjobs._app import JobApp

commands = typer.Typer()


def describe_jobs(app: JobApp) -> list[dict[str, Any]]:
    """One dict per job, sorted by name: what ``@app.job`` / ``@app.scheduled`` declared, defaults filled in.

    Example:
        >>> from sqsjobs import JobApp
        >>> app = JobApp(max_attempts=5)
        >>> @app.job("sync-account", key="sync:{account_id}", max_attempts=3, retry_on=(TimeoutError,))
        ... def sync_account(account_id: int) -> None: ...
        >>> row = describe_jobs(app)[0]
        >>> row["name"], row["key"], row["max_attempts"], row["retry_on"], row["parameters"]
        ('sync-account', 'sync:{account_id}', 3, ['TimeoutError'], ['account_id'])
        >>> row["queue"], row["limits"], row["debounce"], row["dedupe"]
        ('default', [], None, None)
    """
    rows = []
    for name in sorted(app.jobs):
        job = app.jobs[name]
        options = job.options
        schedule = app.runtime.registry.schedules.get(name)
        rows.append({
            "name": name,
            "function": f"{job.fn.__module__}.{job.fn.__qualname__}",
            "parameters": list(job.signature.names),
            "key": options.key or f"{name}:<hash of the arguments>",
            "group": options.group,
            "max_attempts": options.max_attempts or app.settings.max_attempts,
            "backoff_base": options.backoff.base,
            "backoff_cap": options.backoff.cap,
            "jitter": options.backoff.jitter,
            "retry_on": [kind.__name__ for kind in options.retry_on],
            "permanent_on": [kind.__name__ for kind in options.permanent_on],
            "time_limit": options.time_limit,
            "version": options.version,
            "chunked": type(job).__name__ == "ChunkedJob",
            "schedule": schedule.expression if schedule else None,
            "queue": QUEUE.of(options),
            "limits": list(LIMITS.of(options)),
            "tenant_metrics": TENANT_METRICS.of(options),
            "debounce": DEBOUNCE.of(options),
            "dedupe": None if (dedupe := DEDUPE.of(options)) is None else dedupe.value,
            "batch": options.batch,
        })
    return rows


@commands.command("jobs")
def jobs_command(
    app_spec: AppSpec = DEFAULT_APP,
    json_output: Annotated[bool, typer.Option("--json", help="Print the jobs as JSON.")] = False,
) -> None:
    """List the app's registered jobs with their options (key, attempts, backoff, schedule, queue, limits...)."""
    with exit_with(EXIT_USAGE, SqsJobsError):
        rows = describe_jobs(load_app(app_spec))
    if json_output:
        typer.echo(json.dumps(rows, indent=2))
        return
    _print_table(rows, app_spec)


def _print_table(rows: list[dict[str, Any]], app_spec: str) -> None:
    table = titled_table(f"jobs of {app_spec} ({len(rows)})", (
        "job", "key", "attempts", "backoff", "retry on", "permanent on", "time limit", "version", "kind", "queue",
        "limits"), fold=True)
    for row in rows:
        kind = "chunked" if row["chunked"] else (f"scheduled {row['schedule']}" if row["schedule"] else "job")
        if row["batch"]:
            kind = f"batch of {row['batch']}"
        if row.get("debounce") is not None:
            kind += f", debounce {row['debounce']:g} s"
        if row.get("dedupe") is not None:
            kind += f", dedupe {row['dedupe']}"
        backoff = f"{row['backoff_base']:g}..{row['backoff_cap']:g} s" + ("" if row["jitter"] else " (no jitter)")
        table.add_row(row["name"], row["key"], str(row["max_attempts"]), backoff, ", ".join(row["retry_on"]),
                      ", ".join(row["permanent_on"]) or "-",
                      "-" if row["time_limit"] is None else f"{row['time_limit']:g} s", str(row["version"]), kind,
                      row["queue"], ", ".join(row["limits"]) or "-")
    command_console(soft_wrap=False).print(table)
