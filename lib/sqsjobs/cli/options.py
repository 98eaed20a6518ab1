"""Options several ``sqsjobs`` commands share, declared once.

Example:
    >>> def status(queue: Queue = None, endpoint_url: EndpointUrl = None, region: Region = None) -> None: ...
"""

from __future__ import annotations

from typing import Annotated

import typer

from sqsjobs.settings import ENV_DLQ_URL, ENV_QUEUE_URL, ENV_TABLE

#: ``--endpoint-url`` (or ``AWS_ENDPOINT_URL``): AWS, or the local cloud's moto server
EndpointUrl = Annotated[
    str | None, typer.Option(envvar="AWS_ENDPOINT_URL", help="AWS endpoint, e.g. the local cloud's.")
]
#: ``--region`` (or ``AWS_REGION`` / ``AWS_DEFAULT_REGION``)
Region = Annotated[str | None, typer.Option(envvar=["AWS_REGION", "AWS_DEFAULT_REGION"], help="AWS region.")]
#: ``--queue`` (or ``SQSJOBS_QUEUE_URL``): the jobs queue
Queue = Annotated[str | None, typer.Option(envvar=ENV_QUEUE_URL, help="The jobs queue: URL, ARN or name.")]
#: ``--dlq`` (or ``SQSJOBS_DLQ_URL``): its dead-letter queue
Dlq = Annotated[
    str | None, typer.Option(envvar=ENV_DLQ_URL, help="Its DLQ (default: the queue's redrive target).")
]
#: ``--table`` (or ``SQSJOBS_TABLE``): the idempotency table
Table = Annotated[str | None, typer.Option(envvar=ENV_TABLE, help="The idempotency table (job records, runs).")]
