"""The message size limit comes from the queue (issue 25, "Also"): SQS takes up to 1 MiB when the queue allows it.

`MaximumMessageSize` in the template reaches the functions as SQSJOBS_MAX_MESSAGE_BYTES and the app as
`Settings.max_message_bytes` (or `JobApp(max_message_bytes=...)`): sends are checked against it, dead letters
shrink to it, batches follow SendMessageBatch's 1 MiB per call, and the worker decodes what its queue took.
"""

from __future__ import annotations

import json

import pytest

from sqsjobs import ConfigurationError, JobApp, Outcome, PermanentError
from sqsjobs._errors import MessageTooLargeError
from sqsjobs._settings import Settings
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.enqueue._message import ATTR_RESULT
from sqsjobs.enqueue._sizes import RESULT_ATTRIBUTE_BYTES, WORKER_ATTRIBUTE_BYTES
from sqsjobs.testing import FakeSQS
from sqsjobs.worker._dead_letters import ATTR_ERROR_MESSAGE, ATTR_REASON, DeadLetter, Reason
from sqsjobs.worker._job_records import MAX_RESULT_BYTES

MIB = 1024 * 1024


def test_the_limit_is_read_from_the_environment_and_the_constructor_wins() -> None:
    assert Settings().max_message_bytes == 262_144
    assert Settings.from_env({"SQSJOBS_MAX_MESSAGE_BYTES": "1048576"}).max_message_bytes == MIB
    app = JobApp(environ={"SQSJOBS_MAX_MESSAGE_BYTES": "1048576"}, max_message_bytes=500_000)
    assert app.settings.max_message_bytes == 500_000


@pytest.mark.parametrize("value", [1023, MIB + 1, "big"])
def test_a_limit_sqs_cannot_have_is_refused_in_one_line(value: object) -> None:
    with pytest.raises(ConfigurationError, match=r"max_message_bytes \(SQSJOBS_MAX_MESSAGE_BYTES\) must be the "
                                                 r"queues' MaximumMessageSize, a whole number of bytes within "
                                                 r"1024\.\.1048576"):
        Settings(max_message_bytes=value)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="must be a number"):
        Settings.from_env({"SQSJOBS_MAX_MESSAGE_BYTES": "1 MiB"})


def declare(app: JobApp) -> object:
    @app.job("render", key="render:{page}")
    def render(page: int, html: str) -> None:
        if page < 0:
            raise PermanentError("no such page: " + "?" * 500)

    return render


def test_a_1_mib_queue_takes_a_600_kb_message_end_to_end_under_app_testing() -> None:
    app = JobApp(max_message_bytes=MIB)
    render = declare(app)
    with app.testing() as t:
        render.enqueue(page=1, html="x" * 600_000)  # type: ignore[attr-defined]
        t.drain()
        assert [(o.key, o.outcome) for o in t.outcomes] == [("render:1", Outcome.SUCCEEDED)]


def test_the_default_limit_refuses_it_saying_how_to_raise_it_and_what_it_costs() -> None:
    app = JobApp()
    render = declare(app)
    with app.testing(), pytest.raises(MessageTooLargeError) as refused:
        render.enqueue(page=1, html="x" * 600_000)  # type: ignore[attr-defined]
    text = str(refused.value)
    assert "over its queue's 262,144-byte limit (max_message_bytes, SQSJOBS_MAX_MESSAGE_BYTES)" in text
    assert "a queue takes up to 1,048,576 bytes (MaximumMessageSize), but SQS bills each 64 KiB of a message " \
           "as one request" in text


def test_over_1_mib_nothing_takes_it_whatever_the_setting() -> None:
    app = JobApp(max_message_bytes=MIB)
    render = declare(app)
    with pytest.raises(MessageTooLargeError, match="over its queue's 1,048,576-byte limit"):
        render.message(page=1, html="x" * MIB)  # type: ignore[attr-defined]


def test_enqueue_many_fills_send_message_batch_up_to_its_1_mib_request_limit() -> None:
    app = JobApp(max_message_bytes=MIB)
    render = declare(app)
    with app.testing() as t:
        report = app.enqueue_many(render.message(page=i, html="x" * 300_000) for i in range(7))  # type: ignore[attr-defined]
        assert report.ok and report.sent == 7
        sizes = [len(c.params["Entries"]) for c in t.calls if c.operation == "SendMessageBatch"]
        assert sizes == [3, 3, 1]  # 3 x 300 kB fit in one request; a 4th would pass 1 MiB


def test_a_dead_letter_keeps_its_attributes_when_the_dlq_takes_1_mib() -> None:
    app = JobApp(max_message_bytes=MIB)
    render = declare(app)
    with app.testing() as t:
        t.run(render.message(page=-1, html="x" * 600_000))  # type: ignore[attr-defined]
        (letter,) = t.dead_letters()
        # Not shrunk: the whole error text (a 256 KiB DLQ would have cut it to 100 characters).
        assert letter.reason == "permanent" and letter.error_message == "no such page: " + "?" * 500
        assert len(t.sqs.messages(t.dlq_url)[0].body) > 600_000


def test_dead_letter_entries_shrink_to_the_limit_they_are_given() -> None:
    letter = DeadLetter(message_id="m", body="x" * 261_500, reason=Reason.EXHAUSTED, error_type="E",
                        error_message="e" * 900, job="j", attempts=5, first_receive_time=0, source_queue="q",
                        source_attributes={"tenant": {"stringValue": "acme", "dataType": "String"}})
    small = letter.entry("0", False)
    assert len(small["MessageAttributes"][ATTR_ERROR_MESSAGE]["StringValue"]) == 100
    large = letter.entry("0", False, max_bytes=MIB)
    assert len(large["MessageAttributes"][ATTR_ERROR_MESSAGE]["StringValue"]) == 900
    assert "tenant" in large["MessageAttributes"]


def test_the_worker_decodes_a_body_its_queue_took() -> None:
    body = Envelope(job="render", key="render:1", args={"page": 1, "html": "x" * 900_000}).encode()
    assert Envelope.decode(body).args["page"] == 1


def test_fake_sqs_holds_each_queue_to_its_size_and_each_batch_to_1_mib() -> None:
    sqs = FakeSQS(clock=lambda: 0.0)
    url = sqs.queue_url("jobs")
    sqs.send_message(QueueUrl=url, MessageBody="x" * 1_000_000)  # SQS's default for a new queue: 1 MiB
    sqs.set_maximum_message_size(url, 262_144)
    from botocore.exceptions import ClientError

    with pytest.raises(ClientError, match="over the queue's MaximumMessageSize 262144"):
        sqs.send_message(QueueUrl=url, MessageBody="x" * 262_145)
    sqs.set_maximum_message_size(url, MIB)
    entries = [{"Id": str(i), "MessageBody": "y" * 300_000} for i in range(4)]
    with pytest.raises(ClientError, match="BatchRequestTooLong"):
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    assert json.loads(json.dumps(sqs.get_queue_attributes(QueueUrl=url)))["Attributes"]["MaximumMessageSize"] == \
        str(MIB)


# ---------------------------------------------------------------- at the limit (issue 31, found by tests/model)
def at_most(render: object, limit: int) -> object:
    """The largest message of ``render`` its app accepts (found by asking it: a bisection of the argument)."""
    empty = render.message(page=-1, html="").size()  # type: ignore[attr-defined]
    low, high = 0, limit - empty + 1  # accepted, and the first length surely refused
    while high - low > 1:
        middle = (low + high) // 2
        try:
            render.message(page=-1, html="x" * middle)  # type: ignore[attr-defined]
            low = middle
        except MessageTooLargeError:
            high = middle
    return render.message(page=-1, html="x" * low)  # type: ignore[attr-defined]


def test_a_message_leaves_room_for_the_workers_own_attributes() -> None:
    app = JobApp(max_message_bytes=MIB)
    render = declare(app)
    with app.testing():  # one clock: the enqueue time in each body has the same digits
        largest = at_most(render, MIB)
        assert largest.size() == MIB - WORKER_ATTRIBUTE_BYTES  # type: ignore[attr-defined]
        with pytest.raises(MessageTooLargeError, match="less 1,024 bytes the worker keeps for its own attributes"):
            render.message(page=-1, html="x" * (len(json.loads(largest.body)["args"]["html"]) + 1))  # type: ignore
    assert MAX_RESULT_BYTES + len(ATTR_RESULT) + len("String") <= RESULT_ATTRIBUTE_BYTES


def test_a_job_that_stores_its_result_leaves_room_for_it_too() -> None:
    app = JobApp(max_message_bytes=MIB)

    @app.job("total", key="total:{n}", store_result=True)
    def total(n: int, rows: str) -> int:
        return n

    with app.testing():
        empty = total.message(n=1, rows="").size()
        total.message(n=1, rows="x" * (MIB - WORKER_ATTRIBUTE_BYTES - RESULT_ATTRIBUTE_BYTES - empty))
        with pytest.raises(MessageTooLargeError,
                           match=f"less {WORKER_ATTRIBUTE_BYTES + RESULT_ATTRIBUTE_BYTES:,} bytes"):
            total.message(n=1, rows="x" * (MIB - WORKER_ATTRIBUTE_BYTES - RESULT_ATTRIBUTE_BYTES - empty + 1))


@pytest.mark.parametrize("limit", [262_144, MIB])
def test_the_largest_message_a_producer_may_send_is_dead_lettered_with_its_reason(limit: int) -> None:
    app = JobApp(max_message_bytes=limit)
    render = declare(app)
    with app.testing() as t:
        t.sqs.set_maximum_message_size(t.queue_url, limit)
        t.sqs.set_maximum_message_size(t.dlq_url, limit)
        t.run(at_most(render, limit))  # type: ignore[arg-type]
        (letter,) = t.sqs.messages(t.dlq_url)
        assert letter.attribute(ATTR_REASON) == "permanent"  # before: the DLQ refused it, again and again


def test_the_largest_message_is_re_sent_at_its_backstop_receive() -> None:
    from sqsjobs.store._lease_ops import Acquire
    from sqsjobs.worker._delivery import State

    app = JobApp(max_message_bytes=MIB, max_attempts=3)
    render = declare(app)
    with app.testing() as t:
        now = t.clock()
        t.store.write(Acquire(key="render:-1", owner="elsewhere", now=now, lease_until=now + 30,
                              expires_at=now + 3600, job="render", data={"job": "render", "outcome": "running"}))
        (d,) = t.run(at_most(render, MIB), attempt=4).deliveries  # type: ignore[arg-type]
        assert d.state is State.ACKED and not any("re-send failed" in note for note in d.notes), d.notes
        (copy,) = t.sqs.messages(t.queue_url)
        assert copy.attribute("sqsjobs.resends") == "1"  # before: refused as too long, back until SQS moved it


def test_a_letter_at_its_queues_limit_goes_without_attributes_and_its_evidence_says_why() -> None:
    """A producer that left no room (another language, a hand-built body): the letter still reaches the DLQ."""
    app = JobApp(max_message_bytes=MIB)
    declare(app)
    with app.testing() as t:
        body = Envelope(job="render", key="render:-2", args={"page": -2, "html": ""}).encode()
        body = body.replace('"html":""', '"html":"' + "x" * (MIB - len(body)) + '"')
        assert len(body) == MIB
        t.sqs.put(t.queue_url, body)
        t.drain()
        (message,) = t.sqs.messages(t.dlq_url)
        assert message.attribute(ATTR_REASON) is None
        (letter,) = t.dead_letters()
        assert letter.reason == "permanent"  # read from its evidence (dlq#<its id>)


def test_a_member_or_step_too_large_to_send_with_its_place_is_refused_when_added() -> None:
    """Found by tests/model: the group took it, wrote its records, then could never send it ("call enqueue()
    again")."""
    app = JobApp(max_message_bytes=MIB)
    render = declare(app)
    with app.testing() as t:
        largest = at_most(render, MIB)  # fine alone; its place in a group or chain makes it too large
        t.run(largest)  # type: ignore[arg-type]
        with pytest.raises(MessageTooLargeError):
            app.group().add(largest)  # type: ignore[arg-type]
        with pytest.raises(MessageTooLargeError):
            app.chain(largest, render.message(page=2, html=""))  # type: ignore[arg-type, attr-defined]
