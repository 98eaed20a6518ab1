"""`sqsjobs local up` keeps its state across restarts (issue 25, finding 10): queues with their messages (visible,
delayed, in flight), tables and items, schedules and where the stream mappings were; `--fresh` starts empty; a
snapshot of another moto version is refused in one line."""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Any

import boto3
from integration.local.local_support import FIXTURE, wait_until
from integration.local.test_cli import SQSJOBS, wait_for

from sqsjobs.local.control import ProjectFiles, project_key


def aws(state: dict[str, Any], service: str) -> Any:
    return boto3.client(service, endpoint_url=str(state["endpoint"]), region_name=str(state["region"]),
                        aws_access_key_id="testing", aws_secret_access_key="testing")


class Project:
    """A copy of the fixture project, its cache, and its `local up` runs."""

    def __init__(self, root: Path) -> None:
        self.dir = root / "project"
        shutil.copytree(FIXTURE.parent, self.dir)
        self.env = {k: v for k, v in os.environ.items() if k != "SQSJOBS_LOCAL_STATE"}
        self.env["XDG_CACHE_HOME"] = str(root / "cache")
        template = (self.dir / "template.yaml").resolve()
        self.files = ProjectFiles(template=template,
                                  state=root / "cache" / "sqsjobs" / "local" / f"{project_key(template)}.json")
        self.process: subprocess.Popen[str] | None = None

    def up(self, *options: str) -> dict[str, Any]:
        self.process = subprocess.Popen([SQSJOBS, "local", "up", *options], cwd=self.dir, env=self.env,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return wait_for(self.files.state, self.process)

    def stop(self) -> tuple[str, str]:
        assert self.process is not None
        self.process.send_signal(signal.SIGINT)
        out, err = self.process.communicate(timeout=120)
        assert self.process.returncode == 0, err
        return out, " ".join(err.split())


def positions(project: Project) -> dict[str, str]:
    """Where the stream mappings are, per shard, as the running cloud last recorded it."""
    import json

    if not project.files.streams.exists():
        return {}
    return {shard: number for shards in json.loads(project.files.streams.read_text()).values()
            for shard, number in shards.items()}


def test_a_restart_resumes_queues_messages_tables_schedules_and_streams_unless_fresh(tmp_path: Path) -> None:
    project = Project(tmp_path)
    first = project.up()
    sqs, dynamodb, scheduler = aws(first, "sqs"), aws(first, "dynamodb"), aws(first, "scheduler")
    parked = first["queues"]["RelayFailures"]  # nothing consumes it: its messages stay as they are
    visible = sqs.send_message(QueueUrl=parked, MessageBody="visible")["MessageId"]
    sqs.send_message(QueueUrl=parked, MessageBody="delayed", DelaySeconds=900)
    taken_id = sqs.send_message(QueueUrl=parked, MessageBody="taken")["MessageId"]
    received = sqs.receive_message(QueueUrl=parked, MaxNumberOfMessages=10, VisibilityTimeout=900)["Messages"]
    taken = [m for m in received if m["MessageId"] == taken_id]
    assert taken, "the message to take in flight was not received"
    for other in (m for m in received if m["MessageId"] != taken_id):  # visible again at once
        sqs.change_message_visibility(QueueUrl=parked, ReceiptHandle=other["ReceiptHandle"], VisibilityTimeout=0)
    table = first["tables"]["Table"]
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "kept-1"}, "v": {"N": "1"}})
    group = first["schedule_groups"]["DelayedJobs"]
    scheduler.create_schedule(Name="job-kept", GroupName=group, ScheduleExpression="at(2099-01-01T00:00:00)",
                              FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="DELETE",
                              Target={"Arn": f"arn:aws:sqs:{first['region']}:123456789012:x", "Input": "{}",
                                      "RoleArn": "arn:aws:iam::123456789012:role/delivery"})
    wait_until(lambda: positions(project) != {}, "the relay to handle the first stream record")
    first_out, first_err = project.stop()
    after_first = positions(project)

    assert ("kept for the next `sqsjobs local up`: 3 queue(s) with 3 message(s) (1 visible, 1 delayed, 1 in flight), "
            "1 table(s) with 1 item(s), 1 pending schedule(s)") in first_err
    assert "`sqsjobs local up --fresh` starts empty" in first_err and project.files.snapshot.exists()

    second = project.up()
    sqs, dynamodb, scheduler = aws(second, "sqs"), aws(second, "dynamodb"), aws(second, "scheduler")
    parked = second["queues"]["RelayFailures"]
    attributes = sqs.get_queue_attributes(QueueUrl=parked, AttributeNames=["All"])["Attributes"]
    again = sqs.receive_message(QueueUrl=parked, MaxNumberOfMessages=10)["Messages"]
    deleted = sqs.delete_message(QueueUrl=parked, ReceiptHandle=taken[0]["ReceiptHandle"])  # the old receipt
    item = dynamodb.get_item(TableName=second["tables"]["Table"], Key={"pk": {"S": "kept-1"}}).get("Item")
    pending = [s["Name"] for s in scheduler.list_schedules(GroupName=group)["Schedules"]]
    dynamodb.put_item(TableName=second["tables"]["Table"], Item={"pk": {"S": "new-2"}})
    wait_until(lambda: positions(project) != after_first, "the relay to handle the record written after the restart")
    second_out, second_err = project.stop()

    assert (attributes["ApproximateNumberOfMessages"], attributes["ApproximateNumberOfMessagesDelayed"],
            attributes["ApproximateNumberOfMessagesNotVisible"]) == ("1", "1", "1")
    assert [(m["MessageId"], m["Body"]) for m in again] == [(visible, "visible")]  # same id
    assert deleted["ResponseMetadata"]["HTTPStatusCode"] == 200
    assert item == {"pk": {"S": "kept-1"}, "v": {"N": "1"}} and pending == ["job-kept"]
    assert "resumed the state kept at the last stop" in second_err
    assert first_out.count("stream INSERT kept-1") == 1
    assert "stream INSERT new-2" in second_out and "kept-1" not in second_out  # the stream went on after it

    fresh = project.up("--fresh")
    empty = aws(fresh, "sqs").get_queue_attributes(QueueUrl=fresh["queues"]["RelayFailures"],
                                                   AttributeNames=["ApproximateNumberOfMessages"])["Attributes"]
    no_item = aws(fresh, "dynamodb").get_item(TableName=fresh["tables"]["Table"], Key={"pk": {"S": "kept-1"}})
    _, fresh_err = project.stop()

    assert empty["ApproximateNumberOfMessages"] == "0" and "Item" not in no_item
    assert "resumed" not in fresh_err


def test_a_snapshot_of_another_moto_version_is_refused_in_one_line(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.up()
    project.stop()
    with project.files.snapshot.open("rb") as stream:
        header, rest = pickle.load(stream), stream.read()
    header["moto"] = "4.0.0"
    with project.files.snapshot.open("wb") as stream:
        pickle.dump(header, stream)
        stream.write(rest)

    refused = subprocess.run([SQSJOBS, "local", "up"], cwd=project.dir, env=project.env, capture_output=True,
                             text=True, timeout=120)

    assert refused.returncode == 1
    assert "Traceback" not in refused.stderr
    (said,) = [line for line in refused.stderr.splitlines() if "moto 4.0.0" in line]  # one line, once
    assert said.startswith("error this project's local cloud was saved by moto 4.0.0 and this is moto ")
    assert said.endswith("start with `sqsjobs local up --fresh` (it discards the saved state)")
    assert project.files.snapshot.exists()  # refused, not thrown away
