"""The cost view's options (``sqsjobs status`` and ``sqsjobs console`` share them) and its table.

Thin over :mod:`sqsjobs.ops._cost`: the options build a :class:`~sqsjobs.ops._cost.CostOptions`, the table
prints a :class:`~sqsjobs.ops._cost.CostReport`.

Example:
    >>> options(days=7, sends_per_request=10, prices=["sqs_request=0.0000005"]).prices.sqs_request
    5e-07
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from sqsjobs.cli.render import plain, titled_table
from sqsjobs.ops._cost import (
    DEFAULT_DAYS,
    DEFAULT_SENDS_PER_REQUEST,
    CostOptions,
    format_jobs,
    format_usd,
    parse_prices,
)

if TYPE_CHECKING:
    from rich.console import Console

    from sqsjobs.ops._cost import CostReport

#: ``--cost-days``: the window the jobs are priced over (0: no cost view)
CostDays = Annotated[int, typer.Option(min=0, max=455, help="Price each job over this many days (0: skip).")]
#: ``--sends-per-request``: how the producer batches its sends (the worker cannot see them)
SendsPerRequest = Annotated[float, typer.Option(
    min=1, max=10, help="Jobs the producer sends per SendMessage(Batch): 1 (enqueue) to 10 (enqueue_many).")]
#: ``--price NAME=USD``: a price other than us-east-1's list price
PriceOverrides = Annotated[list[str] | None, typer.Option(
    "--price", help="A price in USD instead of us-east-1's, as NAME=USD (repeatable), e.g. "
                    "lambda_gb_second=0.0000166667 for x86_64.")]


def options(*, days: int = DEFAULT_DAYS, sends_per_request: float = DEFAULT_SENDS_PER_REQUEST,
            prices: list[str] | None = None) -> CostOptions:
    """The cost options from the command line (a bad ``--price`` is a ``ConfigurationError``)."""
    return CostOptions(days=days, prices=parse_prices(prices or []), sends_per_request=sends_per_request)


def print_costs(console: Console, report: CostReport) -> None:
    """What each job cost: a line a job, then the dollars by service.

    Example:
        >>> import io
        >>> from rich.console import Console
        >>> from sqsjobs.ops._cost import CostReport, Prices
        >>> console = Console(width=120, record=True, file=io.StringIO())
        >>> print_costs(console, CostReport(days=7, start=0, end=1, prices=Prices(), sends_per_request=1))
        >>> "what each job cost (last 7 days" in console.export_text()
        True
    """
    columns = ("job", "jobs", "USD", "per million", "Lambda", "DynamoDB", "SQS", "Scheduler", "logs", "metrics")
    table = titled_table(f"what each job cost (last {report.days} days, {format_usd(report.total_usd)} in all)",
                         columns, right=set(columns[1:]))
    for row in report.rows():
        c = row.cost
        name = row.job if row.tenant is None else f"  tenant {row.tenant}"
        table.add_row(plain(name), format_jobs(row.jobs), format_usd(c.total_usd),
                      "-" if row.per_million is None else format_usd(row.per_million),
                      *(format_usd(v) for v in (c.lambda_usd, c.dynamodb_usd, c.sqs_usd, c.scheduler_usd,
                                                c.logs_usd, c.metrics_usd)))
    console.print(table)
    for row in report.jobs:
        console.print(plain(row.summary(report.days)))
    if report.service_metrics_usd:
        console.print(f"the service's own metrics: {format_usd(report.service_metrics_usd)}")
    for note in report.notes:
        console.print(f"[dim]note: {plain(note)}[/dim]")
