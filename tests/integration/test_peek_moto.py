"""The one queue peek (lib/sqsjobs/ops/_peek.py): every message once, all visible afterwards, whatever fails.

Against moto's SQS. A message "seen twice" (its hold ran out during a long
scan) is simulated by a client that answers one receive twice, so no test
waits for a visibility timeout.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from sqsjobs.ops._peek import PEEK_VISIBILITY_SECONDS, peek
from sqsjobs.testing import messages_in

LIB = Path(__file__).resolve().parents[2] / "lib" / "sqsjobs"


@pytest.fixture
def sqs() -> Any:
    with mock_aws():
        yield boto3.client("sqs", region_name="us-east-1")


def fill(sqs: Any, name: str, count: int) -> str:
    url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    for i in range(count):
        sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"n": i}))
    return url


def visible(sqs: Any, url: str) -> int:
    attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"])
    return int(attributes["Attributes"]["ApproximateNumberOfMessages"])


class Repeating:
    """The real client, except that its receives at ``repeat`` answer the previous receive's messages again."""

    def __init__(self, sqs: Any, *, repeat: frozenset[int] = frozenset(), fail_at: int | None = None) -> None:
        self.sqs = sqs
        self.repeat = repeat
        self.fail_at = fail_at
        self.receives = 0
        self.last: dict[str, Any] = {"Messages": []}

    def receive_message(self, **params: Any) -> dict[str, Any]:
        self.receives += 1
        if self.receives == self.fail_at:
            raise ConnectionError("the connection dropped mid-peek")
        if self.receives in self.repeat:
            return self.last
        self.last = self.sqs.receive_message(**params)
        return self.last

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sqs, name)


def test_a_peek_sees_every_message_once_and_leaves_them_all_visible(sqs: Any) -> None:
    url = fill(sqs, "jobs-dlq", 25)
    peeked = peek(sqs, url, max_messages=100)
    assert sorted(json.loads(m["Body"])["n"] for m in peeked) == list(range(25))
    assert visible(sqs, url) == 25
    # Bodies and attributes come along: the console shows them.
    assert all("Body" in m and "Attributes" in m for m in peeked)


def test_a_peek_stops_at_max_messages(sqs: Any) -> None:
    url = fill(sqs, "jobs-dlq", 25)
    assert len(peek(sqs, url, max_messages=7)) == 7
    assert visible(sqs, url) == 25


def test_a_message_received_twice_counts_once_and_a_round_with_nothing_new_ends_the_scan(sqs: Any) -> None:
    url = fill(sqs, "jobs-dlq", 15)
    client = Repeating(sqs, repeat=frozenset({2}))  # the second receive hands back the first one's ten
    peeked = peek(client, url, max_messages=100)
    assert len(peeked) == len({m["MessageId"] for m in peeked}) == 10
    assert client.receives == 2
    assert visible(sqs, url) == 15


def test_a_failed_receive_still_releases_what_was_held(sqs: Any) -> None:
    url = fill(sqs, "jobs-dlq", 15)
    with pytest.raises(ConnectionError):
        peek(Repeating(sqs, fail_at=2), url, max_messages=100)
    assert visible(sqs, url) == 15  # the first ten were held for PEEK_VISIBILITY_SECONDS, and released at once
    assert PEEK_VISIBILITY_SECONDS > 0


def test_the_testing_helper_is_the_same_peek(sqs: Any) -> None:
    url = fill(sqs, "jobs", 12)
    assert sorted(json.loads(m["Body"])["n"] for m in messages_in(sqs, url)) == list(range(12))
    assert visible(sqs, url) == 12


def _receive_callers() -> dict[str, int]:
    calls: dict[str, int] = {}
    for path in LIB.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and node.func.attr == "receive_message":
                name = str(path.relative_to(LIB))
                calls[name] = calls.get(name, 0) + 1
    return calls


def test_only_the_peek_and_the_consumers_of_a_queue_receive_from_it() -> None:
    # Everything that looks at a queue without consuming it goes through ops/_peek.py. The other receivers
    # consume: the redrive engine (moves or releases what it holds), the test harness's event builder
    # (hands the batch to the worker) and the local cloud's emulation of Lambda's poller.
    assert sorted(_receive_callers()) == ["local/sqs_poller.py", "ops/_peek.py", "ops/_redrive.py",
                                          "testing/events.py"]
