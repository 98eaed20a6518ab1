"""Enqueue options against moto (delay, FIFO groups, trace ids) and ``enqueue_many``: batch splitting by
entries and size, retrying the entries a batch reports failed, and reporting what finally failed."""

from __future__ import annotations

import hashlib
import json
import math
import random
from typing import Any

import boto3
import pytest
from aws_support import create_queues
from botocore.exceptions import ClientError
from botocore.stub import Stubber

from sqsjobs import ConfigurationError, EnqueueError, JobApp
from sqsjobs._errors import MessageTooLargeError
from sqsjobs._tracing import reset_trace_id, set_trace_id
from sqsjobs.enqueue._message import ATTR_JOB, ATTR_TRACE_ID, JobMessage
from sqsjobs.enqueue._producer import MAX_BATCH_BYTES, MAX_BATCH_ENTRIES, SEND_RETRY_BACKOFF, Producer


def receive_all(sqs: Any, queue_url: str) -> list[dict[str, Any]]:
    """Every visible message (received and hidden, so more than 10 can be read)."""
    received: list[dict[str, Any]] = []
    while True:
        batch = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, VisibilityTimeout=600,
                                    AttributeNames=["All"], MessageAttributeNames=["All"]).get("Messages", [])
        if not batch:
            return received
        received.extend(batch)


def keys_in(sqs: Any, queue_url: str) -> list[str]:
    return sorted(json.loads(m["Body"])["key"] for m in receive_all(sqs, queue_url))


class Recording:
    """Passes every call to the real (moto) client and remembers the parameters."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.requests: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.real, name)
        if not callable(method) or name.startswith("_") or name in ("meta", "exceptions"):
            return method

        def call(**params: Any) -> Any:
            self.requests.append((name, params))
            return method(**params)

        return call

    def batches(self) -> list[list[dict[str, Any]]]:
        return [params["Entries"] for name, params in self.requests if name == "send_message_batch"]


class FlakyBatches(Recording):
    """Like Recording, but chosen keys fail (as entries of a successful call) a number of times first."""

    def __init__(self, real: Any, failures: dict[str, int], *, sender_fault: bool = False,
                 code: str = "InternalError", whole_call_failures: int = 0) -> None:
        super().__init__(real)
        self.failures = dict(failures)
        self.sender_fault = sender_fault
        self.code = code
        self.whole_call_failures = whole_call_failures

    def send_message_batch(self, **params: Any) -> dict[str, Any]:
        self.requests.append(("send_message_batch", params))
        if self.whole_call_failures:
            self.whole_call_failures -= 1
            raise ClientError({"Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"}},
                              "SendMessageBatch")
        passing, failed = [], []
        for entry in params["Entries"]:
            key = json.loads(entry["MessageBody"])["key"]
            if self.failures.get(key, 0) > 0:
                self.failures[key] -= 1
                failed.append({"Id": entry["Id"], "SenderFault": self.sender_fault, "Code": self.code,
                               "Message": f"{self.code} for {key}"})
            else:
                passing.append(entry)
        response = self.real.send_message_batch(QueueUrl=params["QueueUrl"], Entries=passing) if passing else {}
        return {"Successful": response.get("Successful", []), "Failed": failed + response.get("Failed", [])}


def declare_task(app: Any) -> Any:
    @app.job("task", key="task:{n}")
    def task(n: int, blob: str = "") -> None: ...

    return task


# -- enqueue_many: splitting --------------------------------------------------------------------------------------
def test_enqueue_many_sends_full_batches_of_ten(make_app: Any, aws: Any) -> None:
    client = Recording(aws.sqs)
    app = make_app(sqs_client=client)
    task = declare_task(app)

    report = app.enqueue_many(task.message(n=n) for n in range(25))
    assert report.ok and report.sent == 25 and report.calls == 3
    assert [len(batch) for batch in client.batches()] == [10, 10, 5]
    assert sorted(report.message_ids) == list(range(25))
    in_queue = {m["MessageId"]: json.loads(m["Body"])["key"] for m in receive_all(aws.sqs, aws.queue_url)}
    assert {in_queue[mid] for mid in report.message_ids.values()} == {f"task:{n}" for n in range(25)}
    assert all(entry["MessageAttributes"][ATTR_JOB]["StringValue"] == "task"
               for batch in client.batches() for entry in batch)


def test_enqueue_many_splits_by_total_size(make_app: Any, aws: Any) -> None:
    client = Recording(aws.sqs)
    app = make_app(sqs_client=client)
    task = declare_task(app)
    messages = [task.message(n=n, blob="x" * 200_000) for n in range(14)]
    per_call = MAX_BATCH_BYTES // messages[0].size()  # 5 of these fit in SendMessageBatch's 1 MiB, not 10

    report = app.enqueue_many(messages)
    assert report.ok and report.sent == 14
    sizes = {m.key: m.size() for m in messages}
    batches = client.batches()
    assert len(batches) == math.ceil(14 / per_call) and per_call < MAX_BATCH_ENTRIES
    for batch in batches:
        keys = [json.loads(entry["MessageBody"])["key"] for entry in batch]
        assert sum(sizes[k] for k in keys) <= MAX_BATCH_BYTES
        assert len(batch) <= MAX_BATCH_ENTRIES
    assert len(keys_in(aws.sqs, aws.queue_url)) == 14


def test_an_oversized_message_is_refused_the_same_way_by_every_path(make_app: Any, aws: Any) -> None:
    app = make_app()
    task = declare_task(app)
    blob = "x" * (262_144 + 1)  # over the queue's MaximumMessageSize (the template's default)
    refusals = []
    for attempt in (lambda: task.message(n=1, blob=blob), lambda: task.enqueue(n=1, blob=blob),
                    lambda: app.enqueue("task", n=1, blob=blob),
                    lambda: app.enqueue_many([task.message(n=0), task.message(n=1, blob=blob)])):
        with pytest.raises(MessageTooLargeError) as refused:
            attempt()
        refusals.append(str(refused.value))
    assert len(set(refusals)) == 1  # one message, wherever it came from
    assert "over its queue's 262,144-byte limit (max_message_bytes, SQSJOBS_MAX_MESSAGE_BYTES) less 1,024 bytes " \
           "the worker keeps for its own attributes; its largest arguments: blob (262,147 bytes), n (1 byte)" \
           in refusals[0]
    assert keys_in(aws.sqs, aws.queue_url) == []  # nothing was sent, not even the small one


def test_an_oversized_hand_built_message_is_reported_and_the_rest_are_sent(make_app: Any, aws: Any) -> None:
    app = make_app()
    task = declare_task(app)
    good = task.message(n=1)
    big = JobMessage(job="task", key="task:1", body=good.body.replace('"n":1', '"n":1,"blob":"' + "x" * 300_000 + '"'))
    report = app.enqueue_many([task.message(n=0), big, task.message(n=2)])  # does not raise
    assert not report.ok and sorted(report.message_ids) == [0, 2]
    (failed,) = report.failed
    assert (failed.index, failed.key, failed.code, failed.sender_fault) == (1, "task:1", "Invalid", True)
    assert "its largest arguments: blob (300,002 bytes)" in failed.message
    assert keys_in(aws.sqs, aws.queue_url) == ["task:0", "task:2"]


# -- enqueue_many: failed entries ---------------------------------------------------------------------------------
def test_entries_a_batch_reports_failed_are_retried_with_backoff(make_app: Any, aws: Any) -> None:
    client = FlakyBatches(aws.sqs, {"task:3": 1, "task:7": 2})
    sleeps: list[float] = []
    app = make_app(sqs_client=client, sleep=sleeps.append, random=random.Random(5))
    task = declare_task(app)

    report = app.enqueue_many(task.message(n=n) for n in range(10))
    assert report.ok and report.sent == 10 and report.calls == 3
    assert [[e["Id"] for e in batch] for batch in client.batches()] == [[str(n) for n in range(10)], ["3", "7"],
                                                                         ["7"]]
    # Full-jitter waits between rounds, from the injected random source.
    replay = random.Random(5)
    assert sleeps == [SEND_RETRY_BACKOFF.next_delay(1, replay), SEND_RETRY_BACKOFF.next_delay(2, replay)]
    assert keys_in(aws.sqs, aws.queue_url) == sorted(f"task:{n}" for n in range(10))  # each exactly once


def test_entries_that_keep_failing_are_reported_not_raised(make_app: Any, aws: Any) -> None:
    client = FlakyBatches(aws.sqs, {"task:5": 99}, code="ServiceUnavailable")
    sleeps: list[float] = []
    app = make_app(sqs_client=client, sleep=sleeps.append)
    task = declare_task(app)

    report = app.enqueue_many(task.message(n=n) for n in range(12))
    assert not report.ok and report.sent == 11
    (failed,) = report.failed
    assert (failed.index, failed.key, failed.code, failed.sender_fault) == (5, "task:5", "ServiceUnavailable", False)
    assert report.calls == 2 + 3  # the first two batches, then three retries of the one entry
    assert len(sleeps) == 3
    assert "task:5" not in keys_in(aws.sqs, aws.queue_url)


def test_sender_faults_are_not_retried(make_app: Any, aws: Any) -> None:
    client = FlakyBatches(aws.sqs, {"task:1": 1}, sender_fault=True, code="InvalidParameterValue")
    sleeps: list[float] = []
    app = make_app(sqs_client=client, sleep=sleeps.append)
    task = declare_task(app)

    report = app.enqueue_many(task.message(n=n) for n in range(3))
    assert [f.index for f in report.failed] == [1] and report.failed[0].sender_fault
    assert report.calls == 1 and sleeps == []


def test_a_whole_batch_call_that_fails_is_retried(make_app: Any, aws: Any) -> None:
    client = FlakyBatches(aws.sqs, {}, whole_call_failures=1)
    app = make_app(sqs_client=client)
    task = declare_task(app)

    report = app.enqueue_many(task.message(n=n) for n in range(4))
    assert report.ok and report.calls == 2
    assert len(keys_in(aws.sqs, aws.queue_url)) == 4


def test_retries_with_botocores_stubber_send_exactly_the_failed_entries() -> None:
    client = boto3.client("sqs", region_name="us-east-1")
    queue_url = "https://sqs.us-east-1.amazonaws.com/123456789012/jobs"
    app = JobApp(queue_url=queue_url)
    task = declare_task(app)
    messages = [task.message(n=n) for n in range(3)]
    entries = [{"Id": str(n), "MessageBody": m.body, "MessageAttributes": m.attributes()}
               for n, m in enumerate(messages)]
    md5 = "0" * 32
    with Stubber(client) as stubber:
        stubber.add_response(
            "send_message_batch",
            {"Successful": [{"Id": "0", "MessageId": "m-0", "MD5OfMessageBody": md5},
                            {"Id": "2", "MessageId": "m-2", "MD5OfMessageBody": md5}],
             "Failed": [{"Id": "1", "SenderFault": False, "Code": "InternalError", "Message": "try again"}]},
            {"QueueUrl": queue_url, "Entries": entries},
        )
        stubber.add_response(
            "send_message_batch",
            {"Successful": [{"Id": "1", "MessageId": "m-1", "MD5OfMessageBody": md5}], "Failed": []},
            {"QueueUrl": queue_url, "Entries": [entries[1]]},
        )
        report = Producer(client, queue_url, sleep=lambda seconds: None, random=random.Random(0)).send_many(messages)
        stubber.assert_no_pending_responses()
    assert report.ok and report.calls == 2
    assert report.message_ids == {0: "m-0", 1: "m-1", 2: "m-2"}


# -- delay ------------------------------------------------------------------------------------------------------
def test_delay_becomes_delay_seconds_and_hides_the_message(make_app: Any, aws: Any) -> None:
    client = Recording(aws.sqs)
    app = make_app(sqs_client=client)
    task = declare_task(app)

    task.enqueue(n=1, delay=120)
    app.enqueue("task", n=2, delay=900)
    app.enqueue_many([task.message(n=3, delay=45.9)])
    sent = [params for name, params in client.requests if name == "send_message"]
    assert [p["DelaySeconds"] for p in sent] == [120, 900]
    assert client.batches()[0][0]["DelaySeconds"] == 45
    assert receive_all(aws.sqs, aws.queue_url) == []  # all three are still delayed


def test_no_delay_sends_no_delay_seconds(make_app: Any, aws: Any) -> None:
    client = Recording(aws.sqs)
    app = make_app(sqs_client=client)
    declare_task(app).enqueue(n=1)
    ((_, params),) = [r for r in client.requests if r[0] == "send_message"]
    assert "DelaySeconds" not in params
    assert keys_in(aws.sqs, aws.queue_url) == ["task:1"]


def test_a_delay_past_sqs_limit_without_a_schedule_group_raises_and_sends_nothing(make_app: Any, aws: Any) -> None:
    app = make_app()
    task = declare_task(app)
    # Beyond 900 s a job waits in an EventBridge Scheduler schedule (tests/integration/test_delays_moto.py):
    # without the group and role it is refused, naming what is missing.
    with pytest.raises(ConfigurationError, match=r"missing: schedule_group .*SQSJOBS_SCHEDULE_GROUP"):
        task.enqueue(n=1, delay=901)
    with pytest.raises(ConfigurationError, match="EventBridge Scheduler"):
        app.enqueue("task", n=1, delay=24 * 3600)
    with pytest.raises(ConfigurationError, match="SQSJOBS_SCHEDULER_ROLE_ARN"):
        app.enqueue_many([task.message(n=2), task.message(n=3, delay=3600)])
    assert receive_all(aws.sqs, aws.queue_url) == []


def test_fifo_queues_refuse_a_per_message_delay(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "delay-fifo", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)
    task = declare_task(app)
    with pytest.raises(EnqueueError, match="FIFO queues take no per-message delay"):
        task.enqueue(n=1, delay=10)
    report = app.enqueue_many([task.message(n=2, delay=10), task.message(n=3)])
    assert [(f.index, f.code) for f in report.failed] == [(0, "Invalid")]
    assert keys_in(aws.sqs, queue_url) == ["task:3"]


# -- FIFO groups ------------------------------------------------------------------------------------------------
def test_fifo_group_comes_from_the_template_an_override_or_the_key(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "groups", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)

    @app.job("sync", key="sync:{account_id}:{step}", group="{account_id}")
    def sync(account_id: str, step: int) -> None: ...

    @app.job("solo", key="solo:{n}")
    def solo(n: int) -> None: ...

    sync.enqueue(account_id="acme", step=1)
    sync.enqueue(account_id="acme", step=2, group="acme-priority")
    solo.enqueue(n=1)
    app.enqueue_many([sync.message(account_id="globex", step=1)])

    groups = {json.loads(m["Body"])["key"]: (m["Attributes"]["MessageGroupId"],
                                             m["Attributes"]["MessageDeduplicationId"])
              for m in receive_all(aws.sqs, queue_url)}
    assert {k: g for k, (g, _) in groups.items()} == {
        "sync:acme:1": "acme", "sync:acme:2": "acme-priority", "solo:1": "solo:1", "sync:globex:1": "globex"}
    # Deduplication follows the idempotency key: the same job sent twice is one message.
    assert all(dedup == hashlib.sha256(k.encode()).hexdigest() for k, (_, dedup) in groups.items())


def test_fifo_groups_sqs_would_refuse_are_hashed_or_refused(make_app: Any, aws: Any) -> None:
    queue_url, dlq_url = create_queues(aws.sqs, "bad-groups", fifo=True)
    app = make_app(queue_url=queue_url, dlq_url=dlq_url)

    @app.job("note", key="note:{title}")
    def note(title: str) -> None: ...

    @app.job("sync", key="sync:{account}", group="{account}")
    def sync(account: str) -> None: ...

    # No group of its own and a key with a space: the group is the key's digest, stable per key.
    note.enqueue(title="hello world")
    ((key, group),) = [(json.loads(m["Body"])["key"], m["Attributes"]["MessageGroupId"])
                       for m in receive_all(aws.sqs, queue_url)]
    assert key == "note:hello world" and group == hashlib.sha256(key.encode()).hexdigest()
    # A group that is the caller's choice is never rewritten: it is refused, saying why.
    with pytest.raises(EnqueueError, match="'acme corp' is not a valid MessageGroupId"):
        note.enqueue(title="x", group="acme corp")
    with pytest.raises(EnqueueError, match="no spaces"):
        sync.enqueue(account="zürich")
    report = app.enqueue_many([sync.message(account="ok-1"), sync.message(account="x" * 129)])
    assert [(f.index, f.code) for f in report.failed] == [(1, "Invalid")] and report.sent == 1


def test_group_is_ignored_on_a_standard_queue(make_app: Any, aws: Any) -> None:
    client = Recording(aws.sqs)
    app = make_app(sqs_client=client)

    @app.job("sync", key="sync:{account_id}", group="{account_id}")
    def sync(account_id: str) -> None: ...

    sync.enqueue(account_id="acme", group="other")
    ((_, params),) = [r for r in client.requests if r[0] == "send_message"]
    assert "MessageGroupId" not in params and "MessageDeduplicationId" not in params


# -- trace ids --------------------------------------------------------------------------------------------------
def test_trace_id_is_a_message_attribute_explicit_or_current(make_app: Any, aws: Any) -> None:
    app = make_app()
    task = declare_task(app)

    task.enqueue(n=1, trace_id="req-1")
    token = set_trace_id("req-from-the-running-job")
    try:
        task.enqueue(n=2)  # what a running job's enqueue does: carry the current trace id
        task.enqueue(n=3, trace_id="explicit-wins")
        app.enqueue_many([task.message(n=4)])
    finally:
        reset_trace_id(token)
    task.enqueue(n=5)

    traces = {json.loads(m["Body"])["key"]: m.get("MessageAttributes", {}).get(ATTR_TRACE_ID, {}).get("StringValue")
              for m in receive_all(aws.sqs, aws.queue_url)}
    assert traces == {"task:1": "req-1", "task:2": "req-from-the-running-job", "task:3": "explicit-wins",
                      "task:4": "req-from-the-running-job", "task:5": None}
