"""Template reading, intrinsics and schedules, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from sqsjobs.local.deploy import _creation_order, _parameter_values
from sqsjobs.local.errors import TemplateError
from sqsjobs.local.intrinsics import NO_VALUE, Resolver, references
from sqsjobs.local.model import Schedule
from sqsjobs.local.schedules import Scheduler
from sqsjobs.local.template import Template

FIXTURE = Path(__file__).resolve().parents[2] / "integration" / "local" / "fixture" / "template.yaml"


def test_the_sam_transform_runs_and_code_stays_local() -> None:
    template = Template.load(FIXTURE)

    assert template.resources["WorkerJobs"]["Type"] == "AWS::Lambda::EventSourceMapping"
    assert template.resources["NightlyEvery"]["Type"] == "AWS::Events::Rule"
    assert template.code_dirs["Worker"] == FIXTURE.parent


def test_a_template_without_resources_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("Description: nothing\n")

    with pytest.raises(TemplateError, match="no Resources"):
        Template.load(path)


def test_intrinsics_resolve_to_local_values() -> None:
    r = Resolver(
        parameters={"Env": "dev"}, pseudo={"AWS::Region": "us-east-1"},
        refs={"Queue": "http://q"}, attributes={("Queue", "Arn"): "arn:q"},
        conditions={"IsDev": {"Fn::Equals": [{"Ref": "Env"}, "dev"]}},
    )

    assert r.resolve({"Fn::Sub": "${Queue.Arn}/${Env}/${!Literal}"}) == "arn:q/dev/${Literal}"
    assert r.resolve({"Fn::Join": ["-", [{"Ref": "Env"}, "x"]]}) == "dev-x"
    assert r.resolve({"Fn::If": ["IsDev", {"Ref": "Queue"}, "no"]}) == "http://q"
    assert r.resolve([{"Ref": "AWS::NoValue"}, 1]) == [1]
    assert r.ref("AWS::NoValue") is NO_VALUE
    with pytest.raises(TemplateError, match="Fn::Cidr"):
        r.resolve({"Fn::Cidr": ["10.0.0.0/16", 2, 8]})


@pytest.mark.parametrize("function", ["Fn::Join", "Fn::Split"])
def test_a_delimiter_is_a_literal_string_as_cloudformation_requires(function: str) -> None:
    # CloudFormation refuses a function as Fn::Join's or Fn::Split's delimiter; cfn-lint does not see one inside
    # a SAM function's Policies, so the local cloud refuses it rather than joining with the dict's text.
    r = Resolver(parameters={"Names": "a,b"}, pseudo={"AWS::Region": "us-east-1"})
    text = ["a", "b"] if function == "Fn::Join" else "a,b"
    assert r.resolve({function: [",", text]}) in ("a,b", ["a", "b"])
    with pytest.raises(TemplateError, match=f"{function}'s delimiter must be a literal string"):
        r.resolve({function: [{"Fn::Sub": ",${AWS::Region}"}, text]})


def test_find_in_map_keyed_by_a_number_parameter_like_cloudformation() -> None:
    # template.yaml's maxReceiveCount: !FindInMap [ReceivesPerMaxAttempts, !Ref MaxAttempts, MaxReceiveCount].
    # A YAML default is an int and an override a string; CloudFormation looks both up by their text.
    mappings = {"ReceivesPerMaxAttempts": {"5": {"MaxReceiveCount": 6}, "3": {"MaxReceiveCount": 4}}}
    find = {"Fn::FindInMap": ["ReceivesPerMaxAttempts", {"Ref": "MaxAttempts"}, "MaxReceiveCount"]}

    assert Resolver(parameters={"MaxAttempts": 5}, mappings=mappings).resolve(find) == 6
    assert Resolver(parameters={"MaxAttempts": "3"}, mappings=mappings).resolve(find) == 4
    with pytest.raises(TemplateError, match="ReceivesPerMaxAttempts/7/MaxReceiveCount is not in Mappings"):
        Resolver(parameters={"MaxAttempts": 7}, mappings=mappings).resolve(find)


def test_parameter_values_outside_allowed_values_are_refused_like_cloudformation() -> None:
    template = Template(
        path=FIXTURE, resources={}, conditions={}, mappings={}, outputs={}, code_dirs={},
        parameters={"MaxAttempts": {"Type": "Number", "Default": 5, "AllowedValues": [1, 3, 5]}},
    )

    assert _parameter_values(template, {})["MaxAttempts"] == 5
    assert _parameter_values(template, {"MaxAttempts": "3"})["MaxAttempts"] == "3"
    with pytest.raises(TemplateError, match=r"MaxAttempts=7 is not one of its AllowedValues \(1, 3, 5\)"):
        _parameter_values(template, {"MaxAttempts": "7"})


def test_resources_are_created_after_what_they_refer_to() -> None:
    resources = {
        "Alarm": {"Properties": {"Dimensions": [{"Value": {"Fn::GetAtt": ["Dlq", "QueueName"]}}]}},
        "Queue": {"Properties": {"RedrivePolicy": {"deadLetterTargetArn": {"Fn::GetAtt": "Dlq.Arn"}}}},
        "Dlq": {"Properties": {}},
    }

    order = _creation_order(resources)

    assert order.index("Dlq") < order.index("Queue")
    assert order.index("Dlq") < order.index("Alarm")
    assert references({"Fn::Sub": ["${A}-${B.Arn}", {"C": {"Ref": "D"}}]}) == {"A", "B", "D"}


def test_the_local_scheduler_reads_the_whole_aws_dialect_and_reports_what_aws_would_refuse() -> None:
    reports: list[tuple[str, str]] = []
    schedules = [Schedule(logical_id=n, name=n, expression=e, function="F", timezone=tz)
                 for n, e, tz in (("last", "cron(0 0 L * ? *)", "UTC"),
                                  ("third-fri", "cron(0 9 ? * 6#3 *)", "Europe/Paris"),
                                  ("both", "cron(0 9 * * MON *)", "UTC"),
                                  ("zone", "rate(1 hour)", "Mars/Olympus"))]

    scheduler = Scheduler(schedules, fire=lambda schedule, at: None, report=lambda *event: reports.append(event))

    assert [s.name for s, _ in scheduler._timed] == ["last", "third-fri"]  # L and # fire on time now
    assert [level for level, _ in reports] == ["warn", "warn"]
    assert reports[0][1].startswith("schedule 'cron(0 9 * * MON *)': day-of-month and day-of-week cannot both be given")
    assert reports[1][1] == ("time zone 'Mars/Olympus' is not an IANA name such as 'Europe/Paris'; "
                             "fire it with `sqsjobs local fire zone`")


def test_iam_arns_of_the_local_cloud_are_global_as_on_aws() -> None:
    from types import SimpleNamespace

    from sqsjobs.local.intrinsics import Resolver
    from sqsjobs.local.model import Deployment
    from sqsjobs.local.resources import ResourceCreator

    resolver = Resolver()
    creator = ResourceCreator(None, SimpleNamespace(region="eu-west-1"), resolver,  # type: ignore[arg-type]
                              Deployment(stack_name="local"))
    creator.create("SchedulerRole", {"Type": "AWS::IAM::Role", "Properties": {}})
    creator.create("Publish", {"Type": "AWS::IAM::ManagedPolicy", "Properties": {}})

    role = resolver.resolve({"Fn::GetAtt": ["SchedulerRole", "Arn"]})
    assert role == "arn:aws:iam::123456789012:role/local-SchedulerRole"
    assert resolver.resolve({"Fn::GetAtt": ["Publish", "Arn"]}) == "arn:aws:iam::123456789012:policy/local-Publish"
