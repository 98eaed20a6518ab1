"""docs/producers.md shows the example files as they are, and what they send is a valid envelope.

(docs/examples/verify_producers.py runs them against a moto server; this keeps the page and the files in step.)
"""

from __future__ import annotations

import hashlib
import json
import re
import shlex
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from sqsjobs.cli.schema import load_schema
from sqsjobs.enqueue._envelope import Envelope
from sqsjobs.enqueue._message import ATTR_JOB, ATTR_TRACE_ID, JobMessage

DOCS = Path(__file__).resolve().parents[2] / "docs"
EXAMPLES = DOCS / "examples"
VALIDATOR = Draft202012Validator(load_schema())


@pytest.mark.parametrize("name", ["send-message.sh", "send-message-fifo.sh", "enqueue.mjs"])
def test_the_page_shows_each_example_verbatim(name: str) -> None:
    page = (DOCS / "producers.md").read_text()
    assert f"`docs/examples/{name}`" in page
    assert (EXAMPLES / name).read_text().rstrip() in page


def cli_arguments(script: str) -> dict[str, str]:
    """The ``--option value`` pairs of the script's ``aws sqs send-message`` command."""
    command = re.search(r"^aws sqs send-message.*?(?=^\S|\Z)", script, re.S | re.M)
    assert command is not None
    words = shlex.split(command.group(0).replace("\\\n", " "))
    return {words[i]: words[i + 1] for i in range(3, len(words) - 1, 2)}


def test_the_cli_example_sends_a_valid_envelope_and_attributes() -> None:
    options = cli_arguments((EXAMPLES / "send-message.sh").read_text())
    assert options["--queue-url"] == "$SQSJOBS_QUEUE_URL"
    body = json.loads(options["--message-body"])
    assert list(VALIDATOR.iter_errors(body)) == []
    envelope = Envelope.decode(options["--message-body"])
    assert (envelope.job, envelope.args, envelope.job_version) == ("invoice-email", {"invoice_id": 42}, 1)
    attributes = json.loads(options["--message-attributes"])
    assert attributes[ATTR_JOB] == {"DataType": "String", "StringValue": "invoice-email"}
    assert attributes[ATTR_TRACE_ID]["DataType"] == "String"


def test_the_fifo_example_deduplicates_like_the_python_producer() -> None:
    script = (EXAMPLES / "send-message-fifo.sh").read_text()
    key = re.search(r'^KEY="([^"]+)"', script, re.M)
    assert key is not None
    options = cli_arguments(script.replace("$KEY", key.group(1)))
    body = json.loads(options["--message-body"])
    assert list(VALIDATOR.iter_errors(body)) == [] and body["key"] == key.group(1)
    # The shell computes sha256 of the key, which is JobMessage.dedup_id.
    assert "sha256sum | cut -c1-64" in options["--message-deduplication-id"]
    assert JobMessage(job="invoice-email", key=key.group(1), body="").dedup_id == hashlib.sha256(
        key.group(1).encode()).hexdigest()
    assert "--delay-seconds" not in options


def test_the_node_example_builds_the_envelope_fields_the_schema_names() -> None:
    source = (EXAMPLES / "enqueue.mjs").read_text()
    body = re.search(r"const body = \{(.*?)\};", source)
    assert body is not None
    fields = {part.split(":")[0].strip() for part in body.group(1).split(",")}
    assert fields == {"v", "job", "job_version", "args", "enqueued_at"}
    assert fields <= set(load_schema()["properties"])
    assert '"sqsjobs.job"' in source and '"sqsjobs.trace_id"' in source
