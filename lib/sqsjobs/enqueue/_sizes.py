"""The one size check of a job message and of its idempotency key.

``Job.message`` (so ``enqueue``, ``enqueue_many`` and ``sqsjobs enqueue``) and
the producer (for hand-built messages) call these, so an oversize message is
refused before anything is sent, with the same words wherever it came from,
naming what to shrink: the largest arguments for a message, the key template
and its fields for a key.

Example:
    >>> check_key("greet", "greet:7", template="greet:{user_id}", args={"user_id": 7})
    >>> try:
    ...     check_key("greet", "greet:" + "x" * 3000, template="greet:{name}", args={"name": "x" * 3000})
    ... except InvalidArgumentsError as error:
    ...     print(str(error)[:90])
    job 'greet': its idempotency key is 3,006 bytes, over DynamoDB's 2,048-byte key limit (key
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from sqsjobs._errors import InvalidArgumentsError, MessageTooLargeError
from sqsjobs.enqueue._envelope import BILLED_CHUNK_BYTES, DEFAULT_MESSAGE_BYTES, MAX_BODY_BYTES, MAX_KEY_BYTES

if TYPE_CHECKING:
    from sqsjobs.enqueue._message import JobMessage

#: how many arguments an error names, largest first
NAMED_ARGUMENTS = 3
#: what a message leaves of its queue's limit for the worker's own attributes on a copy of it: a dead letter's
#: reason, error (shortened) and origin (worker/_dead_letters.py), a re-send's count and a finish copy's lease
#: (worker/_send_back.py). Without it a message at the limit could be neither dead-lettered with its reason nor
#: re-sent, and SQS's redrive would move it with none (found by tests/model).
WORKER_ATTRIBUTE_BYTES = 1024
#: and, for a job that stores its result, the result a finish copy carries (at most 4,096 bytes of JSON,
#: worker/_job_records.py ``MAX_RESULT_BYTES``; tests/unit/test_message_size_limit.py ties them)
RESULT_ATTRIBUTE_BYTES = 4096 + 64


def largest_arguments(args: Mapping[str, Any], count: int = NAMED_ARGUMENTS) -> str:
    """The ``count`` largest arguments as ``name (N bytes)``, largest first, by their JSON size.

    Example:
        >>> largest_arguments({"a": 1, "b": "x" * 100, "c": "yy"})
        'b (102 bytes), c (4 bytes), a (1 byte)'
    """
    sizes = sorted(((len(_json(value).encode("utf-8", "surrogatepass")), name) for name, value in args.items()),
                   reverse=True)
    return ", ".join(f"{name} ({size:,} byte{'s' if size != 1 else ''})" for size, name in sizes[:count]) or "none"


def check_message(message: JobMessage, args: Mapping[str, Any] | None = None, *,
                  limit: int = DEFAULT_MESSAGE_BYTES) -> None:
    """Refuse a message over ``limit`` bytes (``Settings.max_message_bytes``) less ``reserved_bytes``, naming the
    largest arguments.

    ``args`` default to those in the message's body (hand-built messages).

    Example:
        >>> from sqsjobs.enqueue._message import JobMessage
        >>> body = json.dumps({"v": 1, "job": "report", "args": {"csv": "x" * 300_000, "day": 7}})
        >>> try:
        ...     check_message(JobMessage(job="report", key="report:7", body=body))
        ... except MessageTooLargeError as error:
        ...     print(error)  # doctest: +NORMALIZE_WHITESPACE
        job 'report': the message is 300,079 bytes, over its queue's 262,144-byte limit (max_message_bytes,
        SQSJOBS_MAX_MESSAGE_BYTES) less 1,024 bytes the worker keeps for its own attributes; its largest
        arguments: csv (300,002 bytes), day (1 byte). Send IDs and re-fetch the data in the job: a queue takes
        up to 1,048,576 bytes (MaximumMessageSize), but SQS bills each 64 KiB of a message as one request.
        >>> check_message(JobMessage(job="report", key="report:7", body=body), limit=1_048_576)
    """
    if fits(message, limit):
        return
    size = message.size()
    reserved = reserved_bytes(message)
    if args is None:
        args = _body_args(message.body)
    raise MessageTooLargeError(
        f"job {message.job!r}: the message is {size:,} bytes, over its queue's {min(limit, MAX_BODY_BYTES):,}-byte "
        f"limit (max_message_bytes, SQSJOBS_MAX_MESSAGE_BYTES) less {reserved:,} bytes the worker keeps for its "
        f"own attributes; its largest arguments: {largest_arguments(args)}. "
        f"Send IDs and re-fetch the data in the job: a queue takes up to {MAX_BODY_BYTES:,} bytes "
        f"(MaximumMessageSize), but SQS bills each {BILLED_CHUNK_BYTES // 1024} KiB of a message as one request."
    )


def fits(message: JobMessage, limit: int = DEFAULT_MESSAGE_BYTES) -> bool:
    """True when ``message`` is within ``limit`` (and SQS's own) less what it leaves for the worker's attributes.

    Example:
        >>> from sqsjobs.enqueue._message import JobMessage
        >>> fits(JobMessage(job="a", key="a:1", body="x" * 3000), limit=4096), fits(JobMessage(
        ...     job="a", key="a:1", body="x" * 3100), limit=4096)
        (True, False)
    """
    return message.size() <= min(limit, MAX_BODY_BYTES) - reserved_bytes(message)


def reserved_bytes(message: JobMessage) -> int:
    """What ``message`` leaves of its queue's limit for the worker's attributes on a copy (``WORKER_ATTRIBUTE_BYTES``,
    and ``RESULT_ATTRIBUTE_BYTES`` more for a job that stores its result).

    Example:
        >>> from sqsjobs.enqueue._message import JobMessage
        >>> reserved_bytes(JobMessage(job="report", key="report:7", body="{}"))
        1024
    """
    source = message.source
    stores = source is not None and bool(source.options.store_result)
    return WORKER_ATTRIBUTE_BYTES + (RESULT_ATTRIBUTE_BYTES if stores else 0)


def check_key(job: str, key: str, *, template: str | None, args: Mapping[str, Any]) -> None:
    """Refuse a key DynamoDB cannot store: not valid UTF-8, or over 2,048 bytes; name the key and its fields."""
    origin = f"key template {template!r}" if template is not None else "the default key (job name + a hash)"
    try:
        size = len(key.encode("utf-8"))
    except UnicodeEncodeError:
        culprits = [name for name, value in args.items() if _has_surrogate(value)]
        raise InvalidArgumentsError(
            f"job {job!r}: its idempotency key holds a lone surrogate (from {', '.join(culprits) or origin}), which "
            "is not valid Unicode and cannot be a DynamoDB key; pass valid text (decode bytes with errors='replace')"
        ) from None
    if size > MAX_KEY_BYTES:
        fields = {name: value for name, value in args.items() if template is None or "{" + name in template}
        raise InvalidArgumentsError(
            f"job {job!r}: its idempotency key is {size:,} bytes, over DynamoDB's {MAX_KEY_BYTES:,}-byte key limit "
            f"(key {_preview(key)}, from {origin}; its largest fields: {largest_arguments(fields)}); "
            "build the key from IDs only"
        )


def _has_surrogate(value: Any) -> bool:
    values = value if isinstance(value, list) else [value]
    for item in values:
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


def _preview(key: str, length: int = 40) -> str:
    shown = key if len(key) <= length else key[:length] + "..."
    return repr(shown)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=True)


def _body_args(body: str) -> Mapping[str, Any]:
    try:
        data = json.loads(body)
    except ValueError:
        return {}
    args = data.get("args") if isinstance(data, dict) else None
    return args if isinstance(args, dict) else {}
