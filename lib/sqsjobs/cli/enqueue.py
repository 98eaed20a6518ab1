"""`sqsjobs enqueue JOB key=value ...`: put one job on the queue, locally or on AWS.

The job is built by the application's own ``JobApp`` (``--app``, default
``handlers.app:app``), so its idempotency key, argument validation and
envelope are exactly the producer's. The queue is ``--queue-url`` (with
``--aws`` or ``--endpoint-url``, AWS's usual environment), else
``SQSJOBS_QUEUE_URL`` (exported for AWS, or by ``eval "$(sqsjobs local env)"``),
else the running ``sqsjobs local up`` of the project's template.

Example:
    >>> [c.name for c in commands.registered_commands]
    ['enqueue']
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sqsjobs._errors import ConfigurationError, SqsJobsError
from sqsjobs._loading import DEFAULT_APP, load_app
from sqsjobs._settings import (
    ENV_AWS_ENDPOINT_URL,
    ENV_AWS_PROFILE,
    ENV_AWS_REGION,
    ENV_QUEUE_URL,
    ENV_SCHEDULE_GROUP,
    ENV_TABLE,
    Settings,
)
from sqsjobs.cli.exits import EXIT_FAILED, EXIT_USAGE, exit_with, fail
from sqsjobs.cli.options import DEFAULT_TEMPLATE, AppSpec, ProjectTemplate, Region, parse_pairs
from sqsjobs.schedules._receipt import ScheduledJob

if TYPE_CHECKING:
    from sqsjobs._app import JobApp
    from sqsjobs.enqueue._message import JobMessage
    from sqsjobs.enqueue._producer import EnqueueReport

commands = typer.Typer()

JobName = Annotated[str | None, typer.Argument(help="The job's registered name, e.g. invoice-email.")]
Arguments = Annotated[list[str] | None, typer.Argument(help="Arguments as key=value (JSON values allowed).")]
FromFile = Annotated[
    Path | None,
    typer.Option("--from", help="Enqueue every line of this JSON Lines file: {\"job\": ..., \"args\": {...}} "
                                "per line, or JOB's arguments per line when JOB is given."),
]
QueueUrl = Annotated[str | None, typer.Option(help="The jobs queue (default: the app's).")]
OnAws = Annotated[bool, typer.Option("--aws", help="Use AWS (profile, region and env as usual).")]
EndpointUrl = Annotated[str | None, typer.Option(help="AWS endpoint to send to.")]
Profile = Annotated[str | None, typer.Option(envvar=ENV_AWS_PROFILE, help="AWS profile.")]
Tenant = Annotated[str | None, typer.Option(help="The tenant the job is for (a standard queue's MessageGroupId).")]
Delay = Annotated[
    float | None, typer.Option(min=0, help="Seconds from now; past 900 it waits in a one-time schedule.")
]
Eta = Annotated[
    str | None, typer.Option(help="When it is due, ISO 8601 with a time zone, e.g. 2026-01-01T02:00:00Z.")
]
#: what a line of an --from file may carry besides its job and args (the enqueue options)
LINE_OPTIONS = ("delay", "group", "trace_id", "tenant")


def discard(line: str) -> None:
    """The CLI's metrics sink: a producer run from a shell has no log that turns EMF into metrics."""


def parse_arguments(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; a value that reads as JSON (``42``, ``true``, ``"x"``) is that value.

    Example:
        >>> parse_arguments(["invoice_id=42", "note=hello", "urgent=true", "code=\\"007\\""])
        {'invoice_id': 42, 'note': 'hello', 'urgent': True, 'code': '007'}
    """
    arguments: dict[str, Any] = {}
    for key, raw in parse_pairs(pairs, hint="ARGS").items():
        if not key.isidentifier():
            raise typer.BadParameter(f"{key}={raw} is not key=value with a Python name as key", param_hint="ARGS")
        try:
            arguments[key] = json.loads(raw)
        except ValueError:
            arguments[key] = raw
    return arguments


def local_target(template: Path = DEFAULT_TEMPLATE) -> dict[str, str]:
    """Environment that points the app at the running local cloud of ``template``'s project."""
    from sqsjobs.local.aws import local_environment
    from sqsjobs.local.control import default_state_path, read_state

    state = read_state(default_state_path(template))
    return {**local_environment(state["endpoint"], state["region"]), **state.get("app_env", {})}


def parse_eta(text: str | None) -> datetime | None:
    """``--eta``: an ISO 8601 time with its time zone (``Z`` or ``+02:00``); a usage error otherwise.

    Example:
        >>> parse_eta("2026-01-01T02:00:00Z").isoformat()
        '2026-01-01T02:00:00+00:00'
        >>> try:
        ...     parse_eta("2026-01-01T02:00:00")
        ... except typer.BadParameter as refused:
        ...     print(refused.message)
        2026-01-01T02:00:00 has no time zone: add Z (UTC) or an offset such as +02:00
    """
    if text is None:
        return None
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{text} is not an ISO 8601 time such as 2026-01-01T02:00:00Z",
                                 param_hint="--eta") from None
    if when.tzinfo is None:
        raise typer.BadParameter(f"{text} has no time zone: add Z (UTC) or an offset such as +02:00",
                                 param_hint="--eta")
    return when


def when_options(delay: float | None, eta: datetime | None) -> dict[str, Any]:
    """The enqueue options ``--delay``/``--eta`` give (one of them at most).

    Example:
        >>> when_options(7200, None), when_options(None, None)
        ({'delay': 7200}, {})
    """
    if delay is not None and eta is not None:
        raise typer.BadParameter("give --delay or --eta, not both", param_hint="--delay")
    if delay is not None:
        return {"delay": delay}
    return {"eta": eta} if eta is not None else {}


def messages_from_file(app: JobApp, path: Path, job: str | None, *, tenant: str | None = None,
                       defaults: dict[str, Any] | None = None) -> list[JobMessage]:
    """Every line of a JSON Lines file as a checked message; the first bad line is a ``ConfigurationError``.

    With ``job`` each line is that job's arguments (``{"invoice_id": 42}``); without, each line names
    its job: ``{"job": "invoice-email", "args": {"invoice_id": 42}}``, optionally with ``delay``,
    ``group``, ``trace_id`` and ``tenant`` (``tenant`` and ``defaults``, e.g. ``--delay``, are every line's
    unless the line names its own).
    Blank lines are skipped. Nothing is sent unless every line is good.

    Example:
        >>> import tempfile
        >>> from sqsjobs import JobApp
        >>> app = JobApp()
        >>> @app.job("greet", key="greet:{user_id}")
        ... def greet(user_id: int) -> None: ...
        >>> path = Path(tempfile.mkdtemp()) / "greet.jsonl"
        >>> _ = path.write_text('{"user_id": 1}\\n\\n{"user_id": 2}\\n')
        >>> [m.key for m in messages_from_file(app, path, "greet")]
        ['greet:1', 'greet:2']
        >>> _ = path.write_text('{"job": "greet", "args": {"user_id": "one"}}\\n')
        >>> messages_from_file(app, path, None)
        Traceback (most recent call last):
        ...
        sqsjobs.ConfigurationError: greet.jsonl:1: job 'greet': argument 'user_id' must be int, got str 'one'
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigurationError(f"cannot read {path}: {error}") from None
    messages: list[JobMessage] = []
    for number, line in enumerate(lines, start=1):
        where = f"{path.name}:{number}"
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
        except ValueError as error:
            raise ConfigurationError(f"{where}: not JSON: {error}") from None
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{where}: each line must be a JSON object, got {type(entry).__name__}")
        name, arguments, options = _line_call(entry, job, where)
        if tenant is not None:
            options.setdefault("tenant", tenant)
        if not {"delay", "eta"} & set(options):
            options.update(defaults or {})
        try:
            messages.append(app.runtime.job(name).message(**options, **arguments))
        except SqsJobsError as error:
            raise ConfigurationError(f"{where}: {error}") from None
    return messages


def _line_call(entry: dict[str, Any], job: str | None, where: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """A line's job, arguments and enqueue options: the line is JOB's arguments, or names its job."""
    if job is not None:
        return job, entry, {}
    name, arguments = entry.get("job"), entry.get("args", {})
    unknown = sorted(set(entry) - {"job", "args", *LINE_OPTIONS})
    if not isinstance(name, str) or not isinstance(arguments, dict) or unknown:
        raise ConfigurationError(
            f"{where}: expected {{\"job\": NAME, \"args\": {{...}}}} (and optionally delay, group, "
            f"trace_id, tenant){'; unknown: ' + ', '.join(unknown) if unknown else ''}")
    return name, arguments, {k: entry[k] for k in LINE_OPTIONS if k in entry}


@commands.command("enqueue")
def enqueue_command(
    job: JobName = None, args: Arguments = None, from_file: FromFile = None, app_spec: AppSpec = DEFAULT_APP,
    queue_url: QueueUrl = None, aws: OnAws = False, endpoint_url: EndpointUrl = None, region: Region = None,
    profile: Profile = None, tenant: Tenant = None, delay: Delay = None, eta: Eta = None,
    template: ProjectTemplate = DEFAULT_TEMPLATE,
) -> None:
    """Enqueue JOB with ARGS through the app's producer (print the message id), or a whole file with --from.

    With --delay or --eta past 900 s the job waits in a one-time schedule, whose ARN is printed
    instead (and when it is due, on stderr). A deduplicated job whose key is already queued or
    running is not sent: nothing is printed, and stderr says which request holds the key. Without
    --aws, --endpoint-url, --queue-url or SQSJOBS_QUEUE_URL it goes to this project's local cloud
    (the template here, or --template).
    """
    from sqsjobs._clients import sqs_client

    if from_file is None and job is None:
        raise typer.BadParameter("name the job (sqsjobs enqueue JOB key=value ...) or pass --from FILE.jsonl",
                                 param_hint="JOB")
    if from_file is not None and args:
        raise typer.BadParameter("with --from the arguments come from the file, not key=value", param_hint="ARGS")
    arguments = parse_arguments(args or [])
    timing = when_options(delay, parse_eta(eta))
    # The app reads its settings and builds clients from the environment: the flags', else the shell's when
    # it names a queue (SQSJOBS_QUEUE_URL, as `sqsjobs status` reads it), else the running local cloud's.
    if aws or endpoint_url or queue_url or os.environ.get(ENV_QUEUE_URL):
        for name, value in ((ENV_AWS_ENDPOINT_URL, endpoint_url), (ENV_AWS_REGION, region),
                            (ENV_AWS_PROFILE, profile), (ENV_QUEUE_URL, queue_url)):
            if value:
                os.environ[name] = value
    else:
        _aim_at_the_local_cloud(template)
    with exit_with(EXIT_USAGE, ConfigurationError):  # no such app, or its file does not import: one line
        job_app = load_app(app_spec)
    with exit_with(EXIT_FAILED, SqsJobsError):
        messages = (messages_from_file(job_app, from_file, job, tenant=tenant, defaults=timing)
                    if from_file is not None else None)
        settings = _send_settings(job_app)
        # The producer's metrics are EMF lines, which only mean something in a function's log: not here.
        with job_app.use(sqs_client=sqs_client(), settings=settings, emit_metrics=discard):
            if messages is None:
                _enqueue_one(job_app, str(job), arguments, {**timing, **({"tenant": tenant} if tenant else {})})
                return
            report = job_app.enqueue_many(messages)
    _print_report(report)


def _aim_at_the_local_cloud(template: Path) -> None:
    """Point this process's clients and the app at the running local cloud of ``template``'s project."""
    from sqsjobs.local.errors import LocalCloudError

    try:
        os.environ.update(local_target(template))
    except LocalCloudError as exc:
        from sqsjobs._env_names import did_you_mean

        fail(f"{exc} (or pass --aws / --queue-url, or set {ENV_QUEUE_URL}){did_you_mean(ENV_QUEUE_URL)}")


def _send_settings(job_app: JobApp) -> dict[str, Any]:
    """The queues and tables as this command was told (flags, environment, the local cloud), even when the app
    module was imported before they were set."""
    target = os.environ.get(ENV_QUEUE_URL) or job_app.settings.queue_url
    if not target:
        from sqsjobs._env_names import did_you_mean

        raise ConfigurationError(f"no jobs queue: pass --queue-url or set {ENV_QUEUE_URL} (with --aws), "
                                 f"or start `sqsjobs local up`{did_you_mean(ENV_QUEUE_URL)}")
    named = {**job_app.settings.queues, **{name: url for name, url in Settings.from_env().queues.items() if url}}
    settings: dict[str, Any] = {"queue_url": target, "queues": named}
    if os.environ.get(ENV_SCHEDULE_GROUP):
        settings["schedule_group"] = os.environ[ENV_SCHEDULE_GROUP]
    if os.environ.get(ENV_TABLE):  # a deduplicated or debounced job's enqueue writes its key's record
        settings["table_name"] = os.environ[ENV_TABLE]
    return settings


def _enqueue_one(job_app: JobApp, job: str, arguments: dict[str, Any], options: dict[str, Any]) -> None:
    """Send one job; print its message id (or its schedule), or on stderr the request that holds its key."""
    message_id = job_app.enqueue(job, **arguments, **options)
    if getattr(message_id, "duplicate", False):  # a deduplicated job's Receipt: nothing was sent
        key = job_app.message(job, **arguments).key
        typer.echo(f"duplicate: key {key!r} is held by request {message_id}, queued or running "
                   "(the job's dedupe): nothing sent", err=True)
        return
    if getattr(message_id, "cancelled", False):  # its key was cancelled: nothing was sent
        typer.echo(f"cancelled: key {str(message_id)!r} was cancelled, and stays so until its record's TTL: "
                   "nothing sent", err=True)
        return
    typer.echo(message_id)
    if isinstance(message_id, ScheduledJob):  # delay=SECONDS beyond 900: it waits in a schedule
        typer.echo(message_id.describe(), err=True)


def _print_report(report: EnqueueReport) -> None:
    """What ``--from`` sent, on stderr; exit 1 when a message was not sent."""
    scheduled = f", {len(report.scheduled)} scheduled" if report.scheduled else ""
    duplicates = (f", {len(report.duplicates)} duplicate(s) not sent (their key is queued or running)"
                  if report.duplicates else "")
    duplicates += f", {len(report.cancelled)} not sent (their key was cancelled)" if report.cancelled else ""
    typer.echo(f"sent {report.sent} message(s) in {report.calls} SendMessageBatch call(s){scheduled}{duplicates}",
               err=True)
    for failure in report.failed:
        typer.echo(f"not sent: line of key {failure.key!r}: {failure.code}: {failure.message}", err=True)
    if not report.ok:
        raise typer.Exit(EXIT_FAILED)
