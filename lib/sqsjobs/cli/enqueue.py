"""`sqsjobs enqueue JOB key=value ...`: put one job on the queue, locally or on AWS.

The job is built by the application's own ``JobApp`` (``--app``, default
``handlers.app:app``), so its idempotency key, argument validation and
envelope are exactly the producer's. Without ``--aws``, ``--endpoint-url`` or
``--queue-url`` it targets the running ``sqsjobs local up``.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from typing import Annotated, Any

import typer

from sqsjobs.cli.exits import EXIT_FAILED

DEFAULT_APP = "handlers.app:app"


def parse_arguments(pairs: list[str]) -> dict[str, Any]:
    """``key=value`` pairs; a value that reads as JSON (``42``, ``true``, ``"x"``) is that value.

    Example:
        >>> parse_arguments(["invoice_id=42", "note=hello", "urgent=true", "code=\\"007\\""])
        {'invoice_id': 42, 'note': 'hello', 'urgent': True, 'code': '007'}
    """
    arguments: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key.isidentifier():
            raise typer.BadParameter(f"{pair!r} is not key=value with a Python name as key", param_hint="ARGS")
        try:
            arguments[key] = json.loads(raw)
        except ValueError:
            arguments[key] = raw
    return arguments


def load_app(spec: str) -> Any:
    """Import ``module:attribute`` from the current directory (the project root).

    Example:
        >>> load_app("handlers.app:app").jobs  # doctest: +SKIP
        {'invoice-email': <Job invoice-email>, ...}"""
    module_name, _, attribute = spec.partition(":")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module = importlib.import_module(module_name)
    return getattr(module, attribute or "app")


def local_target() -> dict[str, str]:
    """Environment that points the app at the running local cloud.

    Example:
        >>> local_target()["AWS_ENDPOINT_URL"]  # doctest: +SKIP
        'http://127.0.0.1:41237'"""
    from sqsjobs.local.aws import local_environment
    from sqsjobs.local.control import read_state

    state = read_state()
    return {**local_environment(state["endpoint"], state["region"]), **state.get("app_env", {})}


def register(app: typer.Typer) -> None:
    """Add ``sqsjobs enqueue`` to ``app``.

    Example:
        >>> app = typer.Typer()
        >>> register(app)
        >>> [c.name for c in app.registered_commands]
        ['enqueue']
    """

    @app.command("enqueue")
    def enqueue_command(
        job: Annotated[str, typer.Argument(help="The job's registered name, e.g. invoice-email.")],
        args: Annotated[list[str] | None, typer.Argument(help="Arguments as key=value (JSON values allowed).")] = None,
        app_spec: Annotated[
            str, typer.Option("--app", envvar="SQSJOBS_APP", help="The JobApp as module:attribute.")
        ] = DEFAULT_APP,
        queue_url: Annotated[str | None, typer.Option(help="The jobs queue (default: the app's).")] = None,
        aws: Annotated[bool, typer.Option("--aws", help="Use AWS (profile, region and env as usual).")] = False,
        endpoint_url: Annotated[str | None, typer.Option(help="AWS endpoint to send to.")] = None,
        region: Annotated[str | None, typer.Option(help="AWS region.")] = None,
        profile: Annotated[str | None, typer.Option(help="AWS profile.")] = None,
        tenant: Annotated[
            str | None, typer.Option(help="The tenant the job is for (a standard queue's MessageGroupId).")
        ] = None,
    ) -> None:
        """Enqueue JOB with ARGS through the app's producer; print the message id."""
        from sqsjobs.errors import SqsJobsError
        from sqsjobs.local.errors import LocalCloudError

        arguments = parse_arguments(args or [])
        # The app reads its settings and builds clients from the environment.
        if aws or endpoint_url or queue_url:
            for name, value in (("AWS_ENDPOINT_URL", endpoint_url), ("AWS_DEFAULT_REGION", region),
                                ("AWS_PROFILE", profile), ("SQSJOBS_QUEUE_URL", queue_url)):
                if value:
                    os.environ[name] = value
        else:
            try:
                os.environ.update(local_target())
            except LocalCloudError as exc:
                typer.echo(f"error: {exc} (or pass --aws / --queue-url)", err=True)
                raise typer.Exit(EXIT_FAILED) from None
        try:
            job_app = load_app(app_spec)
            message_id = job_app.enqueue(job, **arguments, **({"tenant": tenant} if tenant else {}))
        except (ImportError, AttributeError) as exc:
            typer.echo(f"error: cannot load the app {app_spec!r}: {exc} (run from the project root or pass --app)",
                       err=True)
            raise typer.Exit(EXIT_FAILED) from None
        except SqsJobsError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(EXIT_FAILED) from None
        typer.echo(message_id)
