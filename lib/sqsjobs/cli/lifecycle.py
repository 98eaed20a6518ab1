"""`sqsjobs job KEY`, `sqsjobs cancel KEY` and `sqsjobs unschedule KEY`: a job's lifecycle by its key.

``job`` and ``cancel`` read the idempotency table only (``--table`` or
``SQSJOBS_TABLE``): the answer needs no app code, so an operator can ask about
any key. ``job`` exits 0 when the key has a record (or, given the schedule group, waits
there as a delayed job: ``scheduled``, with its due time) and 3 when it has neither.
``unschedule`` deletes the pending schedule of a delayed job (``--schedule-group``
or ``SQSJOBS_SCHEDULE_GROUP``) and exits 3 when none was pending; ``cancel``
given the group deletes it too.

Example:
    >>> [c.name for c in commands.registered_commands]
    ['job', 'cancel', 'unschedule']
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sqsjobs._env_names import did_you_mean
from sqsjobs._errors import ConfigurationError
from sqsjobs._settings import ENV_SCHEDULE_GROUP, ENV_TABLE
from sqsjobs.cli.exits import exit_on_errors
from sqsjobs.cli.options import EndpointUrl, JsonStatus, RecordTable, Region, ScheduleGroup
from sqsjobs.cli.render import command_console, iso_time, print_fields
from sqsjobs.enqueue._debounce import coalescing

if TYPE_CHECKING:
    from sqsjobs._app import JobApp
    from sqsjobs.console.job_record import ScheduledJobView
    from sqsjobs.worker._job_records import JobStatus

#: ``sqsjobs job KEY``: no delivery ever claimed the key
EXIT_NOT_FOUND = 3

commands = typer.Typer()


@commands.command("job")
def job_command(
    key: Annotated[str, typer.Argument(help="The job's idempotency key, e.g. invoice-email:42.")],
    json_output: JsonStatus = False, table: RecordTable = None, schedule_group: ScheduleGroup = None,
    endpoint_url: EndpointUrl = None, region: Region = None,
) -> None:
    """Show what happened to the job of KEY: state, attempts, last error, result and times.

    A delayed job with no record yet that waits in the schedule group shows as scheduled, with its due time.
    """
    from sqsjobs.console.job_record import scheduled_job

    console = command_console(stderr=json_output)
    with exit_on_errors(console):
        app = table_app(table, endpoint_url, region)
        status = app.status(key)
        if status is not None and (view := waiting_view(app, key)) is not None:
            show(console, view, json_output=json_output, render=render_waiting, missing="",
                 as_json=lambda view: view.to_dict())
            return
        if status is None and schedule_group:
            from sqsjobs._clients import operator_client

            waiting = scheduled_job(operator_client("scheduler", endpoint_url=endpoint_url, region=region),
                                    schedule_group, key)
            if waiting is not None:
                show(console, waiting, json_output=json_output, render=render_scheduled,
                     missing="", as_json=lambda view: view.to_dict())
                return
    waits = "" if schedule_group else f" (a delayed job is found with --schedule-group or {ENV_SCHEDULE_GROUP})"
    show(console, status, json_output=json_output, render=render,
         missing=f"no record for {key!r}: no delivery of it has been claimed (or its record expired){waits}")


@commands.command("cancel")
def cancel_command(
    key: Annotated[str, typer.Argument(help="The job's idempotency key.")],
    reason: Annotated[str | None, typer.Option(help="Why (kept in the record).")] = None,
    table: RecordTable = None, schedule_group: ScheduleGroup = None, endpoint_url: EndpointUrl = None,
    region: Region = None,
) -> None:
    """Cancel the job of KEY: no later delivery of it runs (a running job is only flagged).

    With a schedule group, its pending delayed enqueue is deleted too.
    """

    console = command_console()
    with exit_on_errors(console):
        app = table_app(table, endpoint_url, region)
        if schedule_group:
            from sqsjobs._clients import operator_client

            with app.use(settings={"schedule_group": schedule_group},
                         scheduler_client=operator_client("scheduler", endpoint_url=endpoint_url, region=region)):
                outcome = app.cancel(key, reason)
        else:
            outcome = app.cancel(key, reason)
    console.print(f"{key}: {outcome}" + (f" ({EXPLAIN[outcome]})" if outcome in EXPLAIN else ""))


@commands.command("unschedule")
def unschedule_command(
    key: Annotated[str, typer.Argument(help="The delayed job's idempotency key.")],
    schedule_group: ScheduleGroup = None, endpoint_url: EndpointUrl = None, region: Region = None,
) -> None:
    """Delete the pending schedule of the delayed job KEY (exit 3 when none was pending)."""

    from sqsjobs._app import JobApp
    from sqsjobs._clients import operator_client

    console = command_console()
    with exit_on_errors(console):
        if not schedule_group:
            raise ConfigurationError(f"which schedule group? pass --schedule-group or set {ENV_SCHEDULE_GROUP}"
                                     f"{did_you_mean(ENV_SCHEDULE_GROUP)}")
        app = JobApp(schedule_group=schedule_group,
                     scheduler_client=operator_client("scheduler", endpoint_url=endpoint_url, region=region))
        deleted = app.unschedule(key)
    if not deleted:
        console.print(f"{key}: no delayed job pending in {schedule_group} (it ran, was never delayed, "
                      "or was unscheduled)")
        raise typer.Exit(EXIT_NOT_FOUND)
    console.print(f"{key}: unscheduled (its delayed delivery will not happen)")


#: what each answer of ``app.cancel`` means, for people
EXPLAIN = {
    "cancelled": "no delivery of it will run",
    "not_found_but_cancelled": "no delivery yet; the first one will be acknowledged without running",
    "running": "it runs now; it was flagged for cancel_requested() and is never killed",
    "already_finished": "it had already finished",
}


def render(console: Any, status: JobStatus) -> None:
    """The status as a two-column table."""
    rows: list[tuple[str, Any]] = [("job", status.job), ("state", status.state), ("attempts", status.attempts),
                                   ("last error", status.last_error)]
    if status.result is not None:
        rows.append(("result", json.dumps(status.result)))
    rows += [(name.replace("_", " "), iso_time(getattr(status, name)))
             for name in ("enqueued_at", "started_at", "finished_at", "updated_at")]
    print_fields(console, f"job {status.key}", rows)


def waiting_view(app: JobApp, key: str) -> Any:
    """A debounced key's waiting burst, or a deduplicated key's reservation (enqueue/_debounce.py), or None."""
    item = app.runtime.store.get(key)
    return None if item is None else coalescing(item, now=app.runtime.clock())


def render_waiting(console: Any, view: Any) -> None:
    """A debounced burst waiting (due time, requests coalesced) or a deduplicated request holding its key."""
    rows = [("job", view.job or "-"), ("state", view.state)]
    if view.state == "waiting":
        rows += [("due at", iso_time(view.due_at)), ("coalesced", f"{view.coalesced} request(s) (debounce)")]
    else:
        rows += [("held by", f"request {view.request} ({view.dedupe})"), ("held until", iso_time(view.held_until))]
    print_fields(console, f"job {view.key}", rows)


def render_scheduled(console: Any, view: ScheduledJobView) -> None:
    """A delayed job waiting in its one-time schedule, as a two-column table."""
    print_fields(console, f"job {view.key}", [
        ("job", view.job or "-"), ("state", view.state), ("due at", view.due_text),
        ("waits in", f"schedule {view.schedule} of group {view.group} (no record until it runs)")])


def show(console: Any, found: Any, *, json_output: bool, render: Callable[[Any, Any], None], missing: str,
         as_json: Callable[[Any], Any] = asdict) -> None:
    """``found`` as JSON (``--json``) or rendered; ``missing`` and exit 3 when there is nothing to show."""
    if found is None:
        console.print(missing)
        raise typer.Exit(EXIT_NOT_FOUND)
    if json_output:
        typer.echo(json.dumps(as_json(found), sort_keys=True))
        return
    render(console, found)


def table_app(table: str | None, endpoint_url: str | None, region: str | None) -> JobApp:
    """An app with no jobs, on ``table``: enough to read and write job records."""
    from sqsjobs._app import JobApp
    from sqsjobs._clients import operator_client

    if not table:
        raise ConfigurationError(f"which idempotency table? pass --table or set {ENV_TABLE}"
                                 f"{did_you_mean(ENV_TABLE)}")
    return JobApp(table_name=table,
                  dynamodb_client=operator_client("dynamodb", endpoint_url=endpoint_url, region=region))
