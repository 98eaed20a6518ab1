"""The one place a DynamoDB call's botocore errors become sqsjobs' own.

Every table adapter (the guard's records, scheduler leases, chunked-run
records) sends its pynamodb-built requests through ``call``: a failed
condition becomes ``ConditionFailed`` (an outcome the adapter turns into a
value), anything else becomes ``StoreError``.
"""

from __future__ import annotations

from typing import Any


class ConditionFailed(Exception):
    """A conditional write's condition did not hold; ``item`` is the stored item when ``ALL_OLD`` was asked.

    Internal: adapters catch it and return an outcome, it never leaves them.
    """

    def __init__(self, item: dict[str, Any] | None = None) -> None:
        super().__init__("condition failed")
        self.item = item


def call(client: Any, operation: str, *, what: str, **kwargs: Any) -> dict[str, Any]:
    """``client.<operation>(**kwargs)`` with its errors translated; ``what`` names the table's role.

    Example:
        >>> call(dynamodb, "get_item", what="idempotency table", TableName="t", Key=key)  # doctest: +SKIP
        {'Item': {...}}
    """
    from botocore.exceptions import BotoCoreError, ClientError

    from sqsjobs.errors import StoreError

    try:
        response: dict[str, Any] = getattr(client, operation)(**kwargs)
    except ClientError as error:
        if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
            item: Any = error.response.get("Item")
            raise ConditionFailed(item) from None
        raise StoreError(f"DynamoDB {operation} on {kwargs.get('TableName')} ({what}) failed: {error}") from error
    except BotoCoreError as error:
        raise StoreError(f"DynamoDB {operation} on {kwargs.get('TableName')} ({what}) failed: {error}") from error
    return response
