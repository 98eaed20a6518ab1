"""`sqsjobs console` as an operator runs it: a process that prints its URL, serves, and stops on Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from sqsjobs.local.aws import Clients
from sqsjobs.local.server import MotoServer

SQSJOBS = str(Path(sys.executable).with_name("sqsjobs"))


def test_the_command_prints_its_url_serves_the_overview_and_stops_on_ctrl_c() -> None:
    server = MotoServer.start()
    try:
        Clients(server.endpoint).get("sqs").create_queue(QueueName="console-jobs")
        env = {**os.environ, "AWS_ENDPOINT_URL": server.endpoint, "SQSJOBS_QUEUE_URL": "console-jobs",
               "COLUMNS": "200"}
        process = subprocess.Popen([SQSJOBS, "console", "--port", "0"], env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.STDOUT, text=True)
        try:
            assert process.stdout is not None
            first = process.stdout.readline()  # blocks until the port is bound and announced
            url = re.search(r"http://127\.0\.0\.1:\d+/", first)
            assert url, first
            with urllib.request.urlopen(url.group(0), timeout=60) as response:
                page = response.read().decode()
            assert response.status == 200 and 'data-queue="console-jobs"' in page
        finally:
            process.send_signal(signal.SIGINT)
            output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, output
        assert "Traceback" not in output
    finally:
        server.stop()
