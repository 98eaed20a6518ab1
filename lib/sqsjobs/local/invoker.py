"""Invoke a function in worker processes, killed at the function's Timeout.

Each :class:`FunctionPool` keeps warm workers (one invocation at a time each,
as a Lambda execution environment) and starts a cold one when all are busy.
An invocation past its deadline gets its worker killed, like Lambda; the
caller sees ``timed_out`` and leaves the source to come back on its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqsjobs.local.model import FunctionSpec
from sqsjobs.local.runtime import END_MARKER, PROJECT_DIR_ENV, RESULT_FD_ENV
from sqsjobs.local.spawn import spawn

_INIT_TIMEOUT_S = 30.0  # Lambda's init phase allows 10 s; a loaded laptop needs more
#: the end marker follows the result at once; this only bounds a hang (a loaded machine delays the log pump)
_LOGGED_TIMEOUT_S = 30.0


@dataclass(frozen=True, kw_only=True)
class InvocationResult:
    """How one invocation ended.

    Example:
        >>> InvocationResult(request_id="r", ok=True, payload=None).failed
        False
    """

    request_id: str
    ok: bool
    payload: Any = None
    error_type: str = ""
    error_message: str = ""
    traceback: str = ""
    timed_out: bool = False
    crashed: bool = False
    init_error: bool = False
    duration_ms: float = 0.0
    #: an import failure in one line, ``file:line: Type: message`` (``sqsjobs._broken_code``)
    summary: str = ""

    @property
    def failed(self) -> bool:
        """True when the invocation raised, timed out, crashed or never started."""
        return not self.ok

    def one_line(self) -> str:
        """The failure in one line (an import failure says where: ``file:line: Type: message``)."""
        return self.summary or f"{self.error_type}: {self.error_message}"


LogSink = Callable[[str, str], None]
"""Receives (function logical id, one line the function printed)."""


class _Worker:
    """One worker child process and its three pipes."""

    def __init__(self, spec: FunctionSpec, base_env: dict[str, str], log: LogSink, generation: int = 0) -> None:
        self.spec = spec
        #: the pool's code generation this worker imported (``FunctionPool.restart`` moves it on)
        self.generation = generation
        read_fd, write_fd = os.pipe()
        env = {**base_env, **_lambda_env(spec), **spec.environment, RESULT_FD_ENV: str(write_fd)}
        self.process = spawn(
            [sys.executable, "-m", "sqsjobs.local._child", "worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(spec.code_dir),
            pass_fds=(write_fd,),
            start_new_session=True,
        )
        os.close(write_fd)
        self._results = os.fdopen(read_fd, "rb")
        self._buffer = b""
        self._ended = threading.Condition()
        self._ended_ids: set[str] = set()
        self._output_closed = False
        self._log_thread = threading.Thread(
            target=self._pump_logs, args=(log,), name=f"logs-{spec.logical_id}", daemon=True
        )
        self._log_thread.start()

    def _pump_logs(self, log: LogSink) -> None:
        assert self.process.stdout is not None
        for raw in self.process.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            if line.startswith(END_MARKER):
                with self._ended:
                    self._ended_ids.add(line[len(END_MARKER):])
                    self._ended.notify_all()
                continue
            log(self.spec.logical_id, line)
        with self._ended:  # the worker is gone: no end marker is coming
            self._output_closed = True
            self._ended.notify_all()

    def wait_logged(self, request_id: str, timeout: float = _LOGGED_TIMEOUT_S) -> None:
        """Wait until every line the invocation printed went to the log sink (or the worker's output ended)."""
        with self._ended:
            self._ended.wait_for(lambda: request_id in self._ended_ids or self._output_closed, timeout=timeout)
            self._ended_ids.discard(request_id)

    def read_message(self, deadline: float) -> dict[str, Any] | None:
        """The next JSON message on the result pipe; None at the deadline or when the worker is gone."""
        fd = self._results.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            ready, _, _ = select.select([fd], [], [], remaining)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                # The worker exited: reap it, so the caller reports a crash, not a timeout.
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=5)
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        message: dict[str, Any] = json.loads(line)
        return message

    def send(self, request: dict[str, Any]) -> bool:
        assert self.process.stdin is not None
        try:
            self.process.stdin.write(json.dumps(request).encode() + b"\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError):
            return False
        return True

    def alive(self) -> bool:
        return self.process.poll() is None

    def dump_stacks(self) -> None:
        """Have the worker print every thread's stack (faulthandler) before it is killed."""
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.process.pid, signal.SIGUSR1)
        time.sleep(0.2)

    def kill(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=5)
        with contextlib.suppress(OSError):
            self._results.close()
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        # The log pump drains what the worker printed before it died.
        self._log_thread.join(timeout=2)

    def stop(self) -> None:
        """Close stdin (the runtime loop ends), then make sure the process is gone."""
        if self.process.stdin is not None:
            with contextlib.suppress(OSError):
                self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=2)
        self.kill()


def _lambda_env(spec: FunctionSpec) -> dict[str, str]:
    return {
        "AWS_LAMBDA_FUNCTION_NAME": spec.name,
        "AWS_LAMBDA_FUNCTION_VERSION": "$LATEST",
        "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": str(spec.memory_mb),
        "AWS_LAMBDA_FUNCTION_TIMEOUT": str(spec.timeout),
        "AWS_LAMBDA_LOG_GROUP_NAME": f"/aws/lambda/{spec.name}",
        "AWS_LAMBDA_LOG_STREAM_NAME": "local",
        "SQSJOBS_LOCAL_FUNCTION_ARN": spec.arn,
        "LAMBDA_TASK_ROOT": str(spec.code_dir),
        "_HANDLER": spec.handler,
        "PYTHONUNBUFFERED": "1",
        # No X-Ray daemon on a laptop: Powertools' Tracer would only warn.
        "POWERTOOLS_TRACE_DISABLED": "true",
    }


class FunctionPool:
    """Warm workers for one function; ``invoke`` blocks until the result or the deadline."""

    def __init__(
        self,
        spec: FunctionSpec,
        *,
        base_env: dict[str, str],
        log: LogSink,
        extra_paths: tuple[Path, ...] = (),
        observe: Callable[[FunctionSpec, InvocationResult], None] | None = None,
    ) -> None:
        self.spec = spec
        self._observe = observe
        self._env = {PROJECT_DIR_ENV: os.getcwd(), **base_env,
                     "SQSJOBS_LOCAL_PATHS": os.pathsep.join(str(p) for p in extra_paths)}
        self._log = log
        self._idle: list[_Worker] = []
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.init_error: InvocationResult | None = None
        self.invocations = 0
        self.cold_starts = 0
        self._crashes_pending = 0
        self._generation = 0
        #: the code on disk does not import, but workers of the previous code still serve (``reload``)
        self.stale: InvocationResult | None = None
        self._returned = threading.Condition(self._lock)
        self._reported = ""

    def _acquire(self) -> _Worker | InvocationResult:
        with self._lock:
            give_up = time.monotonic() + self.spec.timeout + _INIT_TIMEOUT_S
            while True:
                while self._idle:
                    worker = self._idle.pop()
                    if worker.alive():
                        return worker
                    self._all.discard(worker)
                if self._closed:
                    return InvocationResult(request_id="", ok=False, error_type="Shutdown", crashed=True)
                if self.stale is None:
                    break
                # The code on disk does not import: no cold start, the workers running the previous code serve.
                self._all = {w for w in self._all if w.alive()}
                if not self._all or time.monotonic() > give_up:
                    self.init_error = self.stale
                    return self.stale
                self._returned.wait(timeout=0.5)
            worker = _Worker(self.spec, self._env, self._log, self._generation)
            self._all.add(worker)
            self.cold_starts += 1
        failure = self._started(worker)
        if failure is None:
            with self._lock:
                self.init_error = None
            return worker
        with self._lock:
            self.init_error = failure
        return failure

    def _started(self, worker: _Worker) -> InvocationResult | None:
        """Wait for a new worker's import; None when it is ready, else the failure (the worker is discarded)."""
        message = worker.read_message(time.monotonic() + _INIT_TIMEOUT_S)
        if message is not None and message.get("type") == "ready":
            return None
        self._discard(worker)
        if message is None:
            return InvocationResult(
                request_id="", ok=False, init_error=True, error_type="Runtime.InitTimeout",
                error_message=f"the worker did not finish importing {self.spec.handler} in time",
                summary=f"{self.spec.handler}: the import did not finish within {_INIT_TIMEOUT_S:.0f} s",
            )
        return InvocationResult(
            request_id="", ok=False, init_error=True, error_type=str(message.get("error_type")),
            error_message=str(message.get("error_message")), traceback=str(message.get("traceback", "")),
            summary=str(message.get("summary", "")),
        )

    def reload(self) -> InvocationResult | None:
        """Load the code again, unless it no longer imports: then the previous code keeps serving.

        A new worker imports the code first. When it is ready it replaces the idle workers (busy
        ones stop when their invocation ends, as on a Lambda deploy); when it fails, the workers
        running the previous code go on serving, no cold start is made, and the failure is returned
        (``stale`` holds it until a reload imports).
        """
        with self._lock:
            if self._closed:
                return None
            candidate = _Worker(self.spec, self._env, self._log, self._generation + 1)
            self._all.add(candidate)
            self.cold_starts += 1
        failure = self._started(candidate)
        with self._lock:
            if failure is not None:
                serving = any(w.alive() for w in self._all)
                self.stale = failure if serving else None
                if not serving:
                    self.init_error = failure
                return failure
            self._generation += 1
            idle, self._idle = self._idle, [candidate]
            for worker in idle:
                self._all.discard(worker)
            self.stale = None
            self.init_error = None
            self._returned.notify_all()
        for worker in idle:
            worker.stop()
        return None

    def report_once(self, failure: InvocationResult) -> bool:
        """True the first time ``failure``'s line is seen since the code last imported (say it once)."""
        with self._lock:
            if failure.one_line() == self._reported:
                return False
            self._reported = failure.one_line()
            return True

    def imported(self) -> None:
        """The code imports again: a later failure is news."""
        with self._lock:
            self._reported = ""

    def _discard(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)

    def warm(self) -> InvocationResult | None:
        """Start one worker now; return the import failure if the handler cannot load."""
        acquired = self._acquire()
        if isinstance(acquired, InvocationResult):
            return acquired
        self._release(acquired)
        return None

    def _release(self, worker: _Worker) -> None:
        with self._lock:
            if self._closed or not worker.alive() or worker.generation != self._generation:
                self._all.discard(worker)
                stop = True
            else:
                self._idle.append(worker)
                self._returned.notify()
                stop = False
        if stop:
            worker.stop()

    def invoke(self, event: Any) -> InvocationResult:
        """Run the handler on ``event`` with the function's Timeout enforced."""
        result = self._invoke(event)
        if self._observe is not None and not result.init_error:
            self._observe(self.spec, result)
        return result

    def _invoke(self, event: Any) -> InvocationResult:
        acquired = self._acquire()
        if isinstance(acquired, InvocationResult):
            return acquired
        worker = acquired
        request_id = str(uuid.uuid4())
        started = time.monotonic()
        deadline_wall_ms = time.time() * 1000 + self.spec.timeout * 1000
        with self._lock:
            self.invocations += 1
            crash = self._crashes_pending > 0
            self._crashes_pending -= int(crash)
        request = {"request_id": request_id, "deadline_ms": deadline_wall_ms, "event": event, "crash": crash}
        if not worker.send(request):
            self._discard(worker)
            return InvocationResult(request_id=request_id, ok=False, crashed=True, error_type="Runtime.ExitError",
                                    error_message="the worker exited before the invocation")
        message = worker.read_message(started + self.spec.timeout)
        elapsed_ms = (time.monotonic() - started) * 1000
        if message is None:
            timed_out = worker.alive()
            if timed_out:
                worker.dump_stacks()
            self._discard(worker)
            if timed_out:
                return InvocationResult(
                    request_id=request_id, ok=False, timed_out=True, duration_ms=elapsed_ms,
                    error_type="Sandbox.Timedout",
                    error_message=f"Task timed out after {self.spec.timeout:.2f} seconds",
                )
            return InvocationResult(
                request_id=request_id, ok=False, crashed=True, duration_ms=elapsed_ms,
                error_type="Runtime.ExitError",
                error_message=f"the worker exited with code {worker.process.returncode} during the invocation",
            )
        worker.wait_logged(request_id)
        self._release(worker)
        return InvocationResult(
            request_id=request_id, ok=bool(message.get("ok")), payload=message.get("payload"),
            error_type=str(message.get("error_type", "")), error_message=str(message.get("error_message", "")),
            traceback=str(message.get("traceback", "")), duration_ms=elapsed_ms,
        )

    def restart(self) -> None:
        """Load the code again: idle workers stop now, busy ones when their invocation ends (as a Lambda deploy).

        The next invocation starts a cold worker that imports the handler afresh.
        """
        with self._lock:
            self._generation += 1
            self.stale = None
            idle, self._idle = self._idle, []
            for worker in idle:
                self._all.discard(worker)
        for worker in idle:
            worker.stop()

    def crash_next(self, count: int = 1) -> None:
        """Make the next ``count`` invocations die after taking their event, before the handler runs."""
        with self._lock:
            self._crashes_pending += count

    def kill_busy(self) -> int:
        """Kill every worker that is running an invocation now (fault injection); return how many."""
        with self._lock:
            busy = [w for w in self._all if w not in self._idle]
        for worker in busy:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(worker.process.pid, signal.SIGKILL)
        return len(busy)

    def close(self) -> None:
        """Stop every worker; busy ones are killed."""
        with self._lock:
            self._closed = True
            self._returned.notify_all()
            workers = list(self._all)
            self._all.clear()
            self._idle.clear()
        for worker in workers:
            worker.stop()
