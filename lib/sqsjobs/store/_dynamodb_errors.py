"""The one place a DynamoDB call's botocore errors become sqsjobs' own.

Every request to the idempotency table is sent inside ``dynamodb_errors``: a
failed condition becomes ``ConditionFailed`` (an outcome the store turns into
a value), anything else becomes ``StoreError``. The calls themselves stay
plain, typed boto3 calls at their call sites.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqsjobs._errors import StoreError


class ConditionFailed(Exception):
    """A conditional write's condition did not hold; ``item`` is the stored item (``ALL_OLD``), if any.

    Internal: the store catches it and returns an outcome; it never leaves the store.
    """

    def __init__(self, item: dict[str, Any] | None = None) -> None:
        super().__init__("condition failed")
        self.item = item


@contextmanager
def dynamodb_errors(operation: str, table: str) -> Iterator[None]:
    """Translate the errors of the DynamoDB call made inside the block.

    Example:
        >>> with dynamodb_errors("GetItem", "jobs"):
        ...     raise ConnectionError("only botocore errors are translated")
        Traceback (most recent call last):
        ...
        ConnectionError: only botocore errors are translated
    """
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        yield
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            item: Any = error.response.get("Item")
            raise ConditionFailed(item) from None
        raise StoreError(f"DynamoDB {operation} on table {table} failed: {error}") from error
    except BotoCoreError as error:
        raise StoreError(f"DynamoDB {operation} on table {table} failed: {error}") from error
