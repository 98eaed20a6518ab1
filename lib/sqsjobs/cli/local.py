"""`sqsjobs local`: run template.yaml on a local moto server (`up`), fire schedules, print the environment.

Thin over :mod:`sqsjobs.local`; moto and samtranslator are imported only
when a command runs.

Example:
    >>> [g.name for g in commands.registered_groups]
    ['local']
    >>> sorted(c.name for c in local.registered_commands)
    ['down', 'env', 'fire', 'reload', 'up']
"""

from __future__ import annotations

import json
import signal
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from sqsjobs._extras import Extra
from sqsjobs.cli.exits import EXIT_FAILED, exit_with, fail, require_extra
from sqsjobs.cli.options import DEFAULT_TEMPLATE, ProjectTemplate, parse_parameters
from sqsjobs.cli.render import command_console
from sqsjobs.local.errors import LocalCloudError

if TYPE_CHECKING:
    from collections.abc import Iterator

    from rich.console import Console

    from sqsjobs.local.cloud import LocalCloud
    from sqsjobs.local.control import ProjectFiles

commands = typer.Typer()
local = typer.Typer(no_args_is_help=True, help="Run the template on a local moto server with Lambda emulated.")
commands.add_typer(local, name="local")

# ``local up``'s options
UpTemplate = Annotated[Path, typer.Option(help="The SAM template to deploy.")]
Port = Annotated[
    int | None, typer.Option(min=1, max=65535, help="moto server port on 127.0.0.1 (default: a free one).")
]
Parameters = Annotated[
    list[str] | None,
    typer.Option("--parameter", "-p", help="Template parameter NAME=VALUE (repeatable; wins over samconfig.toml's "
                                           "overrides)."),
]
StackName = Annotated[str, typer.Option(help="Prefix of the local resource names.")]
ShowMetrics = Annotated[bool, typer.Option(help="Also print the EMF metric lines.")]
Reload = Annotated[bool, typer.Option("--reload", help="Restart the function workers when a file under a CodeUri "
                                                       "changes (queues, tables and the DLQ keep their messages).")]
Fresh = Annotated[bool, typer.Option("--fresh", help="Start empty: discard the state this project's cloud kept when "
                                                     "it last stopped (queues, messages, tables, schedules).")]
Verbose = Annotated[int, typer.Option("--verbose", "-v", count=True, help="Also the functions' DEBUG log lines.")]
Quiet = Annotated[bool, typer.Option("--quiet", "-q", help="No job outcomes or function logs, only errors and alarms.")]
# ``local fire``'s options
FireName = Annotated[str, typer.Argument(
    help="Schedule: its Name, logical id or its function's; or the key of a delayed job (fired early).")]
FireEndpoint = Annotated[str | None, typer.Option(help="Fire on this AWS endpoint instead of the running local cloud.")]
FireOnAws = Annotated[bool, typer.Option("--aws", help="Fire on AWS (profile and region as usual).")]
FireRegion = Annotated[str | None, typer.Option(help="AWS region (with --aws or --endpoint-url).")]
FireProfile = Annotated[str | None, typer.Option(help="AWS profile (with --aws or --endpoint-url).")]


@dataclass(frozen=True, kw_only=True)
class UpOptions:
    """What ``local up`` was asked, besides --fresh (which only decides what the lock's holder deletes first)."""

    template: Path
    port: int | None
    parameter: list[str] | None
    stack_name: str
    show_metrics: bool
    reload: bool
    verbose: int
    quiet: bool


def summary(cloud: LocalCloud) -> list[str]:
    """The lines ``local up`` prints: where everything is and how to reach it."""
    d = cloud.deployment
    lines = [f"moto server   {cloud.endpoint}  (export AWS_ENDPOINT_URL={cloud.endpoint})"]
    lines += [f"queue         {k:<24} {q.url}" for k, q in d.queues.items()]
    lines += [f"table         {k:<24} {name}" for k, name in d.tables.items()]
    lines += [f"topic         {k:<24} {arn}" for k, arn in d.topics.items()]
    for mapping in d.sqs_mappings:
        lines.append(
            f"function      {mapping.function:<24} <- SQS {d.queue_by_url(mapping.queue_url).name}"  # type: ignore[union-attr]
            f" (batch {mapping.batch_size}, window {mapping.batching_window_s:g}s, "
            f"max concurrency {mapping.max_concurrency}, timeout {d.functions[mapping.function].timeout}s)"
        )
    lines += [f"function      {m.function:<24} <- stream of {m.stream_arn.split(':table/')[-1].split('/stream/')[0]}"
              f" (batch {m.batch_size}, {m.starting_position})" for m in d.stream_mappings]
    lines += [f"schedule      {s.name:<24} {s.expression} -> {s.function}" for s in d.schedules]
    lines += [f"delayed jobs  {k:<24} schedule group {name} (one-time schedules fire at their time)"
              for k, name in d.schedule_groups.items()]
    lines += [f"alarm         {a.severity:<24} {a.name}" for a in d.alarms]
    lines += [f"dashboard     {name}" for name in d.dashboards]
    return lines


def kept_line(cloud: LocalCloud, files: ProjectFiles) -> str:
    """What the stop kept for the next ``local up``, truthfully (``sqsjobs.local.snapshot``)."""
    from sqsjobs.local.snapshot import read_header

    if cloud.failure is not None:
        return "kept nothing: the moto server died, and its state with it; the next `local up` starts empty"
    if cloud.kept is None:
        why = cloud.save_failure or "it was not saved"
        return f"kept nothing ({why}); the next `local up` starts empty"
    try:
        header = read_header(files.snapshot)
    except LocalCloudError:
        header = None
    left_out = sorted(header.not_kept) if header is not None else []
    return (f"kept for the next `sqsjobs local up`: {cloud.kept.describe()}; messages a function had taken come "
            "back after their visibility timeout. Not kept: the local alarms' evaluation windows, rate() timers "
            "and the schedule ticks due while it is down"
            + (f", moto's {', '.join(left_out)} state" if left_out else "")
            + ". `sqsjobs local up --fresh` starts empty.")


def _validated(console: Console, template: Path, parameters: dict[str, str]) -> bool:
    """The validation ``sqsjobs check`` runs, plus the lint rules with these values; False when it cannot start.

    What would stop the stack from deploying or the app from running (parameters, files, queues, the
    app against the template) stops ``local up``; a lint rule broken by these values is shown as
    ``check`` shows it, and the local cloud runs anyway (short timeouts for a quick local loop).
    """
    from sqsjobs.validation import validate

    problems = validate(template, parameters, require_values=True, lint_rules=True)
    for problem in problems:
        style = "bold red" if problem.is_error else "yellow"
        console.print(f"[{style}]{problem.severity.value}[/] {escape(problem.line(str(template)))}")
    if any(p.is_error and not p.rule for p in problems):
        console.print(f"not starting: fix the error(s) above (`sqsjobs check {template}` shows them too)")
        return False
    if any(p.is_error for p in problems):
        console.print("starting anyway: the local cloud runs with these values, but `sqsjobs check` fails on the "
                      "rule(s) above, so a deploy with them would not be safe")
    return True


@contextmanager
def _refused(console: Console) -> Iterator[None]:
    """A ``LocalCloudError`` while ``local up`` starts: one red line, exit 1."""
    try:
        yield
    except LocalCloudError as exc:
        console.print(f"[bold red]error[/] {exc}")
        raise typer.Exit(EXIT_FAILED) from None


@local.callback()
def require_local_extra() -> None:
    """Every ``local`` command needs the [local] extra: say how to install it, in one line."""
    require_extra(Extra.LOCAL, "sqsjobs local")


@local.command("up")
def up_command(
    template: UpTemplate = DEFAULT_TEMPLATE, port: Port = None, parameter: Parameters = None,
    stack_name: StackName = "sqsjobs-local", show_metrics: ShowMetrics = False, reload: Reload = False,
    fresh: Fresh = False, verbose: Verbose = 0, quiet: Quiet = False,
) -> None:
    """Start a moto server, deploy TEMPLATE on it and run its functions until Ctrl-C (or `sqsjobs local down`).

    A stop keeps the state (queues with their messages, tables and items, schedules) and the next `local up`
    of the project resumes it, unless --fresh. Each job's outcome is one line: done, duplicate, retry in Ns,
    dead-lettered (reason), with the job, its key and its SQS message id (the id status and redrive show).
    """
    from sqsjobs.local.control import ProjectLock, project_files

    console = command_console(stderr=True, highlight=False, soft_wrap=True)
    files = project_files(template)
    lock = ProjectLock(files.lock, files.state)
    with _refused(console):
        lock.acquire()  # one cloud per project: a second `local up` here is refused, naming the first's pid
    try:
        if fresh:
            for kept in (files.snapshot, files.streams):
                kept.unlink(missing_ok=True)
        _up(console, files, UpOptions(template=template, port=port, parameter=parameter, stack_name=stack_name,
                                      show_metrics=show_metrics, reload=reload, verbose=verbose, quiet=quiet))
    finally:
        lock.release()


def _up(console: Console, files: ProjectFiles, options: UpOptions) -> None:
    """Validate, start the cloud, print where everything is, and run until a stop; then say what was kept."""
    from sqsjobs.local.samconfig import parameter_overrides

    with _refused(console):
        parameters = {**parameter_overrides(options.template), **parse_parameters(options.parameter or [])}
    if not _validated(console, options.template, parameters):
        raise typer.Exit(EXIT_FAILED)
    stop = threading.Event()
    # SIGTERM (e.g. from a supervisor) ends as cleanly as Ctrl-C.
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with _refused(console):
        cloud = _start(files, options, parameters)
    try:
        _announce(console, cloud, reload=options.reload)
        while not stop.wait(0.5):
            if cloud.failure is not None or cloud.stop_requested.is_set():
                break
    except KeyboardInterrupt:
        pass
    finally:
        console.print("stopping: workers, pollers, moto server ...")
        cloud.stop()
        console.print(f"stopped; port {cloud.server.port} is free")
        console.print(kept_line(cloud, files), markup=False)
    if cloud.failure is not None:
        raise typer.Exit(EXIT_FAILED)


def _start(files: ProjectFiles, options: UpOptions, parameters: dict[str, str]) -> LocalCloud:
    from sqsjobs.local.cloud import LocalCloud
    from sqsjobs.local.output import OUTCOMES, QUIET, Output, terminal_log

    verbosity = QUIET if options.quiet else OUTCOMES + options.verbose
    return LocalCloud.start(
        options.template, port=options.port, parameters=parameters, stack_name=options.stack_name,
        output=Output(log=terminal_log(verbosity), show_emf=options.show_metrics), state_path=files.state,
        log_level=None if options.quiet else "DEBUG", reload=options.reload, snapshot=files.snapshot,
        streams_path=files.streams,
    )


def _announce(console: Console, cloud: LocalCloud, *, reload: bool) -> None:
    """What ``local up`` prints once the cloud runs: the summary, what it resumed, what it watches."""
    for line in summary(cloud):
        console.print(line, markup=False)
    if cloud.resumed is not None:
        saved = datetime.fromtimestamp(cloud.resumed.saved_at).isoformat(sep=" ", timespec="seconds")
        console.print(f"resumed       the state kept at the last stop ({saved}); --fresh starts empty", markup=False)
    if reload:
        console.print(f"reload        watching {', '.join(str(d) for d in cloud.code_dirs())}", markup=False)
    console.print("[green]ready[/]: enqueue with `sqsjobs enqueue JOB key=value`; Ctrl-C (or `sqsjobs local "
                  "down`) stops everything")


@local.command("down")
def down_command(
    timeout: Annotated[float, typer.Option(min=1, help="Seconds to wait for it to stop.")] = 60.0,
    template: ProjectTemplate = DEFAULT_TEMPLATE,
) -> None:
    """Stop this project's `sqsjobs local up` (its workers, pollers and moto server) and wait until it is gone."""
    from sqsjobs.local.control import default_state_path, stop_running

    with exit_with(EXIT_FAILED, LocalCloudError):
        pid = stop_running(default_state_path(template), timeout=timeout)
    typer.echo(f"stopped the local cloud (pid {pid})", err=True)


@local.command("reload")
def reload_command(template: ProjectTemplate = DEFAULT_TEMPLATE) -> None:
    """Restart this project's cloud's function workers on the current code now, and wait until they are up.

    What `local up --reload` does by itself a second after an edit, for a script that must not race it.
    """
    from sqsjobs.local.control import call, default_state_path, read_state

    with exit_with(EXIT_FAILED, LocalCloudError):
        answer = call(read_state(default_state_path(template)), "reload", {})
    if "error" in answer:
        fail(answer["error"])
    broken = answer.get("broken") or []
    typer.echo(f"reloaded {answer['functions'] - len(broken)} of {answer['functions']} function(s)", err=True)
    if broken:
        fail(f"cannot import the handler of {', '.join(broken)} (see `local up`'s output)")


@local.command("fire")
def fire_command(
    name: FireName, endpoint_url: FireEndpoint = None, aws: FireOnAws = False, region: FireRegion = None,
    profile: FireProfile = None, template: ProjectTemplate = DEFAULT_TEMPLATE,
) -> None:
    """Run schedule NAME's function now, or send the delayed job with key NAME now; print the result."""
    from sqsjobs.local.fire import fire_local, fire_remote

    with exit_with(EXIT_FAILED, LocalCloudError):
        if aws or endpoint_url:
            result: dict[str, Any] = fire_remote(name, endpoint_url=endpoint_url, region=region, profile=profile)
        else:
            result = fire_local(name, template)
    typer.echo(json.dumps(result, indent=2, default=str))
    if not result.get("ok"):
        raise typer.Exit(EXIT_FAILED)


@local.command("env")
def env_command(template: ProjectTemplate = DEFAULT_TEMPLATE) -> None:
    """Print `export` lines that point AWS clients (and the app) at the running local cloud.

    Every variable the template gives the worker is there (queue, DLQ, tables...), so the app's own
    code, `sqsjobs status` and the AWS CLI work in a shell after `eval "$(sqsjobs local env)"`.
    """
    import shlex

    from sqsjobs.local.aws import local_environment
    from sqsjobs.local.control import default_state_path, read_state

    with exit_with(EXIT_FAILED, LocalCloudError):
        state = read_state(default_state_path(template))
    values = {**local_environment(state["endpoint"], state["region"]), **state.get("app_env", {})}
    for key, value in values.items():
        typer.echo(f"export {key}={shlex.quote(str(value))}")
