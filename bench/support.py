"""What every benchmark shares: the moto server, call counting and latency hooks, statistics, the machine.

Calls are counted and timed through botocore's own event hooks on the clients
each framework is handed, so both frameworks are measured by the same code
at the same layer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import platform
import shutil
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REGION = "us-east-1"


@contextlib.contextmanager
def moto_server() -> Iterator[str]:
    """A moto server on 127.0.0.1 at a free port (one thread of this process); yields its URL."""
    from moto.server import ThreadedMotoServer

    from sqsjobs.local.moto_partiql import install

    install()  # moto's PartiQL is wrong for sqsjobs' statements: answer them as the local cloud does
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no access log line per request
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def client(service: str, endpoint: str | None, framework: str | None = None) -> Any:
    """A boto3 client on the local endpoint (or unconnected, for the Stubber), fake credentials.

    ``framework="sqsjobs"`` gives the DynamoDB client sqsjobs builds for itself in Lambda
    (``sqsjobs._clients.dynamodb_client``: no parameter validation, as pynamodb's own client);
    Powertools gets boto3's default, which is what its persistence layer builds.
    """
    import boto3

    kwargs: dict[str, Any] = {"endpoint_url": endpoint or "http://127.0.0.1:9", "region_name": REGION,
                              "aws_access_key_id": "bench", "aws_secret_access_key": "bench"}
    if framework == "sqsjobs" and service == "dynamodb":
        from sqsjobs._clients import dynamodb_client

        return dynamodb_client(**kwargs)
    return boto3.client(service, **kwargs)


@dataclass(frozen=True)
class Call:
    """One API call as botocore saw it (``before-call`` → ``after-call``)."""

    service: str
    operation: str
    start: float
    end: float
    params: dict[str, Any]


@dataclass
class CallLog:
    """Records every API call made through the clients it is attached to."""

    calls: list[Call] = field(default_factory=list)
    _local: threading.local = field(default_factory=threading.local)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def attach(self, aws_client: Any) -> None:
        """Hook ``aws_client``: ``before-call`` starts the clock, ``after-call`` (errors too) records."""
        events = aws_client.meta.events
        # Registered first so the Stubber, which answers in before-call, runs after us.
        events.register_first("before-call.*.*", self._before)
        events.register_last("after-call.*.*", self._after)
        self._service = aws_client.meta.service_model.service_name

    def _before(self, params: Any = None, model: Any = None, **kwargs: Any) -> None:
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        stack.append((time.perf_counter(), model.service_model.service_name, model.name, params))

    def _after(self, model: Any = None, **kwargs: Any) -> None:
        start, service, operation, params = self._local.stack.pop()
        call = Call(service=service, operation=operation, start=start, end=time.perf_counter(),
                    params=params if isinstance(params, dict) else {})
        with self._lock:
            self.calls.append(call)

    def clear(self) -> None:
        """Forget what was recorded."""
        with self._lock:
            self.calls = []

    def of(self, service: str) -> list[Call]:
        """The calls to one service."""
        return [c for c in self.calls if c.service == service]


def sequential_depth(calls: Sequence[Call]) -> int:
    """The longest chain of calls each starting after the previous one ended: round trips on the critical path.

    Calls that overlap in time (a batch's claims on a thread pool) count once;
    calls made one after the other each count.
    """
    ordered = sorted(calls, key=lambda c: c.start)
    depth: list[int] = []
    for i, call in enumerate(ordered):
        before = [depth[j] for j in range(i) if ordered[j].end <= call.start]
        depth.append(1 + max(before, default=0))
    return max(depth, default=0)


def add_latency(aws_client: Any, seconds: float) -> None:
    """Every HTTP request of ``aws_client`` waits ``seconds`` first (``before-send``), in its own thread.

    A model of the round trip to an in-region AWS endpoint, added on top of
    moto's own (local, sub-millisecond to a few ms) answer time.
    """

    def wait(**kwargs: Any) -> None:
        time.sleep(seconds)

    aws_client.meta.events.register("before-send", wait)


@dataclass(frozen=True)
class Stat:
    """Median and spread of repeated measurements."""

    values: tuple[float, ...]

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    def quartiles(self) -> tuple[float, float]:
        if len(self.values) < 2:
            return self.values[0], self.values[0]
        q = statistics.quantiles(self.values, n=4, method="inclusive")
        return q[0], q[2]

    def render(self, fmt: str = "{:.3g}", unit: str = "") -> str:
        """``median (IQR low-high, min-max, n=N)``."""
        lo, hi = self.quartiles()
        f = fmt.format
        return (f"{f(self.median)}{unit} (IQR {f(lo)}-{f(hi)}, range {f(min(self.values))}-"
                f"{f(max(self.values))}, n={len(self.values)})")


def repeat(fn: Callable[[], float], times: int) -> Stat:
    """Run ``fn`` ``times`` times and collect what it returns."""
    return Stat(tuple(fn() for _ in range(times)))


def machine() -> dict[str, str]:
    """What the figures were measured on."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    versions = {}
    for package in ("botocore", "boto3", "moto", "aws-lambda-powertools", "pynamodb"):
        from importlib.metadata import version

        with contextlib.suppress(Exception):
            versions[package] = version(package)
    return {
        "cpu": cpu,
        "cores": str(os.cpu_count()),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "packages": ", ".join(f"{k} {v}" for k, v in versions.items()),
        "load": " ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def create_table(dynamodb: Any, name: str, key: str) -> None:
    """An on-demand table keyed by ``key`` (String)."""
    dynamodb.create_table(TableName=name, KeySchema=[{"AttributeName": key, "KeyType": "HASH"}],
                          AttributeDefinitions=[{"AttributeName": key, "AttributeType": "S"}],
                          BillingMode="PAY_PER_REQUEST")


def create_queues(sqs: Any, name: str, max_receive: int = 5) -> tuple[str, str]:
    """A queue with a DLQ (redrive at ``max_receive``); returns (queue URL, DLQ URL)."""
    dlq = sqs.create_queue(QueueName=f"{name}-dlq")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    queue = sqs.create_queue(QueueName=name, Attributes={
        "VisibilityTimeout": "120",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": str(max_receive)}),
    })["QueueUrl"]
    return queue, dlq


def item_bytes(item: dict[str, Any]) -> int:
    """An item's size as DynamoDB bills it: attribute name bytes + value bytes (strings UTF-8, numbers ~digits/2+1)."""
    size = 0
    for name, value in item.items():
        size += len(name.encode())
        (kind, raw), = value.items()
        if kind == "S":
            size += len(raw.encode())
        elif kind == "N":
            digits = raw.lstrip("-").replace(".", "").lstrip("0") or "0"
            size += (len(digits) + 1) // 2 + 1
        elif kind == "B":
            size += len(raw)
        elif kind == "BOOL" or kind == "NULL":
            size += 1
        else:
            size += len(json.dumps(raw)) + 3
    return size


def python312() -> str:
    """The interpreter of the functions' runtime (python3.12), found as the Makefile finds it: pyenv, else PATH."""
    if shutil.which("pyenv"):
        root = subprocess.run(["pyenv", "root"], capture_output=True, text=True, check=False).stdout.strip()
        found = sorted(Path(root, "versions").glob("3.12.*/bin/python3.12")) if root else []
        if found:
            return str(found[-1])
    on_path = shutil.which("python3.12")
    if on_path is None:
        raise RuntimeError("python3.12 (the functions' runtime) is needed: install it with pyenv or on PATH")
    return on_path


#: the SAM CLI's own environment (make .venv-sam/.installed), and its settings directory (no update check)
SAM = Path(__file__).resolve().parent.parent / ".venv-sam" / "bin" / "sam"
SAM_APP_DIR = SAM.parent.parent / "app-dir"


def sam_environment(**extra: str) -> dict[str, str]:
    """The Makefile's SAM_ENV: no telemetry, no update check, dummy credentials, one region, python3.12 first."""
    if not SAM.exists():
        raise AssertionError(f"{SAM} is missing: run `make .venv-sam/.installed .venv-sam/app-dir/metadata.json` "
                             "(make test builds it first)")
    env = dict(os.environ)
    env.update(SAM_CLI_TELEMETRY="0", __SAM_CLI_APP_DIR=str(SAM_APP_DIR), AWS_DEFAULT_REGION="us-east-1",
               AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_EC2_METADATA_DISABLED="true")
    env.pop("AWS_SESSION_TOKEN", None)
    env["PATH"] = f"{Path(python312()).parent}{os.pathsep}{env['PATH']}"
    env.update(extra)
    return env


def sam(*args: str, cwd: Path, timeout: float = 900, **extra_env: str) -> subprocess.CompletedProcess[str]:
    """Run ``sam ARGS`` in ``cwd``; the result (output captured)."""
    return subprocess.run([str(SAM), *args], cwd=cwd, env=sam_environment(**extra_env), capture_output=True,
                          text=True, timeout=timeout, check=False)


def splice_section(report: str, heading: str, section: list[str], prefix: str, rows: list[str]) -> str:
    """``report`` (BENCHMARKS.md) with the section under ``heading`` and the summary rows starting with ``prefix``
    replaced by ``section`` and ``rows``: in place, or the section before ``## Method`` and the rows at the end of
    the summary table. A section run alone (``python -m bench.<section>``) updates the report this way.

    Example:
        >>> text = "# B\\n\\n## Summary\\n\\n| a |\\n| x: old |\\n\\n## X\\n\\nold\\n\\n## Method\\n\\nm\\n"
        >>> print(splice_section(text, "## X", ["## X", "", "new", ""], "| x:", ["| x: new |"]))
        # B
        <BLANKLINE>
        ## Summary
        <BLANKLINE>
        | a |
        | x: new |
        <BLANKLINE>
        ## X
        <BLANKLINE>
        new
        <BLANKLINE>
        ## Method
        <BLANKLINE>
        m
        <BLANKLINE>
    """
    lines = [line for line in report.split("\n") if not line.startswith(prefix)]
    if heading in lines:
        start = lines.index(heading)
        end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
        del lines[start:end]
    at = lines.index("## Method") if "## Method" in lines else len(lines)
    lines[at:at] = section
    summary = lines.index("## Summary") if "## Summary" in lines else None
    if summary is not None:
        last = next(i for i in range(summary + 1, len(lines)) if lines[i].startswith("|"))
        while last + 1 < len(lines) and lines[last + 1].startswith("|"):
            last += 1
        lines[last + 1:last + 1] = rows
    return "\n".join(lines)
