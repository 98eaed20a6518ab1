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


class RequestTemplate:
    """A request pynamodb built once, with marked holes that each call fills in.

    Building a conditional request through pynamodb's expression objects costs
    about 150 µs; the shape of a claim or a completion never changes for a
    table, only its values do. So the model builds each shape once, with
    sentinel values, and every call copies it with the real values put in:
    the model still owns names, types and conditions; the per-call cost is a
    small dict copy.

    Example:
        >>> template = RequestTemplate.build(
        ...     lambda v: {"Key": {"pk": {"S": v["key"]}}, "N": {"N": v["n"]}}, strings=("key",), numbers=("n",))
        >>> template.fill(key="invoice-email:42", n=7)
        {'Key': {'pk': {'S': 'invoice-email:42'}}, 'N': {'N': '7'}}
    """

    def __init__(self, shape: Any, holes: dict[str, str]) -> None:
        self.shape = shape
        self.holes = holes  # sentinel as serialized -> field name

    @classmethod
    def build(cls, make: Any, *, strings: tuple[str, ...] = (), numbers: tuple[str, ...] = ()) -> RequestTemplate:
        """Call ``make(values)`` once with sentinels for ``strings`` and ``numbers``."""
        import json

        values: dict[str, Any] = {name: f"\x00sqsjobs:{name}\x00" for name in strings}
        # Distinct, unmistakable floats; pynamodb serializes numbers with json.dumps.
        values.update({name: float(f"1.{i + 1}234567891e-300") for i, name in enumerate(numbers)})
        holes = {(v if isinstance(v, str) else json.dumps(v)): name for name, v in values.items()}
        return cls(make(values), holes)

    def fill(self, **values: str | float | int) -> dict[str, Any]:
        """The request with every hole replaced by its value (numbers serialized as DynamoDB ``N``)."""
        import json

        serialized = {name: v if isinstance(v, str) else json.dumps(v) for name, v in values.items()}
        filled: dict[str, Any] = self._fill(self.shape, serialized)
        return filled

    def _fill(self, node: Any, values: dict[str, str]) -> Any:
        if isinstance(node, dict):
            return {k: self._fill(v, values) for k, v in node.items()}
        if isinstance(node, list):
            return [self._fill(v, values) for v in node]
        if isinstance(node, str):
            name = self.holes.get(node)
            return node if name is None else values[name]
        return node
