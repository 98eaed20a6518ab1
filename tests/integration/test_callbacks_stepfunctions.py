"""A Step Functions task token awaits an sqsjobs job, on stock moto's Step Functions (issue 36).

moto runs a state machine only when asked (``execute_state_machine``): then a ``.waitForTaskToken`` task sends
the job's envelope, with ``"callback": {"to": "states", "id.$": "$$.Task.Token"}``, to the jobs queue, and the
worker's ``SendTaskSuccess``/``SendTaskFailure`` (``AwsCallbackSender``, the client a deployed worker uses)
ends the execution. Two of moto's quirks are asserted around (tests/integration, not a claim about AWS): it
drops ``cause``, and a closed token answers ``InvalidToken`` where AWS documents ``TaskTimedOut`` (both end the
callback: workflows/_callback_sender.py), and takes a repeated SendTaskFailure silently. The failure's cause
is checked on the request the sender builds (tests/unit/test_callback_sender.py).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from aws_support import MAX_ATTEMPTS, Aws, create_queues, create_table, trust_statements
from moto import mock_aws

from sqsjobs import JobApp, Outcome, PermanentError, TaskToken
from sqsjobs.testing import receive_event
from sqsjobs.workflows._callback_sender import AwsCallbackSender, CallbackClosed
from sqsjobs.workflows._callbacks import succeeded

pytestmark = pytest.mark.moto
ROLE = "arn:aws:iam::123456789012:role/states-runs-sqsjobs"


def definition(queue_url: str) -> str:
    """A state machine that hands a job to sqsjobs and waits for its answer."""
    return json.dumps({"StartAt": "Resize", "States": {"Resize": {
        "Type": "Task", "Resource": "arn:aws:states:::sqs:sendMessage.waitForTaskToken", "End": True,
        "Parameters": {"QueueUrl": queue_url, "MessageBody": {
            "v": 1, "job": "resize", "args": {"image_id.$": "$.image_id"},
            "callback": {"to": "states", "id.$": "$$.Task.Token"}}}}}})


@pytest.fixture
def aws() -> Iterator[tuple[Aws, Any]]:
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}}):
        sqs = boto3.client("sqs", region_name="us-east-1")
        dynamodb = boto3.client("dynamodb", region_name="us-east-1")
        states = boto3.client("stepfunctions", region_name="us-east-1")
        queue_url, dlq_url = create_queues(sqs, "jobs")
        create_table(dynamodb, "idempotency")
        trust_statements(dynamodb, "idempotency")
        yield Aws(sqs=sqs, dynamodb=dynamodb, queue_url=queue_url, dlq_url=dlq_url, table="idempotency"), states


@pytest.fixture
def app(aws: tuple[Aws, Any], clock: Any, rng: Any) -> JobApp:
    cloud, states = aws
    app = JobApp(queue_url=cloud.queue_url, dlq_url=cloud.dlq_url, table_name=cloud.table, max_attempts=MAX_ATTEMPTS,
                 sqs_client=cloud.sqs, dynamodb_client=cloud.dynamodb, clock=clock, random=rng,
                 emit_metrics=lambda line: None, sleep=lambda seconds: None,
                 callback_sender=AwsCallbackSender(lambda service: {"stepfunctions": states}[service]))

    @app.job("resize", key="resize:{image_id}", store_result=True, callbacks=True)
    def resize(image_id: int) -> dict[str, Any]:
        if image_id < 0:
            raise PermanentError(f"image {image_id} does not exist")
        return {"thumb": f"s3://thumbs/{image_id}.png"}

    return app


def start(aws: tuple[Aws, Any], name: str, image_id: int) -> str:
    cloud, states = aws
    machine = states.create_state_machine(name=f"await-{name}", definition=definition(cloud.queue_url),
                                          roleArn=ROLE)["stateMachineArn"]
    arn: str = states.start_execution(stateMachineArn=machine, name=name,
                                      input=json.dumps({"image_id": image_id}))["executionArn"]
    return arn


def handed_over(cloud: Aws) -> dict[str, Any]:
    """The batch the execution's task sent (a long poll returns as soon as it is there)."""
    return receive_event(cloud.sqs, cloud.queue_url, wait=20)


def ended(states: Any, execution: str) -> dict[str, Any]:
    """The execution once it left RUNNING (moto's interpreter resumes it on its own thread after the answer;
    the loop is bounded by its count, and only waits for a state change, never times one)."""
    for _ in range(600):
        described: dict[str, Any] = states.describe_execution(executionArn=execution)
        if described["status"] != "RUNNING":
            return described
        threading.Event().wait(0.05)
    raise AssertionError(f"{execution} is still running")


def test_a_task_token_receives_the_jobs_result(app: JobApp, aws: tuple[Aws, Any]) -> None:
    cloud, states = aws
    execution = start(aws, "ok", 7)
    result = app.process_batch(handed_over(cloud))
    assert [d.outcome for d in result.deliveries] == [Outcome.SUCCEEDED]
    described = ended(states, execution)
    assert described["status"] == "SUCCEEDED"
    assert json.loads(described["output"]) == {"thumb": "s3://thumbs/7.png"}


def test_a_task_token_receives_a_dead_letters_error(app: JobApp, aws: tuple[Aws, Any]) -> None:
    cloud, states = aws
    execution = start(aws, "dead", -1)
    result = app.process_batch(handed_over(cloud))
    assert [d.outcome for d in result.deliveries] == [Outcome.DEAD_LETTERED] and result.failures == ()
    described = ended(states, execution)
    assert (described["status"], described.get("error")) == ("FAILED", "sqsjobs.DeadLettered")


def test_a_closed_token_ends_the_callback(aws: tuple[Aws, Any]) -> None:
    cloud, states = aws
    execution = start(aws, "closed", 3)
    body = json.loads(handed_over(cloud)["Records"][0]["body"])
    token = TaskToken(body["callback"]["id"])
    sender = AwsCallbackSender(lambda service: states)
    sender.answer(token, succeeded('{"thumb": null}'))
    assert ended(states, execution)["status"] == "SUCCEEDED"
    # moto: InvalidToken (AWS documents TaskTimedOut); moto takes a repeated SendTaskFailure silently
    with pytest.raises(CallbackClosed) as closed:
        sender.answer(token, succeeded('{"thumb": null}'))
    assert closed.value.code in ("InvalidToken", "TaskTimedOut")
    with pytest.raises(CallbackClosed):
        sender.heartbeat(token)
