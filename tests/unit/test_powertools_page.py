"""docs/powertools.md's table of the two idempotency tables says what the installed Powertools and our template do:
a Powertools release that renames an attribute or changes a default fails here, not in a user's migration."""

from __future__ import annotations

import inspect
from pathlib import Path

from template_support import load_template

ROOT = Path(__file__).resolve().parents[2]
PAGE = (ROOT / "docs" / "powertools.md").read_text(encoding="utf-8")


def test_the_powertools_side_is_the_installed_powertools() -> None:
    from aws_lambda_powertools.utilities.idempotency import DynamoDBPersistenceLayer, IdempotencyConfig
    from aws_lambda_powertools.utilities.idempotency.persistence.datarecord import STATUS_CONSTANTS

    layer = inspect.signature(DynamoDBPersistenceLayer).parameters
    defaults = {name: layer[name].default for name in ("key_attr", "expiry_attr", "in_progress_expiry_attr",
                                                       "status_attr", "data_attr")}
    assert defaults == {"key_attr": "id", "expiry_attr": "expiration", "in_progress_expiry_attr":
                        "in_progress_expiration", "status_attr": "status", "data_attr": "data"}
    for value in (*defaults.values(), *STATUS_CONSTANTS.values()):
        assert f"`{value}`" in PAGE, value
    config = inspect.signature(IdempotencyConfig).parameters
    assert (config["expires_after_seconds"].default, config["hash_function"].default) == (3600, "md5")
    assert "`expires_after_seconds=3600` (the default: one hour)" in PAGE and "MD5" in PAGE


def test_the_sqsjobs_side_is_the_template_s_table() -> None:
    table = load_template(ROOT / "template.yaml")["Resources"]["IdempotencyTable"]["Properties"]
    key = table["KeySchema"][0]["AttributeName"]
    ttl = table["TimeToLiveSpecification"]["AttributeName"]
    assert (key, ttl) == ("pk", "expires_at")
    assert f"| partition key | `id` (string) | `{key}` (string) |" in PAGE
    assert f"| TTL attribute | `expiration`, epoch seconds | `{ttl}`, epoch seconds |" in PAGE
