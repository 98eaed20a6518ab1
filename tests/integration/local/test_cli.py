"""`sqsjobs local up` as a user runs it: find it, fire a schedule (or a delayed job), Ctrl-C, nothing left behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from integration.local.local_support import FIXTURE

from sqsjobs.enqueue._delays import schedule_name

SQSJOBS = str(Path(sys.executable).with_name("sqsjobs"))


def wait_for(path: Path, process: subprocess.Popen[str], seconds: float = 180) -> dict[str, object]:
    """The state file ``local up`` writes once it runs; ``seconds`` only bound a hang."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        if path.exists():
            state: dict[str, object] = json.loads(path.read_text())
            return state
        time.sleep(0.2)
    raise AssertionError("local up did not write its state file")


def port_free(port: int) -> bool:
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT leftovers are not holders
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def test_local_up_serves_fire_and_stops_cleanly_on_ctrl_c(tmp_path: Path) -> None:
    env = {**os.environ, "SQSJOBS_LOCAL_STATE": str(tmp_path / "state.json")}
    process = subprocess.Popen(
        [SQSJOBS, "local", "up", "--template", str(FIXTURE)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        state = wait_for(tmp_path / "state.json", process)
        port = int(str(state["endpoint"]).rsplit(":", 1)[1])

        fired = subprocess.run([SQSJOBS, "local", "fire", "nightly-report"], env=env,
                               capture_output=True, text=True, timeout=60)
        delayed = create_delayed_job(state, key="fixture:delayed")
        early = subprocess.run([SQSJOBS, "local", "fire", "fixture:delayed"], env=env,
                               capture_output=True, text=True, timeout=60)
        left = scheduler_of(state).list_schedules(GroupName=delayed)["Schedules"]
        exported = subprocess.run([SQSJOBS, "local", "env"], env=env, capture_output=True, text=True, timeout=60)
        missing = subprocess.run([SQSJOBS, "local", "fire", "no-such"], env=env,
                                 capture_output=True, text=True, timeout=60)
    finally:
        process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=60)

    assert fired.returncode == 0, fired.stderr
    assert json.loads(fired.stdout)["ok"] is True
    assert early.returncode == 0, early.stderr
    (sent,) = json.loads(early.stdout)["delayed"]
    assert sent["schedule"] == schedule_name("fixture:delayed") and sent["error"] is None
    assert left == []  # fired early, and gone (ActionAfterCompletion DELETE)
    assert f"export AWS_ENDPOINT_URL={state['endpoint']}" in exported.stdout
    assert missing.returncode == 1
    assert "no schedule 'no-such'; schedules: nightly-report" in missing.stderr
    assert "Weird (AWS::ECS::Cluster) cannot be emulated locally" in err
    assert "nightly fired: Scheduled Event" in out
    assert process.returncode == 0
    assert port_free(port)
    assert not (tmp_path / "state.json").exists()
    children = subprocess.run(["pgrep", "-f", f"sqsjobs.local._child moto -H 127.0.0.1 -p {port}"],
                              capture_output=True, text=True)
    assert children.stdout == ""


def scheduler_of(state: dict[str, object]) -> Any:
    import boto3

    return boto3.client("scheduler", endpoint_url=str(state["endpoint"]), region_name=str(state["region"]),
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def create_delayed_job(state: dict[str, object], *, key: str) -> str:
    """A job two hours ahead, as an app's enqueue would leave it: a one-time schedule named after its key."""
    group = next(iter(dict(state["schedule_groups"]).values()))  # type: ignore[call-overload]
    queues = dict(state["queues"])  # type: ignore[call-overload]
    queue_name = str(queues["JobsQueue"]).rsplit("/", 1)[1]
    scheduler_of(state).create_schedule(
        Name=schedule_name(key), GroupName=group, ScheduleExpression="at(2099-01-01T00:00:00)",
        FlexibleTimeWindow={"Mode": "OFF"}, ActionAfterCompletion="DELETE",
        Target={"Arn": f"arn:aws:sqs:{state['region']}:123456789012:{queue_name}", "Input": "once:delayed",
                "RoleArn": "arn:aws:iam::123456789012:role/delivery"})
    return str(group)


def test_client_commands_without_a_running_local_cloud_say_how_to_start_one(tmp_path: Path) -> None:
    env = {**os.environ, "SQSJOBS_LOCAL_STATE": str(tmp_path / "none.json")}

    result = subprocess.run([SQSJOBS, "enqueue", "invoice-email", "invoice_id=1"], env=env,
                            capture_output=True, text=True, timeout=60)

    assert result.returncode == 1
    assert "start one with `sqsjobs local up`" in result.stderr
