"""The template's alarms and dashboard read exactly the metrics the code emits.

"What the code emits" is not a copied list: the test runs the runtime's own
EMF emitter (``sqsjobs._metrics.BatchMetrics``) and collects the
``(namespace, metric, dimension names)`` triples from its output. Every
framework metric an alarm or a dashboard widget reads must be one of them,
and the failure-rate alarm must read both of ``FAILURE_RATE_INPUTS`` over
``{service}``. AWS-namespace metrics are checked against what SQS and Lambda
publish with the dimension the template uses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from template_support import load_template

from sqsjobs import _metrics as metrics

# Placeholders for the parameters the template's metrics are namespaced with.
NAMESPACE = "<MetricsNamespace>"
SERVICE = "<ServiceName>"

# What SQS and Lambda publish, with the dimension the template uses for them
# (from the services' metric documentation; a typo in the template fails here).
_SQS = (
    "ApproximateNumberOfMessagesVisible",
    "ApproximateNumberOfMessagesNotVisible",
    "ApproximateNumberOfMessagesDelayed",
    "ApproximateAgeOfOldestMessage",
    "NumberOfMessagesSent",
    "NumberOfMessagesReceived",
    "NumberOfMessagesDeleted",
    "NumberOfEmptyReceives",
    "SentMessageSize",
)
_LAMBDA = (
    "Invocations",
    "Errors",
    "Throttles",
    "Duration",
    "ConcurrentExecutions",
    "IteratorAge",
    "DeadLetterErrors",
    "DestinationDeliveryFailures",
)
AWS_METRICS = {("AWS/SQS", name, frozenset({"QueueName"})) for name in _SQS} | {
    ("AWS/Lambda", name, frozenset({"FunctionName"})) for name in _LAMBDA
}
_SEARCH = re.compile(r"SEARCH\('\{([^}]*)\}\s+MetricName=\"(\w+)\"([^']*)'")

Triple = tuple[str, str, frozenset[str]]


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


@pytest.fixture(scope="module")
def emitted() -> set[Triple]:
    """Run the code's emitter for one job with every metric and read its EMF lines back."""
    lines: list[str] = []
    batch = metrics.BatchMetrics(namespace=NAMESPACE, service=SERVICE, emit=lines.append)
    for name in metrics.COUNTS:
        batch.count("invoice-email", name)
    batch.duration("invoice-email", 12.0)
    # A deferral names its limiter (docs/flow-control.md), as the consumer counts it.
    batch.count("invoice-email", metrics.DEFERRED, dimensions={metrics.DIMENSION_LIMITER: "ses"})
    # What the batch made AWS bill, as the worker shares it out (worker/_batch_metrics.py), and the batch's line.
    for name in metrics.USAGE:
        batch.usage("invoice-email", name, 1.5)
    batch.flush(batch=True)
    found: set[Triple] = set()
    for line in lines:
        for directive in json.loads(line)["_aws"]["CloudWatchMetrics"]:
            for dimensions in directive["Dimensions"]:
                for metric in directive["Metrics"]:
                    found.add((directive["Namespace"], metric["Name"], frozenset(dimensions)))
    assert {name for _, name, _ in found} == set(metrics.ALL_METRICS)
    return found


def _value(node: Any) -> str:
    """A namespace or dimension value: parameters become placeholders, other refs a marker."""
    if node == {"Ref": "MetricsNamespace"}:
        return NAMESPACE
    if node == {"Ref": "ServiceName"}:
        return SERVICE
    return node if isinstance(node, str) else "<resource>"


def _alarm_metrics(template: dict[str, Any]) -> Iterator[tuple[str, Triple, dict[str, str]]]:
    """(alarm, (namespace, metric, dimension names), dimension values) for every alarm input."""
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::CloudWatch::Alarm":
            continue
        props = resource["Properties"]
        sources = [m["MetricStat"]["Metric"] for m in props.get("Metrics", []) if "MetricStat" in m] or [props]
        for metric in sources:
            dims = {d["Name"]: _value(d["Value"]) for d in metric.get("Dimensions", [])}
            yield logical_id, (_value(metric["Namespace"]), metric["MetricName"], frozenset(dims)), dims


def _dashboard_metrics(template: dict[str, Any]) -> Iterator[tuple[str, Triple, dict[str, str]]]:
    body_template = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    body = json.loads(
        body_template.replace("${MetricsNamespace}", NAMESPACE)
        .replace("${ServiceName}", SERVICE)
        .replace("${", "<")  # other substitutions (queue names, region) become opaque markers
    )
    for widget in body["widgets"]:
        title = widget["properties"]["title"]
        previous: list[Any] = []
        for row in widget["properties"]["metrics"]:
            if isinstance(row[0], dict):
                search = _SEARCH.search(row[0]["expression"])
                if search:
                    namespace, *dim_names = [p.strip() for p in search.group(1).split(",")]
                    values = dict(re.findall(r'(\w+)="([^"]*)"', search.group(3)))
                    yield title, (namespace, search.group(2), frozenset(dim_names)), values
                continue
            parts = [p for p in row if not isinstance(p, dict)]
            # CloudWatch's "." shorthand repeats the previous row's value.
            parts = [previous[i] if p == "." and i < len(previous) else p for i, p in enumerate(parts)]
            previous = parts
            namespace, name, *pairs = parts
            dims = dict(zip(pairs[::2], pairs[1::2], strict=True))
            yield title, (namespace, name, frozenset(dims)), dims


def _all_metrics(template: dict[str, Any]) -> list[tuple[str, Triple, dict[str, str]]]:
    return [*_alarm_metrics(template), *_dashboard_metrics(template)]


def test_every_alarm_and_widget_metric_is_emitted_by_the_code_or_by_aws(
    template: dict[str, Any], emitted: set[Triple]
) -> None:
    used = _all_metrics(template)
    assert len(used) >= 15  # the parser found the widgets and alarms, not an empty list
    unknown = [(where, triple) for where, triple, _ in used if triple not in emitted | AWS_METRICS]
    assert unknown == []


def test_framework_metrics_filter_on_the_configured_service(template: dict[str, Any]) -> None:
    for where, (namespace, _name, _dims), values in _all_metrics(template):
        if namespace == NAMESPACE:
            assert values.get(metrics.DIMENSION_SERVICE) == SERVICE, where


def test_failure_rate_alarm_reads_both_inputs_over_service_and_guards_division(template: dict[str, Any]) -> None:
    alarm = template["Resources"]["FailureRateAlarm"]["Properties"]
    inputs = {triple[1]: triple for where, triple, _ in _alarm_metrics(template) if where == "FailureRateAlarm"}
    assert set(inputs) == set(metrics.FAILURE_RATE_INPUTS)
    assert all(dims == frozenset({metrics.DIMENSION_SERVICE}) for _, _, dims in inputs.values())
    returned = [m for m in alarm["Metrics"] if m.get("ReturnData", True)]
    assert len(returned) == 1 and returned[0]["Expression"].startswith("IF(runs > 0,")
    assert (alarm["Threshold"], alarm["ComparisonOperator"]) == (5, "GreaterThanThreshold")
    periods = {m["MetricStat"]["Period"] for m in alarm["Metrics"] if "MetricStat" in m}
    assert periods == {600}  # "over 10 minutes"


def test_dashboard_shows_duration_percentiles_and_failures_per_job(template: dict[str, Any]) -> None:
    per_job = {
        (triple[1], title)
        for title, triple, _ in _dashboard_metrics(template)
        if triple[2] == frozenset({metrics.DIMENSION_SERVICE, metrics.DIMENSION_JOB})
    }
    names = {name for name, _ in per_job}
    assert {metrics.DURATION, metrics.FAILED} <= names
    body = template["Resources"]["Dashboard"]["Properties"]["DashboardBody"]["Fn::Sub"]
    assert "'p50'" in body and "'p99'" in body


def test_functions_get_the_namespace_and_service_the_alarms_read(template: dict[str, Any]) -> None:
    env = template["Globals"]["Function"]["Environment"]["Variables"]
    assert env["POWERTOOLS_METRICS_NAMESPACE"] == {"Ref": "MetricsNamespace"}
    assert env["POWERTOOLS_SERVICE_NAME"] == {"Ref": "ServiceName"}
    assert template["Parameters"]["MetricsNamespace"]["Default"] == metrics.DEFAULT_NAMESPACE


def test_one_parameter_feeds_max_receive_count_and_max_attempts(template: dict[str, Any]) -> None:
    resources = template["Resources"]
    redrive = resources["JobsQueue"]["Properties"]["RedrivePolicy"]
    worker_env = resources["WorkerFunction"]["Properties"]["Environment"]["Variables"]
    # maxReceiveCount is MaxAttempts + 1, through the mapping (tests/infra/test_template_delivery.py).
    assert redrive["maxReceiveCount"] == {
        "Fn::FindInMap": ["ReceivesPerMaxAttempts", {"Ref": "MaxAttempts"}, "MaxReceiveCount"]
    }
    assert worker_env["SQSJOBS_MAX_ATTEMPTS"] == {"Ref": "MaxAttempts"}
    assert worker_env["SQSJOBS_FUNCTION_TIMEOUT"] == resources["WorkerFunction"]["Properties"]["Timeout"]
    assert template["Parameters"]["MaxAttempts"]["Default"] == 5
