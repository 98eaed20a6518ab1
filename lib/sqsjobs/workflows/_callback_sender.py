"""Sending a callback's answer: the Lambda durable API or Step Functions, and what their errors mean.

``CallbackSender`` is what the worker's callback stage calls
(``workflows/_callback_stage.py``); ``AwsCallbackSender`` is the one a
deployed worker uses, with clients made on the first answer (never at import,
never for a batch that answers nothing). A test injects its own sender
(``JobApp(callback_sender=...)``, ``app.testing(callbacks=...)``): the
durable testing SDK's local runner receives answers through
``sqsjobs.testing.RunnerCallbacks``.

Every send ends one of three ways:

- **taken**: the service recorded the answer;
- ``CallbackClosed``: the callback was closed already (answered, timed out,
  its execution ended, or it never existed), which ends it: Lambda's
  ``CallbackTimeoutException`` and ``ResourceNotFoundException`` (the durable
  testing SDK's runner answers HTTP 404 with no error code), Step Functions'
  ``TaskTimedOut``, ``InvalidToken`` and ``TaskDoesNotExist``; a request the
  service refuses as invalid (``InvalidParameterValueException``,
  ``InvalidOutput``) ends it too, since no retry can change it;
- any other error (throttling, a 5xx after botocore's own retries, access
  denied): the stage holds the delivery back and its redelivery sends again.

``SendDurableExecutionCallback*`` exist in botocore from 1.42.1; sqsjobs admits
botocore from 1.36, so the sender checks the client's model (its public
``meta.service_model.operation_names``) and says what to upgrade.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from sqsjobs._errors import ConfigurationError
from sqsjobs.enqueue._envelope import CallbackTo
from sqsjobs.workflows._callbacks import Answer, task_failure

#: error codes that say a callback is closed already (or cannot be answered at all): the answer ends there
CLOSED_CODES = frozenset({
    "CallbackTimeoutException", "ResourceNotFoundException", "InvalidParameterValueException", "404",
    "TaskTimedOut", "InvalidToken", "TaskDoesNotExist", "InvalidOutput",
})
DURABLE_OPERATION = "SendDurableExecutionCallbackSuccess"


class CallbackClosed(Exception):
    """The service said the callback is closed (or can never be answered): nothing more to send."""

    def __init__(self, code: str, message: str = "") -> None:
        super().__init__(f"{code}: {message}" if message else code)
        self.code = code


class CallbackSender(Protocol):
    """Sends one answer (``answer``) or a heartbeat; raises ``CallbackClosed`` or any error to retry."""

    def answer(self, callback: CallbackTo, answer: Answer) -> None: ...

    def heartbeat(self, callback: CallbackTo) -> None: ...


def closed_code(error: BaseException) -> str | None:
    """The code of a botocore ``ClientError`` that closes the callback, else None (public attributes only).

    Example:
        >>> class Fake(Exception):
        ...     response = {"Error": {"Code": "TaskTimedOut"}, "ResponseMetadata": {"HTTPStatusCode": 400}}
        >>> closed_code(Fake()), closed_code(ValueError())
        ('TaskTimedOut', None)
    """
    response = getattr(error, "response", None)
    if not isinstance(response, dict):
        return None
    code = str((response.get("Error") or {}).get("Code") or "")
    status = (response.get("ResponseMetadata") or {}).get("HTTPStatusCode")
    if code in CLOSED_CODES:
        return code
    return "404" if status == 404 else None


class AwsCallbackSender:
    """Answers through the Lambda and Step Functions APIs (each client made on first use, by ``make_client``)."""

    def __init__(self, make_client: Callable[[str], Any]) -> None:
        self._make = make_client
        self._clients: dict[str, Any] = {}

    def _client(self, service: str) -> Any:
        client = self._clients.get(service)
        if client is None:
            client = self._make("lambda" if service == "lambda" else "stepfunctions")
            if service == "lambda" and DURABLE_OPERATION not in client.meta.service_model.operation_names:
                import botocore

                raise ConfigurationError(
                    f"this botocore ({botocore.__version__}) has no {DURABLE_OPERATION}: durable callbacks need "
                    "botocore 1.42.1 or later in the worker's bundle")
            self._clients[service] = client
        return client

    def answer(self, callback: CallbackTo, answer: Answer) -> None:
        client = self._client(callback.service)
        try:
            if callback.service == "lambda":
                if answer.succeeded:
                    client.send_durable_execution_callback_success(
                        CallbackId=callback.id, Result=(answer.payload or "null").encode())
                else:
                    error = {"ErrorType": answer.error_type, "ErrorMessage": answer.message}
                    if answer.data is not None:
                        error["ErrorData"] = answer.data
                    client.send_durable_execution_callback_failure(CallbackId=callback.id, Error=error)
            elif answer.succeeded:
                client.send_task_success(taskToken=callback.id, output=answer.payload or "null")
            else:
                error_name, cause = task_failure(answer)
                client.send_task_failure(taskToken=callback.id, error=error_name, cause=cause)
        except Exception as error:
            code = closed_code(error)
            if code is not None:
                raise CallbackClosed(code, str(error)) from error
            raise

    def heartbeat(self, callback: CallbackTo) -> None:
        client = self._client(callback.service)
        try:
            if callback.service == "lambda":
                client.send_durable_execution_callback_heartbeat(CallbackId=callback.id)
            else:
                client.send_task_heartbeat(taskToken=callback.id)
        except Exception as error:
            code = closed_code(error)
            if code is not None:
                raise CallbackClosed(code, str(error)) from error
            raise
