"""The local cloud's moto server answers GetMetricData like CloudWatch: percentiles and metric math, over HTTP."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from sqsjobs.local.aws import Clients
from sqsjobs.local.server import MotoServer

DIMS = [{"Name": "service", "Value": "demo"}, {"Name": "Job", "Value": "invoice-email"}]


@pytest.fixture(scope="module")
def cloudwatch() -> Iterator[Any]:
    server = MotoServer.start()
    try:
        yield Clients(server.endpoint).get("cloudwatch")
    finally:
        server.stop()


def query(query_id: str, name: str, stat: str, **extra: Any) -> dict[str, Any]:
    return {"Id": query_id, "MetricStat": {"Metric": {"Namespace": "sqsjobs", "MetricName": name, "Dimensions": DIMS},
                                           "Period": 3600, "Stat": stat}, **extra}


def test_duration_percentiles_and_a_failure_rate_come_back_from_the_server(cloudwatch: Any) -> None:
    now = time.time()
    data = [{"MetricName": "JobDuration", "Dimensions": DIMS, "Timestamp": now - 5, "Value": float(v),
             "Unit": "Milliseconds"} for v in range(1, 101)]
    data += [{"MetricName": "JobSucceeded", "Dimensions": DIMS, "Timestamp": now - 5, "Value": 3.0, "Unit": "Count"},
             {"MetricName": "JobFailed", "Dimensions": DIMS, "Timestamp": now - 5, "Value": 1.0, "Unit": "Count"}]
    cloudwatch.put_metric_data(Namespace="sqsjobs", MetricData=data)

    response = cloudwatch.get_metric_data(
        MetricDataQueries=[
            query("p50", "JobDuration", "p50"),
            query("p95", "JobDuration", "p95"),
            query("ok", "JobSucceeded", "Sum", ReturnData=False),
            query("failed", "JobFailed", "Sum", ReturnData=False),
            {"Id": "rate", "Expression": "100 * FILL(failed, 0) / (FILL(ok, 0) + FILL(failed, 0))", "Label": "rate"},
        ],
        StartTime=now - 600, EndTime=now + 60,
    )

    values = {r["Id"]: r["Values"] for r in response["MetricDataResults"]}
    assert values == {"p50": [50.0], "p95": [95.0], "rate": [25.0]}


def test_an_unsupported_statistic_is_a_validation_error(cloudwatch: Any) -> None:
    now = time.time()
    with pytest.raises(ClientError, match="not supported locally"):
        cloudwatch.get_metric_data(MetricDataQueries=[query("x", "JobDuration", "TM(10%:90%)")],
                                   StartTime=now - 600, EndTime=now)
