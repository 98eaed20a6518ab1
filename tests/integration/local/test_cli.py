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


PING_APP = """from sqsjobs import JobApp

app = JobApp()


@app.job("ping", key="ping:{n}")
def ping(n: int) -> None: ...
"""


def test_two_projects_run_their_own_clouds_side_by_side(tmp_path: Path) -> None:
    import shutil

    from sqsjobs.local.control import project_key

    env = {k: v for k, v in os.environ.items() if k != "SQSJOBS_LOCAL_STATE"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")
    projects, clouds, states = {}, {}, {}
    for name in ("a", "b"):
        project = projects[name] = tmp_path / name
        shutil.copytree(FIXTURE.parent, project)
        template = project / "template.yaml"
        # `sqsjobs enqueue` sends to SQSJOBS_QUEUE_URL: a queue nothing consumes, so the message stays to be seen.
        template.write_text(template.read_text().replace(
            "          QUEUE_URL: !Ref JobsQueue\n",
            "          QUEUE_URL: !Ref JobsQueue\n          SQSJOBS_QUEUE_URL: !Ref RelayFailures\n", 1))
        (project / "jobsapp.py").write_text(PING_APP)
        clouds[name] = subprocess.Popen([SQSJOBS, "local", "up"], cwd=project, env=env, stdout=subprocess.DEVNULL,
                                        stderr=subprocess.PIPE, text=True)
    try:
        for name in ("a", "b"):
            key = project_key(projects[name] / "template.yaml")
            states[name] = wait_for(tmp_path / "cache" / "sqsjobs" / "local" / f"{key}.json", clouds[name])

        def sqsjobs(name: str, *args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run([SQSJOBS, *args], cwd=projects[name], env=env, capture_output=True, text=True,
                                  timeout=120)

        again = sqsjobs("a", "local", "up")
        enqueued = sqsjobs("a", "enqueue", "ping", "n=1", "--app", "jobsapp:app")
        depths = {name: sqs_depth(states[name], "RelayFailures") for name in ("a", "b")}
        env_b = sqsjobs("b", "local", "env")
        down_b = sqsjobs("b", "local", "down")
        env_a_after = sqsjobs("a", "local", "env")
        env_b_after = sqsjobs("b", "local", "env")
        from_elsewhere = subprocess.run([SQSJOBS, "local", "env", "--template", str(projects["a"] / "template.yaml")],
                                        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    finally:
        for process in clouds.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        for process in clouds.values():
            process.communicate(timeout=120)

    assert states["a"]["endpoint"] != states["b"]["endpoint"]
    assert again.returncode == 1
    assert f"a local cloud of this project is already running (pid {clouds['a'].pid}, {states['a']['endpoint']})" \
        in " ".join(again.stderr.split())
    assert enqueued.returncode == 0, enqueued.stderr
    assert depths == {"a": 1, "b": 0}  # A's enqueue landed in A's cloud
    assert f"export AWS_ENDPOINT_URL={states['b']['endpoint']}" in env_b.stdout
    assert down_b.returncode == 0 and f"pid {clouds['b'].pid}" in down_b.stderr
    assert f"export AWS_ENDPOINT_URL={states['a']['endpoint']}" in env_a_after.stdout  # A is still found
    assert env_b_after.returncode == 1 and "no local cloud is running" in env_b_after.stderr
    assert f"export AWS_ENDPOINT_URL={states['a']['endpoint']}" in from_elsewhere.stdout
    assert all(process.returncode == 0 for process in clouds.values())


def sqs_depth(state: dict[str, object], queue: str) -> int:
    import boto3

    sqs = boto3.client("sqs", endpoint_url=str(state["endpoint"]), region_name=str(state["region"]),
                       aws_access_key_id="testing", aws_secret_access_key="testing")
    url = dict(state["queues"])[queue]  # type: ignore[call-overload]
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])
