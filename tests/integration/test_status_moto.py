"""`sqsjobs status` against moto: depths, DLQ groups, alarms, JSON, and the peek leaves no trace."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from moto import mock_aws
from typer.testing import CliRunner

from sqsjobs import StatusError
from sqsjobs.cli import build_app
from sqsjobs.ops._status import collect_status

REGION = "us-east-1"
PAGE = "arn:aws:sns:us-east-1:123456789012:jobs-page"


@pytest.fixture
def aws() -> Any:
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION), boto3.client("cloudwatch", region_name=REGION)


def make_queues(sqs: Any) -> tuple[str, str]:
    dlq = sqs.create_queue(QueueName="jobs-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
    src = sqs.create_queue(QueueName="jobs", Attributes={"RedrivePolicy": policy})["QueueUrl"]
    return src, dlq


def dead_letter(sqs: Any, dlq: str, job: str, reason: str, error_type: str, message: str = "boom") -> None:
    attrs = {
        "sqsjobs.job": job, "sqsjobs.reason": reason, "sqsjobs.error_type": error_type,
        "sqsjobs.error_message": message,
    }
    sqs.send_message(
        QueueUrl=dlq,
        MessageBody=json.dumps({"v": 1, "job": job, "args": {}}),
        MessageAttributes={k: {"DataType": "String", "StringValue": v} for k, v in attrs.items()}
        | {"sqsjobs.attempts": {"DataType": "Number", "StringValue": "3"}},
    )


def seed(sqs: Any, cw: Any) -> tuple[str, str]:
    src, dlq = make_queues(sqs)
    for i in range(4):
        sqs.send_message(QueueUrl=src, MessageBody=json.dumps({"v": 1, "job": "invoice-email", "args": {"i": i}}))
    dead_letter(sqs, dlq, "invoice-email", "exhausted", "TimeoutError")
    dead_letter(sqs, dlq, "invoice-email", "exhausted", "TimeoutError")
    dead_letter(sqs, dlq, "sync-account", "permanent", "KeyError", "'account 7'")
    cw.put_metric_alarm(
        AlarmName="jobs-dlq-not-empty", Namespace="AWS/SQS", MetricName="ApproximateNumberOfMessagesVisible",
        Dimensions=[{"Name": "QueueName", "Value": "jobs-dlq"}], Statistic="Maximum", Period=60,
        EvaluationPeriods=1, Threshold=0, ComparisonOperator="GreaterThanThreshold", AlarmActions=[PAGE],
    )
    cw.put_metric_alarm(  # names a function, not a queue: found through the shared topic
        AlarmName="jobs-worker-errors", Namespace="AWS/Lambda", MetricName="Errors",
        Dimensions=[{"Name": "FunctionName", "Value": "jobs-worker"}], Statistic="Sum", Period=300,
        EvaluationPeriods=1, Threshold=0, ComparisonOperator="GreaterThanThreshold", AlarmActions=[PAGE],
    )
    cw.put_metric_alarm(
        AlarmName="jobs-failure-rate", Namespace="sqsjobs", MetricName="JobFailed",
        Dimensions=[{"Name": "service", "Value": "demo"}], Statistic="Sum", Period=60,
        EvaluationPeriods=1, Threshold=5, ComparisonOperator="GreaterThanThreshold",
    )
    cw.put_metric_alarm(
        AlarmName="someone-elses-alarm", Namespace="AWS/EC2", MetricName="CPUUtilization",
        Statistic="Average", Period=60, EvaluationPeriods=1, Threshold=90,
        ComparisonOperator="GreaterThanThreshold", AlarmActions=["arn:aws:sns:us-east-1:123456789012:other-team"],
    )
    cw.set_alarm_state(AlarmName="jobs-dlq-not-empty", StateValue="ALARM", StateReason="3 > 0")
    return src, dlq


def test_report_counts_groups_and_alarms(aws: Any) -> None:
    sqs, cw = aws
    src, dlq = seed(sqs, cw)
    sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=1, VisibilityTimeout=300)  # one in flight

    report = collect_status(sqs_client=sqs, cloudwatch_client=cw, queue="jobs")

    assert report.queue is not None and report.dlq is not None
    assert (report.queue.visible, report.queue.in_flight) == (3, 1)
    assert report.queue.oldest_age_source == "unknown"  # moto has no CloudWatch SQS metrics; never peeked
    assert report.dlq.url == dlq and report.dlq.visible == 3
    assert report.dlq.oldest_age_source == "peek"
    groups = [(g.job, g.reason, g.error_type, g.count) for g in report.dlq_groups]
    assert groups == [
        ("invoice-email", "exhausted", "TimeoutError", 2),
        ("sync-account", "permanent", "KeyError", 1),
    ]
    states = {a.name: a.state for a in report.alarms}
    assert set(states) == {"jobs-dlq-not-empty", "jobs-failure-rate", "jobs-worker-errors"}  # not the EC2 one
    assert states["jobs-dlq-not-empty"] == "ALARM"
    assert {f.error_message for f in report.recent_failures} == {"boom", "'account 7'"}
    assert any("unknown" in n for n in report.notes)


def test_peek_leaves_the_dlq_visible_and_the_jobs_queue_untouched(aws: Any) -> None:
    sqs, cw = aws
    src, dlq = seed(sqs, cw)
    collect_status(sqs_client=sqs, cloudwatch_client=cw, queue=src, dlq=dlq)
    attrs = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["All"])["Attributes"]
    assert (attrs["ApproximateNumberOfMessages"], attrs["ApproximateNumberOfMessagesNotVisible"]) == ("3", "0")
    # The jobs queue was never received from: no receive count was spent.
    msgs = sqs.receive_message(QueueUrl=src, MaxNumberOfMessages=10, AttributeNames=["ApproximateReceiveCount"])
    assert {m["Attributes"]["ApproximateReceiveCount"] for m in msgs["Messages"]} == {"1"}


def test_sample_limits_the_peek_and_says_so(aws: Any) -> None:
    sqs, cw = aws
    _, dlq = seed(sqs, cw)
    report = collect_status(sqs_client=sqs, cloudwatch_client=cw, dlq=dlq, sample=2)
    assert report.dlq_sampled == 2
    assert any("sample" in n for n in report.notes)


def test_alarm_prefix_selects_by_name(aws: Any) -> None:
    sqs, cw = aws
    _, dlq = seed(sqs, cw)
    report = collect_status(sqs_client=sqs, cloudwatch_client=cw, dlq=dlq, alarm_prefix="someone")
    assert [a.name for a in report.alarms] == ["someone-elses-alarm"]


def test_empty_queues_have_age_zero(aws: Any) -> None:
    sqs, cw = aws
    make_queues(sqs)
    report = collect_status(sqs_client=sqs, cloudwatch_client=cw, queue="jobs")
    assert report.queue is not None and report.dlq is not None
    assert (report.queue.oldest_age_seconds, report.queue.oldest_age_source) == (0.0, "empty")
    assert report.dlq_groups == ()


def test_no_queue_is_a_clear_error(aws: Any) -> None:
    sqs, _ = aws
    with pytest.raises(StatusError, match="SQSJOBS_QUEUE_URL"):
        collect_status(sqs_client=sqs)


def test_cli_json_is_machine_readable(aws: Any) -> None:
    sqs, cw = aws
    seed(sqs, cw)
    result = CliRunner().invoke(build_app(), ["status", "--queue", "jobs", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["queue"]["depth"] == 4
    assert data["dlq"]["depth"] == 3
    assert data["dlq_groups"][0] == {
        "job": "invoice-email", "reason": "exhausted", "error_type": "TimeoutError", "count": 2,
        "oldest_age_seconds": data["dlq_groups"][0]["oldest_age_seconds"],
        "verified": False,  # no --table: the letters' own claims
    }
    assert data["dlq_verified"] is False
    assert data["alarms_firing"] == ["jobs-dlq-not-empty"]


def test_cli_tables_name_what_matters(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    sqs, cw = aws
    src, _ = seed(sqs, cw)
    monkeypatch.setenv("SQSJOBS_QUEUE_URL", src)
    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(build_app(), ["status"])
    assert result.exit_code == 0, result.output
    for text in ("jobs-dlq", "invoice-email", "TimeoutError", "jobs-dlq-not-empty", "ALARM", "recent failures"):
        assert text in result.output


def test_cli_without_a_queue_exits_2(aws: Any) -> None:
    result = CliRunner().invoke(build_app(), ["status"])
    assert result.exit_code == 2


def test_oldest_age_comes_from_cloudwatch_and_a_stale_datapoint_does_not_hide_the_dlq(aws: Any) -> None:
    sqs, cw = aws
    _, dlq = seed(sqs, cw)
    now = datetime.now(tz=UTC)
    for queue, age in (("jobs", 120.0), ("jobs-dlq", 0.0)):
        cw.put_metric_data(Namespace="AWS/SQS", MetricData=[{
            "MetricName": "ApproximateAgeOfOldestMessage", "Dimensions": [{"Name": "QueueName", "Value": queue}],
            "Timestamp": now - timedelta(seconds=30), "Value": age, "Unit": "Seconds",
        }])
    sent_ms = int(sqs.receive_message(QueueUrl=dlq, AttributeNames=["SentTimestamp"], VisibilityTimeout=0)[
        "Messages"][0]["Attributes"]["SentTimestamp"])

    report = collect_status(sqs_client=sqs, cloudwatch_client=cw, queue="jobs", clock=lambda: sent_ms / 1000 + 600)

    assert report.queue is not None and report.dlq is not None
    assert (report.queue.oldest_age_seconds, report.queue.oldest_age_source) == (120.0, "cloudwatch")
    assert report.dlq.oldest_age_source == "peek"
    assert report.dlq.oldest_age_seconds == pytest.approx(600, abs=5)


def test_without_cloudwatch_rights_the_queues_still_show(aws: Any) -> None:
    from botocore.stub import Stubber

    sqs, cw = aws
    seed(sqs, cw)
    with Stubber(cw) as stub:  # every CloudWatch call is refused
        stub.add_client_error("get_metric_statistics", "AccessDenied", "not authorized")
        report = collect_status(sqs_client=sqs, cloudwatch_client=cw, queue="jobs")
    assert report.queue is not None and report.queue.visible == 4
    assert report.alarms == ()
    assert sum("could not read" in n and "AccessDenied" in n for n in report.notes) == 1


def test_cli_sqs_errors_exit_1(aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from botocore.client import BaseClient
    from botocore.exceptions import ClientError

    sqs, cw = aws
    seed(sqs, cw)
    real = BaseClient._make_api_call

    def call(self: Any, name: str, params: Any) -> Any:
        if name == "GetQueueAttributes":
            raise ClientError({"Error": {"Code": "AccessDenied", "Message": "no sqs:GetQueueAttributes"}}, name)
        return real(self, name, params)

    monkeypatch.setattr(BaseClient, "_make_api_call", call)
    result = CliRunner().invoke(build_app(), ["status", "--queue", "jobs"])
    assert result.exit_code == 1
    assert "AccessDenied" in result.output


def put_count(cw: Any, name: str, job: str | None, value: float, at: datetime) -> None:
    dims = [{"Name": "service", "Value": "billing"}] + ([{"Name": "Job", "Value": job}] if job else [])
    cw.put_metric_data(Namespace="sqsjobs", MetricData=[
        {"MetricName": name, "Dimensions": dims, "Timestamp": at, "Value": value, "Unit": "Count"}])


def test_cancelled_and_expired_deliveries_are_counted_per_job_over_the_window(
        aws: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from moto.cloudwatch.models import CloudWatchBackend

    from sqsjobs.local.moto_cloudwatch import get_metric_data

    # In-process moto sums every query's points alike; the local cloud's GetMetricData (what its server answers)
    # keeps each query to its own dimensions, as CloudWatch does.
    monkeypatch.setattr(CloudWatchBackend, "get_metric_data", get_metric_data)
    sqs, cw = aws
    seed(sqs, cw)
    now = datetime.now(UTC)
    put_count(cw, "JobCancelled", "invoice-email", 2, now - timedelta(minutes=5))
    put_count(cw, "JobCancelled", "invoice-email", 1, now - timedelta(hours=3))
    put_count(cw, "JobCancelled", "invoice-email", 40, now - timedelta(hours=30))  # before the 24 h window
    put_count(cw, "JobExpired", "sync-account", 3, now - timedelta(minutes=5))
    put_count(cw, "JobCancelled", None, 3, now - timedelta(minutes=5))  # the service-wide set counts nothing twice

    report = collect_status(sqs_client=sqs, cloudwatch_client=cw, queue="jobs")
    assert [(s.job, s.cancelled, s.expired) for s in report.skipped] == [
        ("invoice-email", 3, 0), ("sync-account", 0, 3)]
    wider = collect_status(sqs_client=sqs, cloudwatch_client=cw, queue="jobs", skipped_hours=48)
    assert wider.skipped[0].cancelled == 43

    data = json.loads(CliRunner().invoke(build_app(), ["status", "--queue", "jobs", "--json"]).stdout)
    assert data["skipped"] == [{"job": "invoice-email", "cancelled": 3, "expired": 0},
                               {"job": "sync-account", "cancelled": 0, "expired": 3}]
    table = CliRunner().invoke(build_app(), ["status", "--queue", "jobs"], env={"COLUMNS": "200"})
    assert "acknowledged without" in table.output and "sync-account" in table.output
    assert CliRunner().invoke(build_app(), ["status", "--queue", "jobs", "--skipped-hours", "0"]).exit_code == 2
