"""The idempotency table's item shape, as a pynamodb model.

The model is the schema (attribute names and types, the TTL attribute) and
builds the conditional requests; the requests themselves go through the
injected botocore client, so tests can count and stub them. Models are built
per table name because pynamodb binds a model class to one table.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

KEY_ATTRIBUTE = "pk"
TTL_ATTRIBUTE = "expires_at"


@lru_cache(maxsize=16)
def job_record_model(table_name: str) -> Any:
    """The pynamodb ``Model`` class for job records in ``table_name``.

    Example:
        >>> Record = job_record_model("jobs")
        >>> Record("invoice-email:42", status="IN_PROGRESS").pk
        'invoice-email:42'
    """
    # Imported on first use: pynamodb costs ~200 ms of import that a handler's
    # cold start should not pay before its first batch.
    from pynamodb.attributes import NumberAttribute, UnicodeAttribute
    from pynamodb.models import Model

    class JobRecord(Model):
        class Meta:
            # Never used for I/O (requests go through the injected client);
            # pynamodb only needs a region to build its request kwargs.
            region = "us-east-1"

        pk = UnicodeAttribute(hash_key=True, attr_name=KEY_ATTRIBUTE)
        status = UnicodeAttribute()
        owner = UnicodeAttribute(null=True)
        lease_until = NumberAttribute(null=True)
        job = UnicodeAttribute(null=True)
        # A plain number (epoch seconds), which is what DynamoDB TTL reads.
        expires_at = NumberAttribute(null=True, attr_name=TTL_ATTRIBUTE)

    JobRecord.Meta.table_name = table_name  # type: ignore[attr-defined]
    return JobRecord
