"""The redrive engine against moto's SQS: filters, batches, ordering, guards, interruptions."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError, EndpointConnectionError
from moto import mock_aws

from sqsjobs.ops._dlq_letters import ATTR_REDRIVE_COUNT, STALE_REASON_ATTRIBUTES, dedup_id
from sqsjobs.ops._queues import queue_depth
from sqsjobs.ops._redrive import Redrive, redrive
from sqsjobs.ops._redrive_options import RedriveOptions

REGION = "us-east-1"


@pytest.fixture
def sqs() -> Any:
    with mock_aws():
        yield boto3.client("sqs", region_name=REGION)


def make_queues(sqs: Any, name: str = "jobs", *, fifo: bool = False) -> tuple[str, str]:
    """A source queue whose redrive policy points at its DLQ (as the template builds them)."""
    suffix = ".fifo" if fifo else ""
    extra = {"FifoQueue": "true"} if fifo else {}
    dlq = sqs.create_queue(QueueName=f"{name}-dlq{suffix}", Attributes=extra)["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    policy = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": 3})
    src = sqs.create_queue(QueueName=f"{name}{suffix}", Attributes={**extra, "RedrivePolicy": policy})[
        "QueueUrl"
    ]
    return src, dlq


def dead_letter(
    sqs: Any,
    dlq: str,
    *,
    job: str = "invoice-email",
    key: int = 1,
    source: str | None = None,
    reason: str = "exhausted",
    error_type: str = "TimeoutError",
    redrive_count: int | None = None,
    body: str | None = None,
    group: str | None = None,
    extra: dict[str, str] | None = None,
) -> str:
    """Put one message in the DLQ the way the worker writes it (wire contract)."""
    attrs: dict[str, dict[str, str]] = {
        "sqsjobs.job": {"DataType": "String", "StringValue": job},
        "sqsjobs.trace_id": {"DataType": "String", "StringValue": f"trace-{key}"},
        "sqsjobs.reason": {"DataType": "String", "StringValue": reason},
        "sqsjobs.error_type": {"DataType": "String", "StringValue": error_type},
        "sqsjobs.error_message": {"DataType": "String", "StringValue": "boom"},
        "sqsjobs.attempts": {"DataType": "Number", "StringValue": "3"},
        "sqsjobs.original_message_id": {"DataType": "String", "StringValue": f"orig-{key}"},
        "sqsjobs.first_receive_time": {"DataType": "Number", "StringValue": "1767225600000"},
    }
    if source is not None:
        attrs["sqsjobs.source_queue"] = {"DataType": "String", "StringValue": source}
    if redrive_count is not None:
        attrs[ATTR_REDRIVE_COUNT] = {"DataType": "Number", "StringValue": str(redrive_count)}
    for name, value in (extra or {}).items():
        attrs[name] = {"DataType": "String", "StringValue": value}
    if body is None:
        body = json.dumps(
            {"v": 1, "job": job, "job_version": 1, "key": f"{job}:{key}", "args": {"id": key},
             "enqueued_at": 1767225600.0}
        )
    kwargs: dict[str, Any] = {"QueueUrl": dlq, "MessageBody": body, "MessageAttributes": attrs}
    if group is not None:
        kwargs.update(MessageGroupId=group, MessageDeduplicationId=f"dlq-{key}")
    return str(sqs.send_message(**kwargs)["MessageId"])


def drain(sqs: Any, url: str) -> list[dict[str, Any]]:
    """Every message in ``url`` (received, then deleted)."""
    out: list[dict[str, Any]] = []
    while True:
        msgs = sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, MessageAttributeNames=["All"], AttributeNames=["All"],
            VisibilityTimeout=30, WaitTimeSeconds=0,
        ).get("Messages", [])
        if not msgs:
            return out
        out.extend(msgs)
        for m in msgs:
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def visible(sqs: Any, url: str) -> int:
    attrs = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attrs["Attributes"]["ApproximateNumberOfMessages"])


def options(dlq: str, **kw: Any) -> RedriveOptions:
    return RedriveOptions(dlq=dlq, wait_time_seconds=0, **kw)


class Calls:
    """Records SQS operations through botocore's event hooks, in order, with their entry counts."""

    def __init__(self, client: Any) -> None:
        self.log: list[tuple[str, int]] = []
        client.meta.events.register("provide-client-params.sqs.*", self._record)

    def _record(self, params: dict[str, Any], model: Any, **_: Any) -> None:
        self.log.append((model.name, len(params.get("Entries", []))))

    def count(self, name: str) -> int:
        return sum(1 for op, _ in self.log if op == name)

    def entries(self, name: str) -> list[int]:
        return [n for op, n in self.log if op == name]


class FlakyClient:
    """Wraps a client; ``fail[op] = (n, exc)`` raises ``exc`` on the n-th call (1-based) of ``op``.

    ``after=True`` makes the call first (the request reached SQS), then raises,
    like a connection lost while the response was on its way.
    """

    def __init__(self, client: Any, op: str, n: int, exc: BaseException, *, after: bool = False) -> None:
        self._client, self._op, self._n, self._exc, self._after = client, op, n, exc, after
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        real = getattr(self._client, name)
        if name != self._op:
            return real

        def call(**kwargs: Any) -> Any:
            self.calls[name] += 1
            if self.calls[name] == self._n:
                if self._after:
                    real(**kwargs)
                raise self._exc
            return real(**kwargs)

        return call


def test_moves_body_and_attributes_back_and_drops_stale_reasons(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src, extra={"tenant": "acme"})

    summary = redrive(options(dlq), sqs_client=sqs)

    assert (summary.moved, summary.failed, summary.left, summary.stopped) == (1, 0, 0, "drained")
    [msg] = drain(sqs, src)
    assert json.loads(msg["Body"])["key"] == "invoice-email:1"
    attrs = msg["MessageAttributes"]
    assert attrs["sqsjobs.job"]["StringValue"] == "invoice-email"
    assert attrs["sqsjobs.trace_id"]["StringValue"] == "trace-1"
    assert attrs["tenant"]["StringValue"] == "acme"
    assert attrs[ATTR_REDRIVE_COUNT] == {"DataType": "Number", "StringValue": "1"}
    assert not STALE_REASON_ATTRIBUTES & set(attrs)
    assert drain(sqs, dlq) == []


def test_redrive_count_increments_each_time(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, source=src, redrive_count=1)
    redrive(options(dlq), sqs_client=sqs)
    [msg] = drain(sqs, src)
    assert msg["MessageAttributes"][ATTR_REDRIVE_COUNT]["StringValue"] == "2"


def test_job_and_error_filters_leave_the_rest_visible(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, job="invoice-email", key=1, source=src, error_type="TimeoutError")
    dead_letter(sqs, dlq, job="invoice-email", key=2, source=src, error_type="KeyError", reason="permanent")
    dead_letter(sqs, dlq, job="sync-account", key=3, source=src, error_type="TimeoutError")

    summary = redrive(options(dlq, job="invoice-email", error_type="TimeoutError"), sqs_client=sqs)

    assert summary.moved == 1
    assert summary.skipped == {"filtered": 2}
    assert [json.loads(m["Body"])["key"] for m in drain(sqs, src)] == ["invoice-email:1"]
    # The two that did not match are visible right away, not after the visibility timeout.
    assert visible(sqs, dlq) == 2


def test_error_filter_also_matches_the_reason(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src, reason="permanent", error_type="PermanentError")
    dead_letter(sqs, dlq, key=2, source=src, reason="exhausted", error_type="TimeoutError")
    summary = redrive(options(dlq, error_type="exhausted"), sqs_client=sqs)
    assert summary.moved == 1
    assert json.loads(drain(sqs, src)[0]["Body"])["key"] == "invoice-email:2"


def test_sends_and_deletes_go_in_batches_of_ten_and_delete_follows_send(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(25):
        dead_letter(sqs, dlq, key=key, source=src)
    calls = Calls(sqs)

    summary = redrive(options(dlq), sqs_client=sqs)

    assert summary.moved == 25
    assert calls.count("SendMessage") == calls.count("DeleteMessage") == 0
    assert sorted(calls.entries("SendMessageBatch")) == [5, 10, 10]
    assert sorted(calls.entries("DeleteMessageBatch")) == [5, 10, 10]
    # Each delete batch comes right after the send batch it acknowledges.
    ops = [op for op, _ in calls.log if op in ("SendMessageBatch", "DeleteMessageBatch")]
    assert ops == ["SendMessageBatch", "DeleteMessageBatch"] * 3
    assert len(drain(sqs, src)) == 25
    assert queue_depth(sqs, dlq) == 0


def test_failed_send_entry_is_not_deleted(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(3):
        dead_letter(sqs, dlq, key=key, source=src)

    class RejectKey1:
        """SQS rejects one entry of the batch (e.g. throttled): it must stay in the DLQ."""

        def __getattr__(self, name: str) -> Any:
            return getattr(sqs, name)

        def send_message_batch(self, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
            bad = [e for e in Entries if '"key": "invoice-email:1"' in e["MessageBody"]]
            good = [e for e in Entries if e not in bad]
            response = sqs.send_message_batch(QueueUrl=QueueUrl, Entries=good)
            response["Failed"] = [
                {"Id": e["Id"], "SenderFault": False, "Code": "InternalError", "Message": "x"} for e in bad
            ]
            return dict(response)

    summary = redrive(options(dlq), sqs_client=RejectKey1())  # type: ignore[arg-type]

    assert (summary.moved, summary.failed, summary.ok) == (2, 1, False)
    left = drain(sqs, dlq)
    assert [json.loads(m["Body"])["key"] for m in left] == ["invoice-email:1"]
    assert len(drain(sqs, src)) == 2


def test_poison_guard_stops_at_the_limit_unless_forced(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src, redrive_count=3)
    dead_letter(sqs, dlq, key=2, source=src, redrive_count=2)

    summary = redrive(options(dlq, max_redrives=3), sqs_client=sqs)
    assert summary.moved == 1
    assert summary.skipped == {"poison": 1}
    assert visible(sqs, dlq) == 1

    forced = redrive(options(dlq, max_redrives=3, force=True), sqs_client=sqs)
    assert forced.moved == 1
    counts = sorted(m["MessageAttributes"][ATTR_REDRIVE_COUNT]["StringValue"] for m in drain(sqs, src))
    assert counts == ["3", "4"]


def test_dry_run_lists_job_reason_age_and_changes_nothing(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, job="invoice-email", key=1, source=src)
    dead_letter(sqs, dlq, job="sync-account", key=2, source=src, reason="permanent", error_type="KeyError")
    dead_letter(sqs, dlq, job="invoice-email", key=3, source=src, redrive_count=5)
    before = {m["MessageId"]: m["Body"] for m in sqs.receive_message(QueueUrl=dlq, MaxNumberOfMessages=10,
                                                                      VisibilityTimeout=0)["Messages"]}
    calls = Calls(sqs)
    sent_ms = int(sqs.receive_message(QueueUrl=dlq, AttributeNames=["SentTimestamp"], VisibilityTimeout=0)[
        "Messages"][0]["Attributes"]["SentTimestamp"])

    summary = redrive(options(dlq, dry_run=True), sqs_client=sqs, clock=lambda: sent_ms / 1000 + 90)

    assert summary.dry_run and summary.moved == 0 and summary.matched == 2
    assert summary.skipped == {"poison": 1}
    plan = {(p.job, p.reason, p.redrive_count): p for p in summary.planned}
    assert plan["invoice-email", "exhausted", 0].action == "move"
    assert plan["invoice-email", "exhausted", 0].target == src
    assert plan["invoice-email", "exhausted", 0].age_seconds == pytest.approx(90, abs=2)
    assert plan["sync-account", "permanent", 0].error_type == "KeyError"
    assert plan["invoice-email", "exhausted", 5].action == "skip:poison"
    assert calls.count("SendMessageBatch") == calls.count("DeleteMessageBatch") == 0
    assert visible(sqs, src) == 0
    assert visible(sqs, dlq) == 3  # visible again at once
    after = {m["MessageId"]: m["Body"] for m in drain(sqs, dlq)}
    assert after == before


def test_max_stops_after_n_and_reports_what_is_left(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(25):
        dead_letter(sqs, dlq, key=key, source=src)
    summary = redrive(options(dlq, max_messages=12), sqs_client=sqs)
    assert (summary.moved, summary.stopped, summary.left) == (12, "max", 13)
    assert visible(sqs, dlq) == 13


def test_rate_limit_paces_with_the_injected_clock(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(20):
        dead_letter(sqs, dlq, key=key, source=src)
    now = [1000.0]
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        now[0] += seconds

    calls = Calls(sqs)
    summary = redrive(options(dlq, rate=5), sqs_client=sqs, clock=lambda: now[0], sleep=sleep)

    assert summary.moved == 20
    # Bursts of at most one second's worth, then 5 messages per second on average.
    assert set(calls.entries("SendMessageBatch")) == {5}
    assert sum(sleeps) == pytest.approx((20 - 5) / 5)


def test_deadline_stops_early_and_reports_what_is_left(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(30):
        dead_letter(sqs, dlq, key=key, source=src)
    calls = Calls(sqs)
    # Each receive round costs 20 s of a 50 s budget; stop when under 10 s.
    opts = options(dlq, stop_margin_seconds=10)
    engine = Redrive(opts, sqs_client=sqs, remaining_time=lambda: 50 - 20 * calls.count("ReceiveMessage"))
    summary = engine.run()
    # The third round received 10 but had no time left to send them: they go back, visible.
    assert (summary.moved, summary.matched, summary.stopped, summary.left) == (20, 20, "deadline", 10)
    assert visible(sqs, dlq) == 10


def test_a_slow_rate_receives_no_more_than_it_can_send_within_the_visibility_timeout(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(4):
        dead_letter(sqs, dlq, key=key, source=src)
    calls = Calls(sqs)
    receives: list[int] = []
    sqs.meta.events.register(
        "provide-client-params.sqs.ReceiveMessage", lambda params, **_: receives.append(params["MaxNumberOfMessages"])
    )
    now = [0.0]

    def sleep(seconds: float) -> None:
        now[0] += seconds

    opts = options(dlq, rate=0.05, visibility_timeout=60)  # one message every 20 s
    summary = redrive(opts, sqs_client=sqs, clock=lambda: now[0], sleep=sleep)
    assert summary.moved == 4
    assert set(receives) == {1}  # 0.05/s * 30 s = 1.5: one at a time
    assert calls.entries("SendMessageBatch") == [1, 1, 1, 1]


def test_source_from_the_dlqs_only_redrive_source(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1)  # no sqsjobs.source_queue: e.g. dead-lettered by maxReceiveCount
    summary = redrive(options(dlq), sqs_client=sqs)
    assert summary.moved == 1
    assert len(drain(sqs, src)) == 1


def test_two_redrive_sources_and_no_attribute_is_skipped_with_a_reason(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    sqs.create_queue(QueueName="other", Attributes={"RedrivePolicy": json.dumps(
        {"deadLetterTargetArn": arn, "maxReceiveCount": 3})})
    dead_letter(sqs, dlq, key=1)
    summary = redrive(options(dlq), sqs_client=sqs)
    assert summary.skipped == {"no-source": 1}
    assert visible(sqs, dlq) == 1
    # Given a target, it moves.
    assert redrive(options(dlq, to="jobs"), sqs_client=sqs).moved == 1
    assert len(drain(sqs, src)) == 1


def test_to_wins_over_the_source_attribute(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    other = sqs.create_queue(QueueName="elsewhere")["QueueUrl"]
    dead_letter(sqs, dlq, key=1, source=src)
    redrive(options(dlq, to=other), sqs_client=sqs)
    assert len(drain(sqs, other)) == 1
    assert drain(sqs, src) == []


def test_dlq_by_name_and_by_arn(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src)
    dead_letter(sqs, dlq, key=2, source=src)
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    assert redrive(options("jobs-dlq", max_messages=1), sqs_client=sqs).moved == 1
    assert redrive(options(arn), sqs_client=sqs).moved == 1


def test_malformed_bodies_are_moved_as_bytes_by_default(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, job="?", key=1, source=src, reason="malformed", error_type="MalformedMessageError",
                body="\x00not json{")
    summary = redrive(options(dlq), sqs_client=sqs)
    assert summary.moved == 1
    [msg] = drain(sqs, src)
    assert msg["Body"] == "\x00not json{"


def test_malformed_bodies_can_be_skipped_with_a_stated_reason(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, job="?", key=1, source=src, reason="malformed", body="{}")
    dead_letter(sqs, dlq, key=2, source=src)
    summary = redrive(options(dlq, malformed="skip"), sqs_client=sqs)
    assert summary.moved == 1
    assert summary.skipped == {"malformed": 1}
    [left] = drain(sqs, dlq)
    assert left["Body"] == "{}"


def test_too_many_attributes_is_skipped_not_truncated(sqs: Any) -> None:
    src, _ = make_queues(sqs)
    plain_dlq = sqs.create_queue(QueueName="plain-dlq")["QueueUrl"]
    attrs = {f"a{i}": {"DataType": "String", "StringValue": "x"} for i in range(10)}
    sqs.send_message(QueueUrl=plain_dlq, MessageBody='{"v": 1, "job": "a"}', MessageAttributes=attrs)
    summary = redrive(options(plain_dlq, to=src), sqs_client=sqs)
    assert summary.skipped == {"too-many-attributes": 1}
    assert visible(sqs, plain_dlq) == 1


def test_fifo_keeps_group_and_uses_a_deterministic_fresh_dedup_id(sqs: Any) -> None:
    src, dlq = make_queues(sqs, "orders", fifo=True)
    dead_letter(sqs, dlq, key=1, source=src, group="customer-7")
    dead_letter(sqs, dlq, key=2, source=src, group="customer-8")
    [first] = sqs.receive_message(
        QueueUrl=dlq, AttributeNames=["All"], MessageAttributeNames=["All"], MaxNumberOfMessages=1,
        VisibilityTimeout=0,
    )["Messages"]

    summary = redrive(options(dlq), sqs_client=sqs)

    assert summary.moved == 2
    moved = {m["Attributes"]["MessageGroupId"]: m for m in drain(sqs, src)}
    assert set(moved) == {"customer-7", "customer-8"}
    m7 = moved["customer-7"]
    assert m7["Attributes"]["MessageDeduplicationId"] == dedup_id(first, 1)
    assert m7["Attributes"]["MessageDeduplicationId"] != first["Attributes"]["MessageDeduplicationId"]


def test_fifo_resend_of_the_same_dead_letter_is_deduplicated_by_sqs(sqs: Any) -> None:
    src, dlq = make_queues(sqs, "orders", fifo=True)
    dead_letter(sqs, dlq, key=1, source=src, group="g")
    # The first run sends, then loses its connection before the delete: the
    # message is in both queues. The re-run sends it again with the same dedup id.
    flaky = FlakyClient(sqs, "delete_message_batch", 1, EndpointConnectionError(endpoint_url="x"))
    first = redrive(options(dlq), sqs_client=flaky)  # type: ignore[arg-type]
    assert first.stopped == "error" and first.moved == 0
    second = redrive(options(dlq), sqs_client=sqs)
    assert second.moved == 1
    assert len(drain(sqs, src)) == 1
    assert drain(sqs, dlq) == []


@pytest.mark.parametrize("interrupt_on_call", [1, 2, 3])
def test_ctrl_c_during_send_loses_nothing_and_rerun_continues(sqs: Any, interrupt_on_call: int) -> None:
    src, dlq = make_queues(sqs)
    for key in range(25):
        dead_letter(sqs, dlq, key=key, source=src)
    flaky = FlakyClient(sqs, "send_message_batch", interrupt_on_call, KeyboardInterrupt())
    engine = Redrive(options(dlq), sqs_client=flaky)  # type: ignore[arg-type]

    with pytest.raises(KeyboardInterrupt):
        engine.run()

    partial = engine.summary()
    assert partial.stopped == "interrupted"
    assert partial.moved == 10 * (interrupt_on_call - 1)
    # Everything not moved is visible in the DLQ again at once.
    assert visible(sqs, dlq) == 25 - partial.moved
    assert redrive(options(dlq), sqs_client=sqs).moved == 25 - partial.moved
    keys = Counter(json.loads(m["Body"])["key"] for m in drain(sqs, src))
    assert keys == Counter({f"invoice-email:{k}": 1 for k in range(25)})


def test_lost_connection_after_send_duplicates_only_what_was_sent_and_loses_nothing(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(25):
        dead_letter(sqs, dlq, key=key, source=src)
    flaky = FlakyClient(sqs, "delete_message_batch", 2, EndpointConnectionError(endpoint_url="x"))

    first = redrive(options(dlq), sqs_client=flaky)  # type: ignore[arg-type]

    assert first.stopped == "error" and "EndpointConnectionError" in (first.error or "")
    assert first.moved == 10
    second = redrive(options(dlq), sqs_client=sqs)
    assert second.moved == 15
    keys = Counter(json.loads(m["Body"])["key"] for m in drain(sqs, src))
    assert set(keys) == {f"invoice-email:{k}" for k in range(25)}  # nothing lost
    # The second batch was sent but not deleted: those 10 arrive twice, and the guard absorbs them.
    assert sum(keys.values()) == 35
    assert drain(sqs, dlq) == []


def test_failed_send_call_keeps_the_batch_in_the_dlq(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(12):
        dead_letter(sqs, dlq, key=key, source=src)
    error = ClientError({"Error": {"Code": "KMS.AccessDenied", "Message": "no"}}, "SendMessageBatch")
    flaky = FlakyClient(sqs, "send_message_batch", 1, error)
    summary = redrive(options(dlq), sqs_client=flaky)  # type: ignore[arg-type]
    # The target refused: nothing more goes there in this run, the scan finishes, nothing is lost.
    assert (summary.moved, summary.failed, dict(summary.skipped)) == (0, 10, {"target-unreachable": 2})
    assert summary.stopped == "drained" and not summary.ok and "KMS.AccessDenied" in summary.target_errors[src]
    assert visible(sqs, dlq) == 12
    assert visible(sqs, src) == 0


def test_progress_callback_sees_growing_counts(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    for key in range(15):
        dead_letter(sqs, dlq, key=key, source=src)
    seen: list[int] = []
    Redrive(options(dlq), sqs_client=sqs, on_progress=lambda s: seen.append(s.moved)).run()
    assert seen == [10, 15]


def test_summary_is_json_ready(sqs: Any) -> None:
    src, dlq = make_queues(sqs)
    dead_letter(sqs, dlq, key=1, source=src)
    data = json.loads(json.dumps(redrive(options(dlq, dry_run=True), sqs_client=sqs).to_dict()))
    assert data["dry_run"] is True and data["matched"] == 1 and data["planned"][0]["job"] == "invoice-email"
