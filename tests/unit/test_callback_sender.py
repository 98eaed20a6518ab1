"""The AWS callback sender: what it sends (checked against botocore's models by its Stubber), and what the
services' errors mean: closed (the answer ends), or an error the delivery comes back for."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import botocore.session
import pytest
from botocore.stub import Stubber

from sqsjobs import ConfigurationError, DurableCallback, TaskToken
from sqsjobs.workflows._callback_sender import AwsCallbackSender, CallbackClosed
from sqsjobs.workflows._callbacks import DEAD_LETTERED, MAX_TASK_CAUSE, failed, succeeded

CB = DurableCallback("Y2FsbGJhY2s+Lw==")
TOKEN = TaskToken("AQB8AAAAKgAAAAMAAAAAAAAAAc6vZ")


def client(service: str) -> Any:
    return botocore.session.get_session().create_client(
        service, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s")


#: botocore from 1.42.1 has the durable callback API; `make check-oldest` runs these tests on botocore 1.36
HAS_DURABLE = "SendDurableExecutionCallbackSuccess" in client("lambda").meta.service_model.operation_names
durable_api = pytest.mark.skipif(not HAS_DURABLE, reason="this botocore has no durable callback API: "
                                 "test_this_botocore_without_the_durable_api_says_so runs instead")


@pytest.mark.skipif(HAS_DURABLE, reason="this botocore has the durable API: the tests marked durable_api run")
def test_this_botocore_without_the_durable_api_says_so() -> None:
    with pytest.raises(ConfigurationError, match=r"botocore 1\.42\.1 or later"):
        AwsCallbackSender(lambda service: client(service)).answer(CB, succeeded(None))


@durable_api
def test_a_durable_success_sends_the_result_as_bytes() -> None:
    lam = client("lambda")
    with Stubber(lam) as stub:
        stub.add_response("send_durable_execution_callback_success", {},
                          {"CallbackId": CB.id, "Result": b'{"n":1}'})
        AwsCallbackSender(lambda service: lam).answer(CB, succeeded('{"n":1}'))
        stub.assert_no_pending_responses()


@durable_api
def test_a_durable_failure_sends_type_message_and_data() -> None:
    lam = client("lambda")
    answer = failed(DEAD_LETTERED, key="k", job="j", reason="exhausted", last_error="IOError: x")
    with Stubber(lam) as stub:
        stub.add_response("send_durable_execution_callback_failure", {}, {"CallbackId": CB.id, "Error": {
            "ErrorType": DEAD_LETTERED, "ErrorMessage": "exhausted: IOError: x", "ErrorData": answer.data}})
        AwsCallbackSender(lambda service: lam).answer(CB, answer)
        stub.assert_no_pending_responses()


@durable_api
@pytest.mark.parametrize(("code", "status"), [("CallbackTimeoutException", 400), ("ResourceNotFoundException", 404),
                                              ("", 404)])
def test_a_closed_durable_callback_ends_the_answer(code: str, status: int) -> None:
    lam = client("lambda")
    with Stubber(lam) as stub:
        stub.add_client_error("send_durable_execution_callback_success", service_error_code=code,
                              http_status_code=status)
        with pytest.raises(CallbackClosed):
            AwsCallbackSender(lambda service: lam).answer(CB, succeeded(None))


@durable_api
@pytest.mark.parametrize("code", ["TooManyRequestsException", "ServiceException", "AccessDeniedException"])
def test_other_errors_are_raised_for_the_delivery_to_come_back(code: str) -> None:
    lam = client("lambda")
    with Stubber(lam) as stub:
        stub.add_client_error("send_durable_execution_callback_heartbeat", service_error_code=code,
                              http_status_code=429 if code.startswith("TooMany") else 500)
        with pytest.raises(Exception) as raised:
            AwsCallbackSender(lambda service: lam).heartbeat(CB)
        assert not isinstance(raised.value, CallbackClosed)


def test_a_task_failure_carries_error_and_a_cut_cause() -> None:
    states = client("stepfunctions")
    answer = failed(DEAD_LETTERED, key="k", job="j", reason="permanent", last_error="E" * 40_000)
    sent: list[dict[str, Any]] = []
    states.meta.events.register("provide-client-params.sfn.SendTaskFailure",
                                lambda params, **_: sent.append(dict(params)))
    with Stubber(states) as stub:
        stub.add_response("send_task_failure", {}, None)
        AwsCallbackSender(lambda service: states).answer(TOKEN, answer)
    (params,) = sent
    assert params["error"] == DEAD_LETTERED and len(params["cause"]) == MAX_TASK_CAUSE
    assert params["cause"].startswith('{"job":"j","key":"k","last_error":"EEE') and params["cause"].endswith("…")


def test_a_task_success_sends_json_output() -> None:
    states = client("stepfunctions")
    with Stubber(states) as stub:
        stub.add_response("send_task_success", {}, {"taskToken": TOKEN.id, "output": "null"})
        AwsCallbackSender(lambda service: states).answer(TOKEN, succeeded(None))
        stub.assert_no_pending_responses()


@pytest.mark.parametrize("code", ["TaskTimedOut", "InvalidToken", "TaskDoesNotExist"])
def test_a_closed_task_token_ends_the_answer(code: str) -> None:
    states = client("stepfunctions")
    with Stubber(states) as stub:
        stub.add_client_error("send_task_heartbeat", service_error_code=code, http_status_code=400)
        with pytest.raises(CallbackClosed) as closed:
            AwsCallbackSender(lambda service: states).heartbeat(TOKEN)
    assert closed.value.code == code


def test_a_botocore_without_the_durable_api_says_what_to_upgrade() -> None:
    old = SimpleNamespace(meta=SimpleNamespace(service_model=SimpleNamespace(operation_names=["Invoke"])))
    with pytest.raises(ConfigurationError, match=r"botocore 1\.42\.1 or later"):
        AwsCallbackSender(lambda service: old).answer(CB, succeeded(None))


def test_clients_are_made_on_the_first_answer_only() -> None:
    made: list[str] = []
    states = client("stepfunctions")
    sender = AwsCallbackSender(lambda service: made.append(service) or states)
    assert made == []
    with Stubber(states) as stub:
        stub.add_response("send_task_heartbeat", {}, {"taskToken": TOKEN.id})
        stub.add_response("send_task_heartbeat", {}, {"taskToken": TOKEN.id})
        sender.heartbeat(TOKEN)
        sender.heartbeat(TOKEN)
    assert made == ["stepfunctions"]
