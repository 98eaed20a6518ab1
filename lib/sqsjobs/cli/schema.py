"""`sqsjobs schema`: print the JSON Schema of the job message body (the envelope).

The schema ships inside the package as ``sqsjobs/envelope.schema.json`` so a
producer in any language can validate what it sends (docs/producers.md).

Example:
    >>> [c.name for c in commands.registered_commands]
    ['schema']
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Annotated, Any

import typer

SCHEMA_RESOURCE = "envelope.schema.json"


def schema_text() -> str:
    """The schema file exactly as shipped.

    Example:
        >>> '"$schema"' in schema_text()
        True
    """
    return resources.files("sqsjobs").joinpath(SCHEMA_RESOURCE).read_text(encoding="utf-8")


def load_schema() -> dict[str, Any]:
    """The schema as a dict (for ``jsonschema`` and friends).

    Example:
        >>> load_schema()["required"]
        ['v', 'job']
    """
    schema: dict[str, Any] = json.loads(schema_text())
    return schema


commands = typer.Typer()


@commands.command("schema")
def schema_command(
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the schema to this file instead of standard output."),
    ] = None,
) -> None:
    """Print the JSON Schema of a job message body, for producers in other languages."""
    text = schema_text()
    if output is None:
        typer.echo(text, nl=not text.endswith("\n"))
    else:
        output.write_text(text, encoding="utf-8")
