"""Options several ``sqsjobs`` commands share, declared once, and the parsing of their values.

An option only one command has is declared beside that command, in its module.

Example:
    >>> def status(queue: Queue = None, endpoint_url: EndpointUrl = None, region: Region = None) -> None: ...
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sqsjobs._settings import (
    ENV_APP,
    ENV_AWS_DEFAULT_REGION,
    ENV_AWS_ENDPOINT_URL,
    ENV_AWS_REGION,
    ENV_DLQ_URL,
    ENV_QUEUE_URL,
    ENV_SCHEDULE_GROUP,
    ENV_TABLE,
)

#: what --template defaults to: the template in the current directory names the project
DEFAULT_TEMPLATE = Path("template.yaml")

#: ``--endpoint-url`` (or ``AWS_ENDPOINT_URL``): AWS, or the local cloud's moto server
EndpointUrl = Annotated[
    str | None, typer.Option(envvar=ENV_AWS_ENDPOINT_URL, help="AWS endpoint, e.g. the local cloud's.")
]
#: ``--region`` (or ``AWS_REGION`` / ``AWS_DEFAULT_REGION``)
Region = Annotated[str | None, typer.Option(envvar=[ENV_AWS_REGION, ENV_AWS_DEFAULT_REGION], help="AWS region.")]
#: ``--queue`` (or ``SQSJOBS_QUEUE_URL``): the jobs queue
Queue = Annotated[str | None, typer.Option(envvar=ENV_QUEUE_URL, help="The jobs queue: URL, ARN or name.")]
#: ``--dlq`` (or ``SQSJOBS_DLQ_URL``): its dead-letter queue
Dlq = Annotated[
    str | None, typer.Option(envvar=ENV_DLQ_URL, help="Its DLQ (default: the queue's redrive target).")
]
#: ``--template``: the project whose local cloud a command uses (its own cloud: ``sqsjobs.local.control``)
ProjectTemplate = Annotated[
    Path, typer.Option("--template", help="The project's SAM template: its local cloud is the one used.")
]
#: ``--table`` (or ``SQSJOBS_TABLE``): the idempotency table
Table = Annotated[str | None, typer.Option(
    envvar=ENV_TABLE, help="The idempotency table (job records, runs, the DLQ's evidence).")]
#: ``--table`` of the commands that read one record (``job``, ``cancel``, ``group``, ``chain``)
RecordTable = Annotated[str | None, typer.Option(envvar=ENV_TABLE, help="The idempotency table.")]
#: ``--schedule-group`` (or ``SQSJOBS_SCHEDULE_GROUP``)
ScheduleGroup = Annotated[
    str | None, typer.Option(envvar=ENV_SCHEDULE_GROUP, help="The schedule group delayed jobs wait in.")
]
#: ``--alarm-prefix``
AlarmPrefix = Annotated[
    str | None, typer.Option(help="Alarms named with this prefix (default: alarms on these queues/metrics).")
]
#: ``--app`` (or ``SQSJOBS_APP``): the application's ``JobApp``
AppSpec = Annotated[str, typer.Option("--app", envvar=ENV_APP, help="The JobApp as module:attribute.")]
#: ``--json`` of the commands that show one record's status
JsonStatus = Annotated[bool, typer.Option("--json", help="Print the status as JSON.")]


def parse_pairs(pairs: list[str], *, hint: str) -> dict[str, str]:
    """``["NAME=VALUE", ...]`` as a dict; a malformed pair or a name given twice is a usage error.

    Example:
        >>> parse_pairs(["MaxAttempts=3", "ServiceName=billing"], hint="--parameter")
        {'MaxAttempts': '3', 'ServiceName': 'billing'}
        >>> try:
        ...     parse_pairs(["MaxAttempts=3", "MaxAttempts=4"], hint="--parameter")
        ... except typer.BadParameter as error:
        ...     print(error.message)
        MaxAttempts is given twice (MaxAttempts=3, MaxAttempts=4): keep one
    """
    values: dict[str, str] = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep or not name:
            raise typer.BadParameter(f"{pair!r} is not NAME=VALUE", param_hint=hint)
        if name in values:
            raise typer.BadParameter(f"{name} is given twice ({name}={values[name]}, {pair}): keep one",
                                     param_hint=hint)
        values[name] = value
    return values


def parse_parameters(pairs: list[str]) -> dict[str, str]:
    """``--parameter Name=Value`` (``check``, ``local up``) as a dict, rejecting malformed and repeated pairs.

    Example:
        >>> parse_parameters(["WorkerTimeoutSeconds=300", "ServiceName=billing"])
        {'WorkerTimeoutSeconds': '300', 'ServiceName': 'billing'}
    """
    return parse_pairs(pairs, hint="--parameter")
