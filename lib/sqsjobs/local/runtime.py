"""The function worker process: Lambda's runtime loop, one invocation at a time.

Runs in a child started by :mod:`sqsjobs.local.invoker`. It imports the
handler once (a cold start), reports ``ready`` or the import traceback, then
serves invocations read as JSON lines from stdin, answering on the result
pipe. The function's own prints go to stdout, which the parent shows and
scans for EMF metric lines. The parent enforces the timeout by killing this
process, as Lambda does; nothing here needs to cooperate.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import signal
import sys
import time
import traceback
from typing import Any, TextIO

RESULT_FD_ENV = "SQSJOBS_LOCAL_RESULT_FD"
#: the directory of the process that runs the cloud: import errors show paths relative to it
PROJECT_DIR_ENV = "SQSJOBS_LOCAL_PROJECT_DIR"
END_MARKER = "\x00sqsjobs-local END RequestId: "


class LambdaContext:
    """The context object a handler receives, with a real remaining-time clock.

    Example:
        >>> ctx = LambdaContext(request_id="r-1", deadline_ms=time.time() * 1000 + 3000)
        >>> 0 < ctx.get_remaining_time_in_millis() <= 3000
        True
    """

    def __init__(self, *, request_id: str, deadline_ms: float) -> None:
        self.aws_request_id = request_id
        self.function_name = os.environ.get("AWS_LAMBDA_FUNCTION_NAME", "local")
        self.function_version = os.environ.get("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
        self.invoked_function_arn = os.environ.get("SQSJOBS_LOCAL_FUNCTION_ARN", "")
        self.memory_limit_in_mb = int(os.environ.get("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "128"))
        self.log_group_name = os.environ.get("AWS_LAMBDA_LOG_GROUP_NAME", "")
        self.log_stream_name = os.environ.get("AWS_LAMBDA_LOG_STREAM_NAME", "")
        self.identity = None
        self.client_context = None
        self._deadline_ms = deadline_ms

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds until the parent kills this invocation."""
        return max(0, int(self._deadline_ms - time.time() * 1000))


def _load_handler(spec: str) -> Any:
    module_name, _, function_name = spec.rpartition(".")
    module = importlib.import_module(module_name.replace("/", "."))
    return getattr(module, function_name)


def _answer(channel: TextIO, message: dict[str, Any]) -> None:
    try:
        line = json.dumps(message)
    except (TypeError, ValueError) as exc:
        # Lambda fails an invocation whose result cannot be serialized.
        line = json.dumps(
            {"type": "result", "request_id": message.get("request_id"), "ok": False,
             "error_type": "Runtime.MarshalError", "error_message": str(exc), "traceback": ""}
        )
    channel.write(line + "\n")
    channel.flush()


def _end(request_id: str) -> None:
    """Mark the end of an invocation's output, so the parent has every log line before the result."""
    sys.stdout.write(f"{END_MARKER}{request_id}\n")
    sys.stdout.flush()


def serve() -> None:
    """Import the handler named by ``_HANDLER`` and serve invocations until stdin closes.

    Example (what the parent runs; not by hand)::

        _HANDLER=worker.handler SQSJOBS_LOCAL_RESULT_FD=5 python -m sqsjobs.local._child worker"""
    channel = os.fdopen(int(os.environ[RESULT_FD_ENV]), "w")
    # At a timeout the parent asks for every thread's stack before the kill,
    # so the log shows where the handler was stuck.
    faulthandler.register(signal.SIGUSR1, file=sys.stdout, all_threads=True)
    task_root = os.environ.get("LAMBDA_TASK_ROOT", os.getcwd())
    for path in reversed(os.environ.get("SQSJOBS_LOCAL_PATHS", "").split(os.pathsep)):
        if path:
            sys.path.insert(0, path)
    sys.path.insert(0, task_root)
    try:
        handler = _load_handler(os.environ["_HANDLER"])
    except BaseException as exc:  # the import of user code can raise anything
        from sqsjobs._broken_code import one_line

        _answer(channel, {"type": "init_error", "error_type": type(exc).__name__,
                          "error_message": str(exc), "traceback": traceback.format_exc(),
                          "summary": one_line(exc, [task_root], base=os.environ.get(PROJECT_DIR_ENV))})
        return
    _answer(channel, {"type": "ready"})
    for line in sys.stdin:
        request = json.loads(line)
        if request.get("crash"):
            # Fault injection: die like an execution environment that is lost
            # (OOM, host failure) after taking the batch, before any handler code.
            os._exit(137)
        context = LambdaContext(request_id=request["request_id"], deadline_ms=request["deadline_ms"])
        try:
            payload = handler(request["event"], context)
        except Exception as exc:
            traceback.print_exc(file=sys.stdout)
            _end(request["request_id"])
            _answer(channel, {"type": "result", "request_id": request["request_id"], "ok": False,
                              "error_type": type(exc).__name__, "error_message": str(exc),
                              "traceback": traceback.format_exc()})
        else:
            _end(request["request_id"])
            _answer(channel, {"type": "result", "request_id": request["request_id"], "ok": True,
                              "payload": payload})
