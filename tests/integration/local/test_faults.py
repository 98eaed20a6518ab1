"""Bad input and faults: port in use, moto server death, handler import error, unknown parameters."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest
from integration.local.local_support import BROKEN, FIXTURE, Recorder, wait_until

from sqsjobs.local.cloud import LocalCloud
from sqsjobs.local.errors import PortInUseError, ServerDiedError, TemplateError


def test_a_port_in_use_is_a_clear_error() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]

        with pytest.raises(PortInUseError, match=f"port {port} on 127.0.0.1 is already in use"):
            LocalCloud.start(FIXTURE, port=port, output=Recorder().output())


def test_an_unknown_parameter_is_refused_before_anything_starts() -> None:
    with pytest.raises(TemplateError, match=r"parameter Nope: the template declares no such parameter; fix: "
                                            r"remove Nope=\.\.\. \(the template's parameters: MaxAttempts\)"):
        LocalCloud.start(FIXTURE, parameters={"Nope": "1"}, output=Recorder().output())
    with pytest.raises(TemplateError, match="parameter MaxAttempts: 'two' is not a number"):
        LocalCloud.start(FIXTURE, parameters={"MaxAttempts": "two"}, output=Recorder().output())


def test_a_redrive_policy_the_dlqs_allow_policy_excludes_is_refused_like_sqs(tmp_path: Path) -> None:
    template = FIXTURE.read_text().replace(
        "      MessageRetentionPeriod: 1209600\n",
        "      MessageRetentionPeriod: 1209600\n"
        "      RedriveAllowPolicy:\n"
        "        redrivePermission: byQueue\n"
        "        sourceQueueArns: [arn:aws:sqs:us-east-1:123456789012:some-other-queue]\n",
        1,
    )
    assert "some-other-queue" in template
    (tmp_path / "template.yaml").write_text(template)

    with pytest.raises(TemplateError, match="JobsQueue: SQS refuses its RedrivePolicy: DeadLetterQueue's"):
        LocalCloud.start(tmp_path / "template.yaml", output=Recorder().output(), stack_name="allow")


def test_a_dead_moto_server_is_detected_and_reported() -> None:
    recorder = Recorder()
    with LocalCloud.start(FIXTURE, output=recorder.output(), stack_name="dies") as cloud:
        os.killpg(cloud.server.process.pid, signal.SIGKILL)
        wait_until(lambda: cloud.failure is not None, "the monitor to notice the dead server")

        with pytest.raises(ServerDiedError, match="exited"):
            cloud.check()
        assert any(level == "error" and "moto server" in text for level, text in recorder.events)


def test_a_handler_import_error_is_one_line_said_once_and_leaves_the_message() -> None:
    recorder = Recorder()
    with LocalCloud.start(BROKEN, output=recorder.output(), stack_name="broken") as cloud:
        poller = cloud.sqs_pollers[0]
        pool = cloud.pools[poller.mapping.function]
        cloud.send("Queue", "keep me")
        # Each cold start from now on is the paused poller trying the import again instead of receiving:
        # two more mean a whole round of its loop passed over the waiting message.
        tried = pool.cold_starts
        wait_until(lambda: pool.cold_starts >= tried + 2, "two more import attempts by the paused poller")

        said = [text for level, text in recorder.events if "this_module_does_not_exist" in text]
        assert len(said) == 1 and "\n" not in said[0], said
        assert said[0].startswith(f"{Path(os.path.relpath(BROKEN.parent))}/broken.py:3: ModuleNotFoundError: "
                                  "No module named 'this_module_does_not_exist'; Broken: its event sources are paused")
        assert "Traceback" not in recorder.text()
        assert poller.stats.received == 0
        assert cloud.queue_depth("Queue") == 1
        assert cloud.queue_depth("Dlq") == 0


def test_a_syntax_error_saved_under_reload_is_one_line_once_and_the_previous_code_keeps_serving(
        tmp_path: Path) -> None:
    import shutil

    project = tmp_path / "project"
    shutil.copytree(FIXTURE.parent, project)
    recorder = Recorder()
    with LocalCloud.start(project / "template.yaml", output=recorder.output(), stack_name="reloading",
                          reload=True) as cloud:
        app = project / "app.py"
        app.write_text(app.read_text() + "\n\ndef broken(:\n    pass\n")
        wait_until(lambda: cloud.reloads >= 1, "the reload after the edit")
        line_count = len(app.read_text().splitlines()) - 1

        cloud.send("JobsQueue", "ok")  # served by the previous code: the new one does not import
        wait_until(lambda: cloud.queue_depth("JobsQueue") == 0, "the message to be processed")
        cloud.fire("nightly-report")

        said = [text for level, text in recorder.events if "SyntaxError" in text]
        shown = app if os.path.relpath(app).startswith("..") else Path(os.path.relpath(app))
        assert said == [f"{shown}:{line_count}: SyntaxError: invalid syntax; {', '.join(cloud.pools)}: still serving "
                        "the previous code until a change imports"], recorder.events
        assert "Traceback" not in recorder.text()
        assert all(pool.init_error is None for pool in cloud.pools.values())
