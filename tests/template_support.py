"""Templates and a cfn-lint runner for tests/infra (on the tests path, like aws_support.py).

Bad templates are made from good ones by small, named mutations, so each test
says exactly which property breaks which rule.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Mapping
from functools import cache
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEMPLATE = ROOT / "template.yaml"
RULES_DIR = ROOT / "infra" / "sqsjobs_rules"
OUR_PREFIXES = ("E91", "W91")


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as a dict, short-form tags (!Ref, !GetAtt) expanded."""
    from samtranslator.yaml_helper import yaml_parse

    document: dict[str, Any] = yaml_parse(path.read_text())
    return document


@cache
def _rules(configure: str = "") -> Any:
    from cfnlint.core import get_rules

    configure_rules = json.loads(configure) if configure else None
    return get_rules([str(RULES_DIR)], [], [], configure_rules=configure_rules)


def lint(
    template: Mapping[str, Any],
    *,
    parameters: Mapping[str, Any] | None = None,
    configure: Mapping[str, Mapping[str, Any]] | None = None,
    ours_only: bool = True,
) -> list[tuple[str, str]]:
    """``(rule id, message)`` of every match, in-process (cfn-lint's API, our rules appended).

    ``parameters`` go the way ``sqsjobs check --parameter`` sends them.
    """
    from cfnlint.api import lint as cfn_lint

    previous = os.environ.pop("SQSJOBS_CHECK_PARAMETERS", None)
    if parameters:
        os.environ["SQSJOBS_CHECK_PARAMETERS"] = json.dumps(dict(parameters))
    try:
        matches = cfn_lint(
            json.dumps(template, indent=1),
            rules=_rules(json.dumps(configure or {}, sort_keys=True)),
            regions=["us-east-1"],
        )
    finally:
        os.environ.pop("SQSJOBS_CHECK_PARAMETERS", None)
        if previous is not None:
            os.environ["SQSJOBS_CHECK_PARAMETERS"] = previous
    found = [(m.rule.id, m.message) for m in matches]
    return [f for f in found if f[0].startswith(OUR_PREFIXES)] if ours_only else found


def ids(found: list[tuple[str, str]]) -> list[str]:
    return sorted(rule_id for rule_id, _ in found)


def get_att(logical_id: str, attribute: str) -> dict[str, Any]:
    return {"Fn::GetAtt": [logical_id, attribute]}


def dlq_alarm(queue: str = "Dlq", **overrides: Any) -> dict[str, Any]:
    props: dict[str, Any] = {
        "Namespace": "AWS/SQS",
        "MetricName": "ApproximateNumberOfMessagesVisible",
        "Dimensions": [{"Name": "QueueName", "Value": get_att(queue, "QueueName")}],
        "Statistic": "Maximum",
        "Period": 60,
        "EvaluationPeriods": 1,
        "Threshold": 0,
        "ComparisonOperator": "GreaterThanThreshold",
        "AlarmActions": [{"Ref": "Topic"}],
    }
    props.update(overrides)
    return {"Type": "AWS::CloudWatch::Alarm", "Properties": props}


def sam_template() -> dict[str, Any]:
    """A small SAM template that passes every sqsjobs rule."""
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Transform": "AWS::Serverless-2016-10-31",
        "Parameters": {
            "MaxAttempts": {"Type": "Number", "Default": 5, "AllowedValues": list(range(1, 11))},
            "WorkerTimeout": {"Type": "Number", "Default": 60},
        },
        # maxReceiveCount = MaxAttempts + 1, as template.yaml's ReceivesPerMaxAttempts.
        "Mappings": {"Receives": {str(n): {"Count": n + 1} for n in range(1, 11)}},
        "Globals": {"Function": {"Runtime": "python3.12", "Timeout": {"Ref": "WorkerTimeout"}}},
        "Resources": {
            "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {"MessageRetentionPeriod": 1209600}},
            "Jobs": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "VisibilityTimeout": 360,
                    "RedrivePolicy": {
                        "deadLetterTargetArn": get_att("Dlq", "Arn"),
                        "maxReceiveCount": {"Fn::FindInMap": ["Receives", {"Ref": "MaxAttempts"}, "Count"]},
                    },
                },
            },
            "Topic": {"Type": "AWS::SNS::Topic"},
            "DlqAlarm": dlq_alarm(),
            "Worker": {
                "Type": "AWS::Serverless::Function",
                "Properties": {
                    "CodeUri": "handlers/",
                    "Handler": "worker.handler",
                    "Environment": {"Variables": {"SQSJOBS_MAX_ATTEMPTS": {"Ref": "MaxAttempts"}}},
                    "Events": {
                        "Jobs": {
                            "Type": "SQS",
                            "Properties": {
                                "Queue": get_att("Jobs", "Arn"),
                                "BatchSize": 10,
                                "MaximumBatchingWindowInSeconds": 1,
                                "FunctionResponseTypes": ["ReportBatchItemFailures"],
                            },
                        }
                    },
                },
            },
        },
    }


def cfn_template() -> dict[str, Any]:
    """The same wiring in plain CloudFormation (no transform), alarm in the Metrics form."""
    return {
        "AWSTemplateFormatVersion": "2010-09-09",
        "Resources": {
            "Dlq": {"Type": "AWS::SQS::Queue", "Properties": {"MessageRetentionPeriod": 1209600}},
            "Jobs": {
                "Type": "AWS::SQS::Queue",
                "Properties": {
                    "VisibilityTimeout": 600,
                    "MessageRetentionPeriod": 86400,
                    "RedrivePolicy": {"deadLetterTargetArn": get_att("Dlq", "Arn"), "maxReceiveCount": 7},
                },
            },
            "Topic": {"Type": "AWS::SNS::Topic"},
            "DlqAlarm": {
                "Type": "AWS::CloudWatch::Alarm",
                "Properties": {
                    "Metrics": [
                        {
                            "Id": "visible",
                            "MetricStat": {
                                "Metric": {
                                    "Namespace": "AWS/SQS",
                                    "MetricName": "ApproximateNumberOfMessagesVisible",
                                    "Dimensions": [{"Name": "QueueName", "Value": get_att("Dlq", "QueueName")}],
                                },
                                "Period": 60,
                                "Stat": "Maximum",
                            },
                        }
                    ],
                    "EvaluationPeriods": 1,
                    "Threshold": 1,
                    "ComparisonOperator": "GreaterThanOrEqualToThreshold",
                    "AlarmActions": [{"Ref": "Topic"}],
                },
            },
            "Role": {
                "Type": "AWS::IAM::Role",
                "Properties": {
                    "AssumeRolePolicyDocument": {
                        "Version": "2012-10-17",
                        "Statement": [
                            {
                                "Effect": "Allow",
                                "Principal": {"Service": "lambda.amazonaws.com"},
                                "Action": "sts:AssumeRole",
                            }
                        ],
                    }
                },
            },
            "Worker": {
                "Type": "AWS::Lambda::Function",
                "Properties": {
                    "Runtime": "python3.12",
                    "Handler": "index.handler",
                    "Role": get_att("Role", "Arn"),
                    "Timeout": 90,
                    "Code": {"ZipFile": "def handler(event, context):\n    return {}\n"},
                    "Environment": {"Variables": {"SQSJOBS_MAX_ATTEMPTS": "6"}},
                },
            },
            "WorkerJobs": {
                "Type": "AWS::Lambda::EventSourceMapping",
                "Properties": {
                    "EventSourceArn": get_att("Jobs", "Arn"),
                    "FunctionName": {"Ref": "Worker"},
                    "BatchSize": 10,
                    "MaximumBatchingWindowInSeconds": 5,
                    "FunctionResponseTypes": ["ReportBatchItemFailures"],
                },
            },
        },
    }


def mutate(template: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A copy of ``template`` with ``path`` ("Resources/Jobs/Properties/X") set, or removed if value is DELETE."""
    result = copy.deepcopy(template)
    *parents, last = path.split("/")
    node: Any = result
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    if value is DELETE:
        del node[last]
    else:
        node[last] = value
    return result


DELETE = object()


def policy_statements(policy: dict[str, Any]) -> list[dict[str, Any]]:
    """A policy document's statements, a conditional one (``!If [C, statement, NoValue]``) as its statement."""
    return [s["Fn::If"][1] if "Fn::If" in s else s for s in policy["Statement"]]
