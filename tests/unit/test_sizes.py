"""One size check (issue 14): the message names its largest arguments, the key names itself and its fields."""

from __future__ import annotations

import pytest

from sqsjobs import InvalidArgumentsError, JobApp
from sqsjobs._errors import MessageTooLargeError
from sqsjobs.enqueue._message import JobMessage
from sqsjobs.enqueue._sizes import check_message, largest_arguments


def make() -> JobApp:
    return JobApp(queue_url="https://sqs.example/1/jobs")


def test_an_oversize_message_names_its_largest_arguments_largest_first() -> None:
    app = make()

    @app.job("report", key="report:{day}")
    def report(day: int, csv: str, notes: str = "", tags: list[str] | None = None) -> None: ...

    with pytest.raises(MessageTooLargeError) as refused:
        report.message(day=7, csv="x" * 270_000, notes="y" * 1_000, tags=["a"])
    text = str(refused.value)
    assert text.startswith("job 'report': the message is ")
    assert "over its queue's 262,144-byte limit (max_message_bytes, SQSJOBS_MAX_MESSAGE_BYTES) less 1,024 bytes " \
           "the worker keeps for its own attributes; its largest arguments: csv (270,002 bytes), notes (1,002 " \
           "bytes), tags (5 bytes). Send IDs and re-fetch the data in the job" in text
    assert isinstance(refused.value, InvalidArgumentsError)  # a caller catching bad arguments catches it too


def test_a_key_over_the_limit_names_the_key_and_its_template_not_the_message() -> None:
    app = make()

    @app.job("sync", key="sync:{account}:{region}")
    def sync(account: str, region: str, payload: str = "") -> None: ...

    with pytest.raises(InvalidArgumentsError) as refused:
        sync.message(account="a" * 3000, region="eu", payload="small")
    text = str(refused.value)
    assert "its idempotency key is 3,008 bytes, over DynamoDB's 2,048-byte key limit (key 'sync:aaaa" in text
    assert "from key template 'sync:{account}:{region}'; its largest fields: account (3,002 bytes), region (4 bytes)" \
           in text and "payload" not in text
    assert not isinstance(refused.value, MessageTooLargeError)


def test_a_lone_surrogate_in_a_key_names_the_argument_it_came_from() -> None:
    app = make()

    @app.job("tag", key="tag:{name}")
    def tag(name: str, count: int = 0) -> None: ...

    with pytest.raises(InvalidArgumentsError, match=r"holds a lone surrogate \(from name\), which is not valid "
                                                    "Unicode and cannot be a DynamoDB key"):
        tag.message(name="bad\udc80name")


def test_a_hand_built_message_gets_the_same_words() -> None:
    body = '{"v": 1, "job": "report", "args": {"csv": "' + "x" * 300_000 + '"}}'
    with pytest.raises(MessageTooLargeError, match=r"its largest arguments: csv \(300,002 bytes\)"):
        check_message(JobMessage(job="report", key="report:1", body=body))


def test_largest_arguments_has_room_for_nothing() -> None:
    assert largest_arguments({}) == "none"
