"""`sqsjobs local`: run template.yaml on a local moto server (`up`), fire schedules, print the environment.

Thin over :mod:`sqsjobs.local`; moto and samtranslator are imported only
when a command runs.
"""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from sqsjobs.cli.exits import EXIT_FAILED

if TYPE_CHECKING:
    from sqsjobs.local.cloud import LocalCloud



def parse_parameters(pairs: list[str]) -> dict[str, str]:
    """``["K=V", ...]`` → ``{"K": "V"}``, with a usage error for anything else.

    Example:
        >>> parse_parameters(["SenderEmail=me@example.com", "MaxAttempts=3"])
        {'SenderEmail': 'me@example.com', 'MaxAttempts': '3'}
    """
    result = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint="--parameter")
        result[name] = value
    return result


def summary(cloud: LocalCloud) -> list[str]:
    """The lines ``local up`` prints: where everything is and how to reach it.

    Example:
        >>> summary(cloud)[0]  # doctest: +SKIP
        'moto server   http://127.0.0.1:41237  (export AWS_ENDPOINT_URL=http://127.0.0.1:41237)'"""
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


def register(app: typer.Typer) -> None:
    """Add ``sqsjobs local up|fire|env`` to ``app``.

    Example:
        >>> app = typer.Typer()
        >>> register(app)
        >>> [g.name for g in app.registered_groups]
        ['local']
    """
    local = typer.Typer(no_args_is_help=True, help="Run the template on a local moto server with Lambda emulated.")
    app.add_typer(local, name="local")

    @local.command("up")
    def up_command(
        template: Annotated[Path, typer.Option(help="The SAM template to deploy.")] = Path("template.yaml"),
        port: Annotated[
            int | None, typer.Option(min=1, max=65535, help="moto server port on 127.0.0.1 (default: a free one).")
        ] = None,
        parameter: Annotated[
            list[str] | None,
            typer.Option("--parameter", "-p",
                         help="Template parameter NAME=VALUE (repeatable; wins over samconfig.toml's overrides)."),
        ] = None,
        stack_name: Annotated[str, typer.Option(help="Prefix of the local resource names.")] = "sqsjobs-local",
        show_metrics: Annotated[bool, typer.Option(help="Also print the EMF metric lines.")] = False,
    ) -> None:
        """Start a moto server, deploy TEMPLATE on it and run its functions until Ctrl-C."""
        from rich.console import Console

        from sqsjobs.local.cloud import LocalCloud
        from sqsjobs.local.control import default_state_path
        from sqsjobs.local.errors import LocalCloudError
        from sqsjobs.local.output import Output
        from sqsjobs.local.samconfig import parameter_overrides

        console = Console(stderr=True, highlight=False, soft_wrap=True)
        try:
            parameters = {**parameter_overrides(template), **parse_parameters(parameter or [])}
        except LocalCloudError as exc:
            console.print(f"[bold red]error[/] {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        stop = threading.Event()
        # SIGTERM (e.g. from a supervisor) ends as cleanly as Ctrl-C.
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        try:
            cloud = LocalCloud.start(
                template, port=port, parameters=parameters, stack_name=stack_name,
                output=Output(show_emf=show_metrics), state_path=default_state_path(),
            )
        except LocalCloudError as exc:
            console.print(f"[bold red]error[/] {exc}")
            raise typer.Exit(EXIT_FAILED) from None
        try:
            for line in summary(cloud):
                console.print(line, markup=False)
            console.print("[green]ready[/]: enqueue with `sqsjobs enqueue JOB key=value`; Ctrl-C stops everything")
            while not stop.wait(0.5):
                if cloud.failure is not None:
                    break
        except KeyboardInterrupt:
            pass
        finally:
            console.print("stopping: workers, pollers, moto server ...")
            cloud.stop()
            console.print(f"stopped; port {cloud.server.port} is free")
        if cloud.failure is not None:
            raise typer.Exit(EXIT_FAILED)

    @local.command("fire")
    def fire_command(
        name: Annotated[str, typer.Argument(
            help="Schedule: its Name, logical id or its function's; or the key of a delayed job (fired early).")],
        endpoint_url: Annotated[
            str | None, typer.Option(help="Fire on this AWS endpoint instead of the running local cloud.")
        ] = None,
        aws: Annotated[bool, typer.Option("--aws", help="Fire on AWS (profile and region as usual).")] = False,
        region: Annotated[str | None, typer.Option(help="AWS region (with --aws or --endpoint-url).")] = None,
        profile: Annotated[str | None, typer.Option(help="AWS profile (with --aws or --endpoint-url).")] = None,
    ) -> None:
        """Run schedule NAME's function now, or send the delayed job with key NAME now; print the result."""
        from sqsjobs.local.errors import LocalCloudError
        from sqsjobs.local.fire import fire_local, fire_remote

        try:
            if aws or endpoint_url:
                result: dict[str, Any] = fire_remote(name, endpoint_url=endpoint_url, region=region, profile=profile)
            else:
                result = fire_local(name)
        except LocalCloudError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_FAILED) from None
        typer.echo(json.dumps(result, indent=2, default=str))
        if not result.get("ok"):
            raise typer.Exit(EXIT_FAILED)

    @local.command("env")
    def env_command() -> None:
        """Print `export` lines that point AWS clients (and the app) at the running local cloud."""
        from sqsjobs.local.aws import local_environment
        from sqsjobs.local.control import read_state
        from sqsjobs.local.errors import LocalCloudError

        try:
            state = read_state()
        except LocalCloudError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_FAILED) from None
        values = {**local_environment(state["endpoint"], state["region"]), **state.get("app_env", {})}
        for key, value in values.items():
            typer.echo(f"export {key}={value}")
