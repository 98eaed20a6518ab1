"""The figures measured as Lambda bills them: the client on one core, the moto server on the other.

A Lambda function of up to 1,769 MB gets at most one vCPU, and what it is billed for is its own
duration, never the AWS service's work. So:

- the measured client (a fresh process: ``bench.http_client``, or ``bench/cold/first_call.py``)
  is pinned to one core (``os.sched_setaffinity`` before it starts), its threads included;
- the moto server is another process (moto's server, ``sqsjobs.local.moto_partiql`` installed),
  pinned to the other core, so its request handling neither competes with the client for its core
  nor counts in the client's CPU: ``time.process_time`` in the client sees the client's threads only;
- the runs of the two frameworks alternate (sqsjobs, Powertools, sqsjobs, ...) against the same
  server, so drift in the machine's load falls on both, and the ratio is taken per pair.

On a machine with a single core both run on it and the notes say so.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from bench.support import Stat, client, create_queues, create_table

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FRAMEWORKS = ("sqsjobs", "powertools")


def cores() -> tuple[int, int]:
    """(the client's core, the server's core): the first two this process may run on (the same one if alone)."""
    available = sorted(os.sched_getaffinity(0))
    return available[0], available[1] if len(available) > 1 else available[0]


def pin_to(core: int) -> Any:
    """A ``preexec_fn`` that pins the child process (and every thread it starts) to ``core``."""
    return lambda: os.sched_setaffinity(0, {core})


@contextlib.contextmanager
def pinned(core: int) -> Iterator[None]:
    """This process (all its threads) on ``core`` for the block; the previous affinity afterwards."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {core})
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass(frozen=True)
class MotoProcess:
    """A running moto server process: its URL, and the CPU it has used (what the client's figure leaves out)."""

    url: str
    pid: int

    def cpu_seconds(self) -> float:
        """User + system CPU of the server process so far (``/proc/<pid>/stat``)."""
        with open(f"/proc/{self.pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextlib.contextmanager
def moto_process(core: int) -> Iterator[MotoProcess]:
    """A moto server in its own process on 127.0.0.1, pinned to ``core``."""
    port = _free_port()
    # moto's PartiQL is wrong for sqsjobs' statements: the server answers them as the local cloud does.
    serve = ("import sys; from sqsjobs.local.moto_partiql import install; install(); "
             "from moto.server import main; main(sys.argv[1:])")
    server = subprocess.Popen([sys.executable, "-c", serve, "-H", "127.0.0.1", "-p", str(port)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pin_to(core))
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.5):
                break
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the moto server did not start (exit {server.poll()})")
            time.sleep(0.1)
        yield MotoProcess(url=f"http://127.0.0.1:{port}", pid=server.pid)
    finally:
        server.terminate()
        server.wait(timeout=30)


def child_env(endpoint: str | None = None) -> dict[str, str]:
    """The environment of a measured process: fake credentials, one region, nothing from the developer's shell."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "SQSJOBS_", "POWERTOOLS_", "PYTHON"))}
    env.update({"AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_EC2_METADATA_DISABLED": "true", "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
                "PYTHONPATH": ROOT})
    if endpoint:
        env["AWS_ENDPOINT_URL"] = endpoint
    return env


@dataclass
class Paired:
    """Per framework, one value per run; and the ratio sqsjobs / Powertools of each interleaved pair."""

    values: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in FRAMEWORKS})

    def stat(self, name: str) -> Stat:
        return Stat(tuple(self.values[name]))

    def ratio(self) -> Stat:
        """sqsjobs over Powertools, pair by pair (each pair ran back to back)."""
        return Stat(tuple(a / b for a, b in zip(self.values["sqsjobs"], self.values["powertools"], strict=True)))


def run_client(module: str, config: dict[str, Any], *, core: int, label: str, env: dict[str, str] | None = None,
               timeout: float = 900) -> dict[str, Any]:
    """Run ``python -m module`` pinned to ``core`` with ``config`` on its stdin; its last JSON line, checked.

    The measured processes print one JSON line with ``jobs_run`` and ``expected``: a run whose jobs did not
    all run raises instead of reporting a figure (a broken run cannot pass for a fast one).
    """
    done = subprocess.run([sys.executable, "-m", module], input=json.dumps(config), env=env or child_env(),
                          cwd=ROOT, capture_output=True, text=True, timeout=timeout, preexec_fn=pin_to(core),
                          check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not lines:
        raise RuntimeError(f"{label} failed ({done.returncode}): {done.stderr[-2000:]}")
    run: dict[str, Any] = json.loads(lines[-1])
    if run["jobs_run"] != run["expected"]:
        raise RuntimeError(f"{label}: {run['jobs_run']} jobs ran, expected {run['expected']}")
    return run


@dataclass
class HttpCpu:
    """Client CPU per message over real HTTP (µs), the wall time per batch, and the cores used."""

    cpu_us: Paired
    wall_ms: Paired
    #: the moto server's CPU per message during the same runs (warm-up included): what the client's leaves out
    server_cpu_us: Paired
    client_core: int
    server_core: int
    batches: int


def http_cpu(reps: int, batches: int, warm: int = 3) -> HttpCpu:
    """``reps`` interleaved runs per framework of ``batches`` batches of 10 no-op jobs, after ``warm`` batches."""
    client_core, server_core = cores()
    cpu, wall, server_cpu = Paired(), Paired(), Paired()
    with moto_process(server_core) as server:
        endpoint = server.url
        sqs, dynamodb = client("sqs", endpoint), client("dynamodb", endpoint)
        queue, dlq = create_queues(sqs, "bench-http")
        tables = {"sqsjobs": "bench-http-sqsjobs", "powertools": "bench-http-powertools"}
        create_table(dynamodb, tables["sqsjobs"], "pk")
        create_table(dynamodb, tables["powertools"], "id")
        for rep in range(reps + 1):
            for name in FRAMEWORKS:
                config = {"framework": name, "endpoint": endpoint, "queue": queue, "dlq": dlq, "table": tables[name],
                          "first": 1_000_000 * (rep + 1), "warm": warm, "batches": batches}
                server_before = server.cpu_seconds()
                run = run_client("bench.http_client", config, core=client_core, label=f"{name} HTTP client")
                if rep:  # the first round warms the page cache and the .pyc files for both
                    cpu.values[name].append(run["cpu_us_per_message"])
                    wall.values[name].append(run["wall_ms_per_batch"])
                    server_cpu.values[name].append((server.cpu_seconds() - server_before) / (run["expected"]) * 1e6)
    return HttpCpu(cpu_us=cpu, wall_ms=wall, server_cpu_us=server_cpu, client_core=client_core,
                   server_core=server_core, batches=batches)
