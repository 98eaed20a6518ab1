"""Lambda's SQS and stream event source semantics, as the local cloud emulates them."""

from __future__ import annotations

import json

from integration.local.local_support import Recorder, wait_until

from sqsjobs.local.cloud import LocalCloud

#: drain() returns as soon as the cloud is idle; this only bounds a hang (the machine may be loaded)
DRAIN_CEILING = 180


def dead_bodies(cloud: LocalCloud) -> list[str]:
    return [m["Body"] for m in cloud.peek_all("DeadLetterQueue")]


def test_functions_see_local_names_for_refs_getatts_and_subs(cloud: LocalCloud) -> None:
    env = cloud.function_env("Worker")

    assert env["QUEUE_URL"] == cloud.queue_url("JobsQueue")
    assert env["QUEUE_ARN"].endswith(":fixture-JobsQueue")
    assert env["GREETING"] == "hello from us-east-1 fixture-Table"


def test_a_type_it_cannot_emulate_is_named_in_a_warning(cloud: LocalCloud, recorder: Recorder) -> None:
    assert ("warn", "Weird (AWS::ECS::Cluster) cannot be emulated locally and was NOT created") in recorder.events


def test_the_redrive_policy_comes_from_a_mapping_keyed_by_a_number_parameter(cloud: LocalCloud) -> None:
    # maxReceiveCount: !FindInMap [ReceivesPerMaxAttempts, !Ref MaxAttempts, MaxReceiveCount], MaxAttempts 1.
    attributes = cloud.clients.get("sqs").get_queue_attributes(
        QueueUrl=cloud.queue_url("JobsQueue"), AttributeNames=["RedrivePolicy"])["Attributes"]
    assert json.loads(attributes["RedrivePolicy"])["maxReceiveCount"] == 2
    assert cloud.deployment.queues["JobsQueue"].max_receive_count == 2


def test_only_the_reported_failure_stays_and_is_redriven_by_the_queue(cloud: LocalCloud) -> None:
    cloud.send("JobsQueue", "ok")
    cloud.send("JobsQueue", "fail:reported")
    cloud.drain(timeout=DRAIN_CEILING)

    # maxReceiveCount 2: two deliveries, then moto's redrive moved it.
    assert dead_bodies(cloud).count("fail:reported") == 1
    assert "ok" not in dead_bodies(cloud)


def test_a_malformed_batch_response_fails_the_whole_batch(cloud: LocalCloud) -> None:
    poller = cloud.sqs_pollers[0]
    before = poller.stats.malformed_responses

    cloud.send("JobsQueue", "malformed")
    cloud.drain(timeout=DRAIN_CEILING)

    assert poller.stats.malformed_responses - before == 2
    assert dead_bodies(cloud).count("malformed") == 1


def test_the_timeout_kills_the_invocation_and_the_message_comes_back(cloud: LocalCloud) -> None:
    poller = cloud.sqs_pollers[0]
    before = poller.stats.timeouts

    cloud.send("JobsQueue", "sleep:30")
    cloud.drain(timeout=DRAIN_CEILING)

    assert poller.stats.timeouts - before == 2
    assert dead_bodies(cloud).count("sleep:30") == 1


def test_maximum_concurrency_caps_invocations_in_flight(cloud: LocalCloud) -> None:
    poller = cloud.sqs_pollers[0]
    timeouts_before = poller.stats.timeouts
    # Sleeps long enough for batches to overlap, short next to the 2 s Timeout (5 per batch: 0.25 s).
    for _ in range(15):
        cloud.send("JobsQueue", "sleep:0.05")
    cloud.drain(timeout=DRAIN_CEILING)

    assert poller.mapping.max_concurrency == 2
    assert 1 <= poller.stats.peak_in_flight <= 2
    assert poller.stats.timeouts == timeouts_before


def test_the_lambda_context_counts_down_from_the_timeout(cloud: LocalCloud, recorder: Recorder) -> None:
    cloud.send("JobsQueue", "ok")
    cloud.drain(timeout=DRAIN_CEILING)

    remaining = [int(line.split()[0].split("=")[1]) for f, line in recorder.logs if line.startswith("remaining=")]
    assert remaining
    assert all(0 < r <= 2000 for r in remaining)


def test_stream_records_reach_the_relay(cloud: LocalCloud, recorder: Recorder) -> None:
    cloud.clients.get("dynamodb").put_item(TableName=cloud.deployment.tables["Table"], Item={"pk": {"S": "row-1"}})
    cloud.drain(timeout=DRAIN_CEILING)

    assert ("Relay", "stream INSERT row-1") in recorder.logs


def test_a_schedule_fires_on_demand(cloud: LocalCloud, recorder: Recorder) -> None:
    result = cloud.fire("nightly-report")

    assert result.ok
    assert ("Nightly", "nightly fired: Scheduled Event") in recorder.logs


def test_the_dlq_alarm_goes_to_alarm_and_pages(cloud: LocalCloud, recorder: Recorder) -> None:
    cloud.send("JobsQueue", "fail:paged")
    cloud.drain(timeout=DRAIN_CEILING)
    cloud.evaluate_alarms()

    assert cloud.alarm_state("DlqAlarm") == "ALARM"
    assert any(level == "page" and "fixture-DlqAlarm" in text for level, text in recorder.events)
    state = cloud.clients.get("cloudwatch").describe_alarms(AlarmNames=["fixture-DlqAlarm"])["MetricAlarms"]
    assert state[0]["StateValue"] == "ALARM"


def test_emf_lines_become_metrics_for_the_math_alarm(cloud: LocalCloud) -> None:
    # This test's own failure, not earlier tests' (they may have run in another order, or more than
    # the alarm's 60 s period ago on a loaded machine): evaluated as soon as its metric is in.
    failed_before = cloud.metrics.total("fixture", "JobFailed")
    cloud.send("JobsQueue", "ok")
    cloud.send("JobsQueue", "fail:rate")
    wait_until(lambda: cloud.metrics.total("fixture", "JobFailed") > failed_before, "the failure's EMF line")
    cloud.evaluate_alarms()

    assert cloud.metrics.total("fixture", "JobSucceeded") >= 1
    assert cloud.alarm_state("FailureRateAlarm") == "ALARM"
    cloud.drain(timeout=DRAIN_CEILING)


def test_a_failing_stream_record_is_bisected_out_retried_and_sent_to_the_on_failure_queue(
    cloud: LocalCloud, recorder: Recorder
) -> None:
    dynamodb = cloud.clients.get("dynamodb")
    table = cloud.deployment.tables["Table"]
    for key in ("good-a", "bad-b", "good-c"):
        dynamodb.put_item(TableName=table, Item={"pk": {"S": key}})
    cloud.drain(timeout=DRAIN_CEILING)

    failures = cloud.peek("RelayFailures")
    infos = [json.loads(m["Body"])["DDBStreamBatchInfo"] for m in failures]
    assert [i["batchSize"] for i in infos] == [1]
    assert infos[0]["streamArn"] == cloud.deployment.stream_mappings[0].stream_arn
    assert ("Relay", "stream INSERT good-c") in recorder.logs


def test_stream_filters_drop_records_before_the_invocation(cloud: LocalCloud, recorder: Recorder) -> None:
    dynamodb = cloud.clients.get("dynamodb")
    table = cloud.deployment.tables["Table"]
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "short-lived"}})
    dynamodb.delete_item(TableName=table, Key={"pk": {"S": "short-lived"}})
    cloud.drain(timeout=DRAIN_CEILING)

    relayed = [line for function, line in recorder.logs if function == "Relay" and "short-lived" in line]
    assert relayed == ["stream INSERT short-lived"]
    assert cloud.stream_pollers[0].skipped >= 1


def test_peek_all_sees_every_message_past_the_first_ten_and_leaves_them(cloud: LocalCloud) -> None:
    # Receiving with a zero visibility timeout hands back the same first ten every time (moto always):
    # a DLQ of more than ten letters must still be seen whole, whatever earlier tests left there.
    bodies = {f"peek:{i}" for i in range(12)}
    for body in sorted(bodies):
        cloud.send("DeadLetterQueue", body)

    first = [m["Body"] for m in cloud.peek_all("DeadLetterQueue")]
    again = [m["Body"] for m in cloud.peek_all("DeadLetterQueue")]

    assert bodies <= set(first) and len(first) == len(set(first))
    assert sorted(again) == sorted(first)
