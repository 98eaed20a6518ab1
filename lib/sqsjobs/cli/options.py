"""Options several ``sqsjobs`` commands share, declared once.

Example:
    >>> def status(endpoint_url: EndpointUrl = None, region: Region = None) -> None: ...
"""

from __future__ import annotations

from typing import Annotated

import typer

#: ``--endpoint-url`` (or ``AWS_ENDPOINT_URL``): AWS, or the local cloud's moto server
EndpointUrl = Annotated[
    str | None, typer.Option(envvar="AWS_ENDPOINT_URL", help="AWS endpoint, e.g. the local cloud's.")
]
#: ``--region`` (or ``AWS_REGION`` / ``AWS_DEFAULT_REGION``)
Region = Annotated[str | None, typer.Option(envvar=["AWS_REGION", "AWS_DEFAULT_REGION"], help="AWS region.")]
