"""Template reading, intrinsics and schedules, without a server."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from sqsjobs.local.deploy import _creation_order
from sqsjobs.local.errors import TemplateError
from sqsjobs.local.intrinsics import NO_VALUE, Resolver, references
from sqsjobs.local.schedules import ScheduleError, Timing
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


def test_cron_and_rate_schedules() -> None:
    weekday_morning = Timing("cron(15 9 ? * MON-FRI *)")

    assert weekday_morning.matches(datetime(2026, 11, 30, 9, 15, tzinfo=UTC))  # a Monday
    assert not weekday_morning.matches(datetime(2026, 11, 29, 9, 15, tzinfo=UTC))  # a Sunday
    assert Timing("cron(0/15 * * * ? *)").matches(datetime(2026, 1, 1, 0, 45, tzinfo=UTC))
    assert Timing("rate(1 hour)").interval_s == 3600
    with pytest.raises(ScheduleError):
        Timing("cron(0 0 L * ? *)")
