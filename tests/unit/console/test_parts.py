"""The console's parts on their own: alarm limits, charts, record views, the CLI, its isolation."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from sqsjobs.cli import build_app
from sqsjobs.console.charts import line_chart
from sqsjobs.console.thresholds import queue_limit

ROOT = Path(__file__).resolve().parents[3]


def math_alarm(expression: str, comparison: str = "GreaterThanThreshold", threshold: float = 5.0) -> dict[str, Any]:
    return {"AlarmName": "age", "StateValue": "OK", "Threshold": threshold, "ComparisonOperator": comparison,
            "Metrics": [{"Id": "age", "ReturnData": False, "MetricStat": {"Period": 60, "Stat": "Maximum", "Metric": {
                "Namespace": "AWS/SQS", "MetricName": "ApproximateAgeOfOldestMessage",
                "Dimensions": [{"Name": "QueueName", "Value": "jobs"}]}}},
                        {"Id": "e", "Expression": expression, "ReturnData": True}]}


@pytest.mark.parametrize(("expression", "comparison", "threshold"), [
    ("age / 60", ">", 300.0), ("age * 2 + 10", ">", -2.5), ("100 - age", "<", 95.0)])
def test_a_metric_math_alarm_is_solved_for_its_queue_metric(expression: str, comparison: str,
                                                             threshold: float) -> None:
    limit = queue_limit(math_alarm(expression))

    assert limit is not None and (limit.comparison, limit.threshold) == (comparison, threshold)


@pytest.mark.parametrize("alarm", [
    math_alarm("age * age"),  # not a straight line
    math_alarm("age / 60", comparison="LessThanLowerOrGreaterThanUpperThreshold"),
    {"AlarmName": "errors", "Namespace": "AWS/Lambda", "MetricName": "Errors", "Threshold": 0.0,
     "ComparisonOperator": "GreaterThanThreshold", "Dimensions": [{"Name": "FunctionName", "Value": "w"}]},
])
def test_alarms_that_are_not_a_limit_on_one_queue_metric_are_left_out(alarm: dict[str, Any]) -> None:
    assert queue_limit(alarm) is None


def test_a_chart_fills_empty_buckets_and_scales_to_a_round_number() -> None:
    chart = line_chart("runs", [(120.0, 7.0)], start=0.0, end=300.0, period=60)

    assert len(chart.line.split()) == 5
    assert [label for _, label in chart.y_ticks] == ["0", "5", "10"]
    assert chart.latest == "0" and not chart.empty


def test_the_cli_refuses_a_public_host_without_a_token_in_one_line() -> None:
    result = CliRunner().invoke(build_app(), ["console", "--queue", "jobs", "--host", "0.0.0.0"], env={
        "SQSJOBS_CONSOLE_TOKEN": ""})

    assert result.exit_code == 2
    assert result.output.startswith("error: --host 0.0.0.0 is reachable from other machines: pass --token")
    assert "Traceback" not in result.output


@pytest.mark.moto
def test_the_cli_says_when_the_port_is_taken() -> None:
    from moto import mock_aws

    with socket.socket() as holder, mock_aws():
        import boto3

        boto3.client("sqs", region_name="us-east-1").create_queue(QueueName="jobs")
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        result = CliRunner().invoke(build_app(), ["console", "--queue", "jobs", "--port", str(port),
                                                  "--region", "us-east-1"])

    assert result.exit_code == 2
    assert f"port {port} on 127.0.0.1 is in use" in result.output
    assert "Traceback" not in result.output


def test_the_runtime_never_imports_the_console() -> None:
    code = ("import sys; sys.path.insert(0, 'handlers'); import worker, redrive, scheduler; "
            "import json; print(json.dumps(sorted(m for m in sys.modules if m.startswith(('sqsjobs.console', "
            "'starlette', 'uvicorn', 'jinja2')))))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True, env={"AWS_DEFAULT_REGION": "us-east-1", "PATH": "/usr/bin:/bin"})

    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_the_lambda_bundle_leaves_the_console_out() -> None:
    from sqsjobs.scaffold.bundle import NOT_RUNTIME

    assert "sqsjobs/console" in NOT_RUNTIME
