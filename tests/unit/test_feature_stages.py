"""The optional features' stages are built by ``sqsjobs._feature_stages`` under the names the runtime gives them.

``Runtime._stages`` (lib/sqsjobs/_runtime.py) names each ``OnDemand`` stage and
``_feature_stages.build_stage`` builds it by that name: the two lists must agree,
or a feature's first delivery would fail to build its stage. The workflow stage's
sender of a group's callbacks and a chain's next steps moved there from the
runtime; what it answers for a message SQS refused is checked here.
"""

from __future__ import annotations

from typing import Any

from botocore.stub import Stubber

from sqsjobs import InMemoryStore, JobApp
from sqsjobs._clients import sqs_client
from sqsjobs._feature_stages import BUILDERS, workflow_stage
from sqsjobs.worker._stages import OnDemand

QUEUE = "https://sqs.eu-west-1.amazonaws.com/123456789012/jobs"


class Recorded:
    """A logger that keeps what was logged at ``error``."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, dict[str, Any]]] = []

    def error(self, text: str, extra: dict[str, Any]) -> None:
        self.errors.append((text, extra))


def test_every_stage_the_runtime_builds_on_demand_is_built_under_its_name() -> None:
    app = JobApp(queue_url=QUEUE, store=InMemoryStore())
    on_demand = [stage for stage in app.runtime._stages() if isinstance(stage, OnDemand)]
    assert [stage.name for stage in on_demand] == ["DebounceStage", "LimitsStage", "WorkflowStage", "CallbackStage"]
    assert set(BUILDERS) == {stage.name for stage in on_demand}
    for stage in on_demand:
        assert type(stage.stage).__name__ == stage.name  # .stage builds it, as a concerned delivery would


def test_the_workflow_stage_says_which_followups_were_sent_and_logs_each_that_was_not() -> None:
    client = sqs_client(region_name="eu-west-1", aws_access_key_id="k", aws_secret_access_key="s")
    logger = Recorded()
    app = JobApp(queue_url=QUEUE, store=InMemoryStore(), sqs_client=client, logger=logger)

    @app.job("invoice-email", key="invoice-email:{invoice_id}")
    def send_invoice_email(invoice_id: int) -> None: ...

    messages = [send_invoice_email.message(invoice_id=n) for n in (1, 2, 3)]
    send = workflow_stage(app.runtime).send
    assert send([]) == []
    with Stubber(client) as stub:
        stub.add_response("send_message_batch", {
            "Successful": [{"Id": "0", "MessageId": "m-0", "MD5OfMessageBody": "x"},
                           {"Id": "2", "MessageId": "m-2", "MD5OfMessageBody": "x"}],
            "Failed": [{"Id": "1", "SenderFault": True, "Code": "InvalidParameterValue", "Message": "too big"}]})
        assert send(messages) == [True, False, True]
    assert logger.errors == [("could not send a callback or a chain's next step",
                              {"key": "invoice-email:2", "error": "InvalidParameterValue: too big"})]
