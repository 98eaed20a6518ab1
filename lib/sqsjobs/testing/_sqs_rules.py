"""SQS's limits and refusals as ``FakeSQS`` answers them (testing/fake_sqs.py), and the ``ClientError`` it raises.

An entry's refusal is an ``EntryError``: a batch call reports it in ``Failed``
(``per_entry``), a one-message call raises it as the whole call's
``ClientError`` (``single``). ``client_error`` is the ``ClientError`` botocore
raises; ``FakeScheduler`` (testing/fake_scheduler.py) raises it too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

_T = TypeVar("_T")

#: SQS's limits that sqsjobs relies on
MAX_BATCH_ENTRIES = 10
#: SendMessageBatch's request limit (all entries together)
MAX_BATCH_BYTES = 1024 * 1024
MAX_DELAY_SECONDS = 900
MAX_VISIBILITY_SECONDS = 43_200


class EntryError(Exception):
    """One entry refused (or a one-message call): SQS's error ``code`` and its message."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def single(operation: str, action: Callable[[], _T]) -> _T:
    """A one-message call: an entry's error is the whole call's ``ClientError``, as SQS answers it."""
    try:
        return action()
    except EntryError as error:
        raise client_error(operation, error.code, str(error)) from None


def client_error(operation: str, code: str, message: str) -> Exception:
    from botocore.exceptions import ClientError

    return ClientError({"Error": {"Code": code, "Message": message}}, operation)


def entry_bytes(params: Mapping[str, Any]) -> int:
    """What SQS counts against the size limits: the body and every attribute's name, type and value, in bytes."""
    body = str(params.get("MessageBody") or "")
    return len(body.encode("utf-8", "surrogatepass")) + sum(
        len(name.encode()) + len(str(a.get("DataType", "")).encode())
        + len(str(a.get("StringValue", "")).encode("utf-8", "surrogatepass"))
        for name, a in (params.get("MessageAttributes") or {}).items())


def md5(body: str) -> str:
    return hashlib.md5(body.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


def check_batch(operation: str, entries: Sequence[Mapping[str, Any]]) -> None:
    """What SQS refuses of a batch call as a whole (``ClientError``): no entry, too many, two with one Id."""
    ids = [entry.get("Id") for entry in entries]
    if not entries:
        raise client_error(operation, "EmptyBatchRequest", "a batch needs at least one entry")
    if len(entries) > MAX_BATCH_ENTRIES:
        raise client_error(operation, "TooManyEntriesInBatchRequest", f"{len(entries)} entries, at most 10")
    if len(set(ids)) != len(ids):
        raise client_error(operation, "BatchEntryIdsNotDistinct", "two entries share an Id")


def per_entry(params: Mapping[str, Any], action: Callable[[Mapping[str, Any]], None]) -> dict[str, Any]:
    """Run ``action`` on each entry of a batch call; the answer lists ``Successful`` and ``Failed`` entries."""
    successful, failed = [], []
    for entry in params["Entries"]:
        try:
            action(entry)
        except EntryError as error:
            failed.append({"Id": entry["Id"], "Code": error.code, "Message": str(error), "SenderFault": True})
        else:
            successful.append({"Id": entry["Id"]})
    return {"Successful": successful, "Failed": failed}
