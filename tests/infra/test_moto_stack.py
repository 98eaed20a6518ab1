"""The template deploys: SAM-translated, created as a stack in moto's CloudFormation.

moto's CloudFormation does not run the SAM transform, so the test translates
with ``samtranslator`` first (offline: the translator's bundled managed-policy
map). moto skips some types (``AWS::CloudWatch::Alarm`` among them, see
DESIGN.md); every resource it does support must come up with the properties
the runtime relies on: the redrive policy, the table's key and TTL, the
worker's environment and its event source mapping.
"""

from __future__ import annotations

import copy
import io
import json
import zipfile
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws
from template_support import load_template

BUCKET = "sqsjobs-artifacts"
KEY = "bundle.zip"
STACK = "sqsjobs-test"
SENDER = "billing@example.com"
# Types moto's CloudFormation skips (with a warning); everything else must be created.
MOTO_GAPS = {"AWS::CloudWatch::Alarm", "AWS::SQS::QueuePolicy", "AWS::Scheduler::Schedule",
             "AWS::Scheduler::ScheduleGroup", "AWS::Lambda::Alias"}

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse AWS")


class _OfflinePolicies:
    """Managed policies come from the translator's bundled map; never ask IAM."""

    def load(self) -> dict[str, str]:
        return {}


def translate(template: dict[str, Any]) -> dict[str, Any]:
    from samtranslator.translator.transform import transform

    document = copy.deepcopy(template)
    # `sam deploy` uploads the build and rewrites CodeUri to S3; do the same.
    document["Globals"]["Function"]["CodeUri"] = f"s3://{BUCKET}/{KEY}"
    result: dict[str, Any] = transform(document, {}, _OfflinePolicies())
    return result


def for_moto(translated: dict[str, Any]) -> dict[str, Any]:
    """The translated template, with MaxAttempts typed String for moto.

    CloudFormation hands ``Fn::FindInMap`` a Number parameter's text ("5"),
    which keys the ReceivesPerMaxAttempts mapping; moto turns it into an int
    first and finds no row. The String type gives moto the text, as AWS does.
    """
    document = copy.deepcopy(translated)
    parameter = document["Parameters"]["MaxAttempts"]
    parameter.update(Type="String", Default=str(parameter["Default"]))
    return document


def without_aliases(template: dict[str, Any]) -> dict[str, Any]:
    """moto's CloudFormation has no AWS::Lambda::Alias: a Ref to an alias becomes a Ref to its function.

    That is what the alias stands for (the worker's `live` alias, from AutoPublishAlias);
    test_the_jobs_queue_invokes_the_workers_alias checks the translated template still targets it.
    """
    functions = {logical_id: resource["Properties"]["FunctionName"]
                 for logical_id, resource in template["Resources"].items() if resource["Type"] == "AWS::Lambda::Alias"}

    def swap(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {"Ref"} and node["Ref"] in functions:
                return functions[node["Ref"]]
            return {key: swap(value) for key, value in node.items()}
        if isinstance(node, list):
            return [swap(value) for value in node]
        return node

    swapped: dict[str, Any] = swap(template)
    return swapped


@pytest.fixture(scope="module")
def translated() -> Iterator[dict[str, Any]]:
    # Module-scoped, so before the autouse environment fixture: the translator
    # builds ARNs from the session's region.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWS_DEFAULT_REGION", "us-east-1")
        yield translate(load_template())


@pytest.fixture
def stack(translated: dict[str, Any]) -> Iterator[dict[str, Any]]:
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket=BUCKET)
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w") as bundle:
            bundle.writestr("worker.py", "def handler(event, context):\n    return {'batchItemFailures': []}\n")
        s3.put_object(Bucket=BUCKET, Key=KEY, Body=archive.getvalue())
        cfn = boto3.client("cloudformation", region_name="us-east-1")
        cfn.create_stack(
            StackName=STACK,
            TemplateBody=json.dumps(without_aliases(for_moto(translated))),
            Parameters=[{"ParameterKey": "SenderEmail", "ParameterValue": SENDER}],
            Capabilities=["CAPABILITY_IAM"],
        )
        description = cfn.describe_stacks(StackName=STACK)["Stacks"][0]
        resources = cfn.list_stack_resources(StackName=STACK)["StackResourceSummaries"]
        yield {
            "status": description["StackStatus"],
            "outputs": {o["OutputKey"]: o["OutputValue"] for o in description.get("Outputs", [])},
            "physical": {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources},
            "types": {r["LogicalResourceId"]: r["ResourceType"] for r in resources},
            "statuses": {r["LogicalResourceId"]: r["ResourceStatus"] for r in resources},
        }


def test_translation_produces_plain_cloudformation(translated: dict[str, Any]) -> None:
    types = {r["Type"] for r in translated["Resources"].values()}
    assert not any(t.startswith("AWS::Serverless::") for t in types)
    assert {"AWS::Lambda::Function", "AWS::Lambda::EventSourceMapping", "AWS::IAM::Role"} <= types


def test_stack_comes_up_with_every_supported_resource(stack: dict[str, Any], translated: dict[str, Any]) -> None:
    assert stack["status"] == "CREATE_COMPLETE"
    unconditional = {k: r["Type"] for k, r in translated["Resources"].items() if "Condition" not in r}
    skipped = {unconditional[k] for k in set(unconditional) - set(stack["physical"])}
    assert skipped <= MOTO_GAPS
    must_exist = {
        logical_id
        for logical_id, resource in translated["Resources"].items()
        if resource["Type"]
        in {
            "AWS::SQS::Queue",
            "AWS::DynamoDB::Table",
            "AWS::Lambda::Function",
            "AWS::Lambda::EventSourceMapping",
            "AWS::IAM::Role",
            "AWS::SNS::Topic",
            "AWS::Logs::LogGroup",
        }
        and "Condition" not in resource
    }
    assert len(must_exist) >= 11
    missing = must_exist - set(stack["physical"])
    assert missing == set()
    assert {stack["statuses"][name] for name in must_exist} == {"CREATE_COMPLETE"}


def test_jobs_queue_redrives_to_a_longer_lived_dlq(stack: dict[str, Any]) -> None:
    sqs = boto3.client("sqs", region_name="us-east-1")
    queue_url, dlq_url = stack["physical"]["JobsQueue"], stack["physical"]["DeadLetterQueue"]
    attrs = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=["All"])["Attributes"]
    dlq = sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["All"])["Attributes"]
    redrive = json.loads(attrs["RedrivePolicy"])
    assert redrive["deadLetterTargetArn"] == dlq["QueueArn"]
    # MaxAttempts (5) + 1, from the ReceivesPerMaxAttempts mapping: the worker dead-letters first, with a reason.
    assert int(redrive["maxReceiveCount"]) == 6
    assert int(attrs["VisibilityTimeout"]) >= 60 + 1 + 30
    assert int(dlq["MessageRetentionPeriod"]) == 1209600 > int(attrs["MessageRetentionPeriod"])
    # The MaximumMessageSize parameter: the queue and its DLQ take what the functions may send.
    assert int(attrs["MaximumMessageSize"]) == int(dlq["MaximumMessageSize"]) == 262144
    assert stack["outputs"]["JobsQueueUrl"] == queue_url
    assert stack["outputs"]["DeadLetterQueueUrl"] == dlq_url


def test_idempotency_table_has_the_models_key_and_ttl(stack: dict[str, Any], translated: dict[str, Any]) -> None:
    dynamodb = boto3.client("dynamodb", region_name="us-east-1")
    name = stack["physical"]["IdempotencyTable"]
    table = dynamodb.describe_table(TableName=name)["Table"]
    assert table["KeySchema"] == [{"AttributeName": "pk", "KeyType": "HASH"}]
    assert table["AttributeDefinitions"] == [{"AttributeName": "pk", "AttributeType": "S"}]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    # moto's CloudFormation ignores TimeToLiveSpecification and point-in-time
    # recovery, so those are read from the template CloudFormation receives.
    props = translated["Resources"]["IdempotencyTable"]["Properties"]
    assert props["TimeToLiveSpecification"] == {"AttributeName": "expires_at", "Enabled": True}
    assert props["PointInTimeRecoverySpecification"] == {"PointInTimeRecoveryEnabled": True}
    assert props["SSESpecification"] == {"SSEEnabled": True}
    assert stack["outputs"]["IdempotencyTableName"] == name


def test_worker_environment_matches_the_wire_contract(stack: dict[str, Any]) -> None:
    lam = boto3.client("lambda", region_name="us-east-1")
    config = lam.get_function_configuration(FunctionName=stack["physical"]["WorkerFunction"])
    # moto passes Number parameters through as ints; Lambda itself stores strings.
    env = {name: str(value) for name, value in config["Environment"]["Variables"].items()}
    # The wire contract (docs/architecture.md); the reference app may add its own variables.
    assert (
        env.items()
        >= {
            "SQSJOBS_QUEUE_URL": stack["physical"]["JobsQueue"],
            "SQSJOBS_DLQ_URL": stack["physical"]["DeadLetterQueue"],
            "SQSJOBS_TABLE": stack["physical"]["IdempotencyTable"],
            "SQSJOBS_MAX_ATTEMPTS": "5",
            "SQSJOBS_RECORD_TTL_SECONDS": "1814400",
            "SQSJOBS_FUNCTION_TIMEOUT": "60",
            "SQSJOBS_MAX_MESSAGE_BYTES": "262144",
            "SQSJOBS_SENDER": SENDER,
            "POWERTOOLS_SERVICE_NAME": "sqsjobs",
            "POWERTOOLS_METRICS_NAMESPACE": "sqsjobs",
        }.items()
    )
    assert (config["Handler"], config["Runtime"], config["Timeout"]) == ("worker.handler", "python3.12", 60)
    redrive = lam.get_function_configuration(FunctionName=stack["physical"]["RedriveFunction"])
    assert redrive["Environment"]["Variables"] == {
        "SQSJOBS_QUEUE_URL": stack["physical"]["JobsQueue"],
        "SQSJOBS_DLQ_URL": stack["physical"]["DeadLetterQueue"],
        "SQSJOBS_TABLE": stack["physical"]["IdempotencyTable"],  # letters whose key was cancelled stay
        "POWERTOOLS_SERVICE_NAME": "sqsjobs",
        "POWERTOOLS_METRICS_NAMESPACE": "sqsjobs",
        "SQSJOBS_RECORD_TTL_SECONDS": 1814400,
        "SQSJOBS_MAX_MESSAGE_BYTES": 262144,  # a redriven letter is re-sent within its queue's size
    }
    assert (redrive["Handler"], redrive["Timeout"]) == ("redrive.handler", 300)


def test_event_source_mapping_reports_batch_item_failures(stack: dict[str, Any]) -> None:
    lam = boto3.client("lambda", region_name="us-east-1")
    sqs = boto3.client("sqs", region_name="us-east-1")
    arns = {sqs.get_queue_attributes(QueueUrl=stack["physical"][queue], AttributeNames=["QueueArn"])[
        "Attributes"]["QueueArn"]: queue for queue in ("JobsQueue", "CriticalQueue")}
    mappings = lam.list_event_source_mappings(FunctionName=stack["physical"]["WorkerFunction"])["EventSourceMappings"]
    # One mapping per jobs queue (the critical queue has its own MaximumConcurrency).
    assert sorted(arns[m["EventSourceArn"]] for m in mappings) == ["CriticalQueue", "JobsQueue"]
    for mapping in mappings:
        assert mapping["BatchSize"] == 10
        assert mapping["FunctionResponseTypes"] == ["ReportBatchItemFailures"]
        assert "ProvisionedPollerConfig" not in mapping  # off unless ProvisionedMinimumPollers is given


def test_the_jobs_queue_invokes_the_workers_alias(translated: dict[str, Any]) -> None:
    # SnapStart only applies to published versions: the queue's mapping goes through the `live` alias,
    # and SnapStart itself is switched by the SnapStart parameter (off by default).
    resources = translated["Resources"]
    (mapping,) = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::Lambda::EventSourceMapping"
                  and r["Properties"]["EventSourceArn"] == {"Fn::GetAtt": ["JobsQueue", "Arn"]}]
    alias = resources[mapping["FunctionName"]["Ref"]]
    assert alias["Type"] == "AWS::Lambda::Alias"
    assert alias["Properties"]["Name"] == "live"
    assert alias["Properties"]["FunctionName"] == {"Ref": "WorkerFunction"}
    assert resources["WorkerFunction"]["Properties"]["SnapStart"] == {
        "Fn::If": ["UseSnapStart", {"ApplyOn": "PublishedVersions"}, {"Ref": "AWS::NoValue"}]}
    assert translated["Conditions"]["UseSnapStart"] == {"Fn::Equals": [{"Ref": "SnapStart"}, "true"]}
    assert translated["Parameters"]["SnapStart"]["Default"] == "false"
