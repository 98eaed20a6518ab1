"""`sqsjobs console`: the operator's web page on the data `sqsjobs status` and `sqsjobs redrive` read.

Thin over :mod:`sqsjobs.console`, which comes with the extra
``sqsjobs[console]``; without it the command says how to install it, in one line (exit 2).

Example:
    >>> [c.name for c in commands.registered_commands]
    ['console']
"""

from __future__ import annotations

from typing import Annotated

import typer

from sqsjobs._extras import Extra
from sqsjobs._metrics import DEFAULT_NAMESPACE
from sqsjobs._settings import ENV_CONSOLE_TOKEN, ENV_NAMESPACE, ENV_SCHEDULE_GROUP, ENV_SERVICE
from sqsjobs.cli import cost
from sqsjobs.cli.exits import exit_on_errors, require_extra
from sqsjobs.cli.options import AlarmPrefix, Dlq, EndpointUrl, Queue, Region, Table
from sqsjobs.cli.render import command_console
from sqsjobs.ops._cost import DEFAULT_DAYS, DEFAULT_SENDS_PER_REQUEST
from sqsjobs.ops._status_report import DEFAULT_SAMPLE

DEFAULT_PORT = 8765


commands = typer.Typer()

Port = Annotated[int, typer.Option(min=0, max=65535, help="Port (0: any free one).")]
Host = Annotated[str, typer.Option(help="Address to listen on; anything but loopback needs --token.")]
ReadOnly = Annotated[
    bool, typer.Option("--read-only", help="Show everything, change nothing (no buttons; POST is 403).")
]
Token = Annotated[
    str | None,
    typer.Option(envvar=ENV_CONSOLE_TOKEN, show_envvar=False,
                 help="Access token every request must carry (required off loopback)."),
]
Refresh = Annotated[float, typer.Option(min=1, max=3600, help="Seconds between page refreshes.")]
Namespace = Annotated[str, typer.Option(envvar=ENV_NAMESPACE, help="Namespace of the worker's metrics.")]
Service = Annotated[
    str | None, typer.Option(envvar=ENV_SERVICE, help="Service dimension (default: the only one found).")
]
Sample = Annotated[int, typer.Option(min=1, max=1000, help="Peek at most this many DLQ messages per look.")]
ScheduleGroup = Annotated[
    str | None,
    typer.Option(envvar=ENV_SCHEDULE_GROUP, help="The schedule group delayed jobs wait in (the lookup finds "
                                                 "a key waiting there as scheduled)."),
]


@commands.command("console")
def console_command(
    queue: Queue = None, dlq: Dlq = None, table: Table = None, endpoint_url: EndpointUrl = None,
    region: Region = None, port: Port = DEFAULT_PORT, host: Host = "127.0.0.1", read_only: ReadOnly = False,
    token: Token = None, refresh: Refresh = 5.0, namespace: Namespace = DEFAULT_NAMESPACE, service: Service = None,
    sample: Sample = DEFAULT_SAMPLE, alarm_prefix: AlarmPrefix = None, schedule_group: ScheduleGroup = None,
    cost_days: cost.CostDays = DEFAULT_DAYS, sends_per_request: cost.SendsPerRequest = DEFAULT_SENDS_PER_REQUEST,
    price: cost.PriceOverrides = None,
) -> None:
    """Serve the operator console: queues, alarms, DLQ with redrive, jobs, lookup, runs and leases."""

    require_extra(Extra.CONSOLE, "sqsjobs console")  # before any option is read: one line, whatever else is wrong
    console = command_console()
    with exit_on_errors(console):
        from sqsjobs.console.config import ConsoleConfig
        from sqsjobs.console.server import serve
        from sqsjobs.console.sources import Sources

        config = ConsoleConfig(
            queue=queue, dlq=dlq, table=table, endpoint_url=endpoint_url, region=region, namespace=namespace,
            service=service, host=host, port=port, read_only=read_only, token=token, refresh_seconds=refresh,
            sample=sample, alarm_prefix=alarm_prefix, schedule_group=schedule_group,
            costs=cost.options(days=cost_days, sends_per_request=sends_per_request, prices=price),
        )
        sources = Sources.connect(config)

        def announce(url: str) -> None:
            mode = " (read-only)" if read_only else ""
            console.print(f"sqsjobs console{mode} on [bold]{url}[/bold]  (Ctrl-C to stop)", highlight=False)

        try:
            serve(config, sources, announce=announce)
        except KeyboardInterrupt:  # Ctrl-C is how a console is stopped: a normal end
            console.print("sqsjobs console stopped")
