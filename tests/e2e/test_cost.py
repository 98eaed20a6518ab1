"""What a job costs, on the local cloud (issue 34): the deployed worker's metrics, mirrored into the cloud's
CloudWatch as a laptop has them, priced by ``sqsjobs status``'s cost view."""

from __future__ import annotations

import itertools
import time
from typing import Any

from sqsjobs.console.config import ConsoleConfig
from sqsjobs.local.pytest_plugin import LocalCloudSession
from sqsjobs.ops._cost import CostOptions
from sqsjobs.ops._status import collect_status

_ids = itertools.count(70_000)


def invoice_costs(cloud: LocalCloudSession, config: ConsoleConfig) -> Any:
    """The invoice-email row of the cost view, once the worker's lines are in the cloud's CloudWatch."""
    cloud.telemetry.publish()  # the tick's mirror into the cloud's CloudWatch, now
    report = collect_status(sqs_client=cloud.clients.get("sqs"), cloudwatch_client=cloud.clients.get("cloudwatch"),
                            queue=config.queue, namespace=config.namespace, service=config.service,
                            costs=CostOptions())
    assert report.costs is not None
    return next((row for row in report.costs.jobs if row.job == "invoice-email"), None)


def test_status_prices_what_the_deployed_worker_ran(local_cloud: LocalCloudSession) -> None:
    for _ in range(3):
        local_cloud.enqueue("invoice-email", invoice_id=next(_ids))
    local_cloud.drain()
    config = ConsoleConfig.for_local_cloud(local_cloud.state())

    # The worker's last lines reach the cloud's metrics as its output is read: wait for them, not for a time.
    deadline = time.monotonic() + 60
    row = invoice_costs(local_cloud, config)
    while (row is None or row.jobs < 3) and time.monotonic() < deadline:
        time.sleep(0.5)
        row = invoice_costs(local_cloud, config)

    # The session's other tests ran invoice emails too: at least these three, each claimed and completed.
    assert row is not None and row.jobs >= 3
    assert row.usage.write_units >= 2 * row.jobs
    assert row.usage.lambda_gb_seconds > 0 and row.usage.lambda_requests > 0 and row.usage.sqs_requests > 0
    assert row.cost.total_usd > 0 and row.per_million is not None and row.per_million > 0
